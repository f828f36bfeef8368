"""Linear Representation Complexity (LRC) verdicts by linear algebra alone, no training: what chapter 8 measures and
chapter 9 compares with."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model import pola


def lrc_verdict(lrc_at_t: float, lrc_longest: float) -> str:
    """The verdict LRC predicts: not representable at ``T``, generalizes if it stops growing, fails if it grows."""
    if not np.isfinite(lrc_at_t):
        return "not representable"
    return "generalizes" if lrc_longest == lrc_at_t else "fails"


def lrc_text(at_t: float, longest: float) -> str:
    """``"LRC(T)→LRC(longest)"`` with ``∞`` for a target no table represents (the verdict table's cell text)."""
    def fmt(v: float) -> str:
        return "∞" if not np.isfinite(v) else f"{v:.0f}"

    return f"{fmt(at_t)}→{fmt(longest)}"


def lrc_verdicts(train_scale: int, scale_factor: int, shift: int, prefix_max: int, rope_dim: int, rope_base: float,
                 ) -> pd.DataFrame:
    """The LRC verdict of every (task, relation) cell, by linear algebra alone (no training): what chapter 8's
    verdict table predicts, for chapters that compare with it."""
    rows = []
    longest = scale_factor * train_scale
    for task in pola.TASKS:
        spec = pola.TaskSpec(task, shift, prefix_max)
        for relation in pola.RELATIONS:
            at_t, last = 0.0, 0.0
            for head in range(pola.HEADS[task]):
                scales = list(range(spec.smallest_scale, longest + 1))
                by_scale = [pola.cells(relation, pola.instances(spec, head, n)) for n in scales]
                param = pola.parametrization(relation, by_scale, rope_dim, rope_base)
                curve = pola.representation_curve(param, by_scale)
                at_t += curve[scales.index(train_scale)][0]
                last += curve[-1][0]
            rows.append(dict(task=task, relation=relation, lrc_at_T=at_t, lrc_longest=last,
                             verdict=lrc_verdict(at_t, last)))
    return pd.DataFrame(rows)
