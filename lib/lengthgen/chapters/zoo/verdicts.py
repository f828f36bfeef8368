"""Chapter 10's verdicts: generalizes, fails or not learned per run, agreement with the registered and revised
verdicts, and xPos against its RoPE twin."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .registered import (
    DESIGN_SEEDS,
    EXPECT_LEARNED,
    GENERALIZES_FLOOR,
    LEARNED_FLOOR,
    LEARNED_MAJORITY,
    PREDICTED_VERDICTS,
    REVISED_VERDICTS,
    REVISION_SEEDS,
    XPOS_MIN_EFFECT,
)


def measured_verdict(in_range: float, worst_beyond: float) -> str:
    """Not learned, generalizes or fails, from the in-range accuracy at ``T`` and the lowest out-of-range accuracy."""
    if in_range < LEARNED_FLOOR:
        return "not learned"
    return "generalizes" if worst_beyond >= GENERALIZES_FLOOR else "fails"


def verdict_table(accuracy: pd.DataFrame, train_length: int) -> pd.DataFrame:
    """One row per run: in-range accuracy at ``T``, lowest out-of-range accuracy, the measured verdict, the verdict
    registered before any run and whether they agree, the revised verdict and whether they agree."""
    rows = []
    for (encoding, k, seed), g in accuracy.groupby(["encoding", "offset", "seed"], sort=False):
        in_range = float(g[(g.length == train_length) & (g.metric == "in_range")].accuracy.iloc[0])
        worst = float(g[g.metric == "out_of_range"].accuracy.min())
        measured = measured_verdict(in_range, worst)
        predicted, revised = PREDICTED_VERDICTS[encoding][0], REVISED_VERDICTS[encoding][0]
        rows.append(dict(encoding=encoding, offset=k, seed=seed, in_range=in_range, worst_beyond=worst,
                         measured=measured, predicted=predicted, agrees=measured == predicted, revised=revised,
                         learned=measured != "not learned", agrees_revised=measured == revised))
    return pd.DataFrame(rows)


def agreement_table(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Per encoding: the a-priori and revised verdicts, the measured ones, and runs agreeing with each; the runs that
    learned in range; the in-range accuracy and the lowest out-of-range accuracy (mean and sd over runs)."""
    rows = []
    for encoding, g in verdicts.groupby("encoding", sort=False):
        rows.append(dict(encoding=encoding, predicted=g.predicted.iloc[0], revised=g.revised.iloc[0],
                         measured=", ".join(sorted(set(g.measured))), runs=len(g), agree_predicted=int(g.agrees.sum()),
                         agree_revised=int(g.agrees_revised.sum()), learned=int(g.learned.sum()),
                         in_range=g.in_range.mean(), worst_beyond_mean=g.worst_beyond.mean(),
                         worst_beyond_sd=g.worst_beyond.std(ddof=1) if len(g) > 1 else np.nan))
    return pd.DataFrame(rows)


def revised_checks(verdicts: pd.DataFrame, deviation: pd.DataFrame, seeds: list[int]) -> dict[str, float]:
    """The values of the checks on the revised verdicts (see ``CLAIMS``), from the runs' verdicts and measurements."""
    generalizing = verdicts[(verdicts.revised == "generalizes") & verdicts.encoding.isin(("rope", "partial_rope"))]
    failing = verdicts[verdicts.revised == "fails"]
    unlearnable = verdicts[verdicts.revised == "not learned"]
    learn_share = verdicts[verdicts.encoding.isin(EXPECT_LEARNED)].groupby("encoding").learned.mean()
    margins = deviation[deviation.trained & (deviation.encoding == "t5")]
    margins = margins.t5_margin if "t5_margin" in margins else pd.Series(dtype=float)
    seen = set(REVISION_SEEDS) | set(DESIGN_SEEDS)
    return dict(fresh_seeds=float(len(set(seeds) & seen)),
                generalizes_as_revised=float((generalizing.measured != "generalizes").sum()),
                fails_when_learned=float((failing.learned & (failing.measured == "generalizes")).sum()),
                learned_majority=float((learn_share <= LEARNED_MAJORITY).sum()),
                not_learnable=float(unlearnable.learned.sum()),
                t5_far_outweigh=float((~(margins > 0)).sum()))


XPOS_PAIR_COLUMNS = ["offset", "seed", "measured", "worst_beyond", "judged", "far", "rope_far", "far_predicted",
                     "worst_predicted", "far_init", "rope_far_init", "parameter_gap"]


def xpos_pairs(verdicts: pd.DataFrame, xpos: pd.DataFrame) -> pd.DataFrame:
    """One row per xPos run: its verdict and lowest out-of-range accuracy; whether it is judged against its RoPE twin
    (same offset and seed; both learned in range, and the prediction differs from the twin by more than
    :data:`XPOS_MIN_EFFECT`); both twins' far attention, trained and at init; the prediction from the RoPE twin
    (:func:`xpos_twin`): far attention and lowest out-of-range accuracy; and the parameter gap (NaN without a twin)."""
    learned = verdicts.set_index(["encoding", "offset", "seed"]).learned
    measures = xpos.set_index(["encoding", "offset", "seed"])
    rows = []
    for run in verdicts[verdicts.encoding == "xpos"].itertuples():
        own, twin = measures.loc[("xpos", run.offset, run.seed)], ("rope", run.offset, run.seed)
        rope = measures.loc[twin] if twin in measures.index else None
        effect = abs(math.log(rope.far_predicted / rope.far)) if rope is not None and rope.far > 0 and \
            rope.far_predicted > 0 else 0.0
        gap = math.nan
        if rope is not None:
            qk_x, qk_r, qk_0 = (np.asarray(v, dtype=float) for v in (own.qk, rope.qk, rope.qk_init))
            gap = float(np.linalg.norm(qk_x - qk_r) / np.linalg.norm(qk_r - qk_0))
        rows.append(dict(offset=run.offset, seed=run.seed, measured=run.measured, worst_beyond=run.worst_beyond,
                         judged=bool(run.learned and rope is not None and learned.get(twin, False)
                                     and effect > math.log(XPOS_MIN_EFFECT) and own.far > 0), far=own.far,
                         rope_far=math.nan if rope is None else rope.far,
                         far_predicted=math.nan if rope is None else rope.far_predicted,
                         worst_predicted=math.nan if rope is None else rope.worst_predicted, far_init=own.far_init,
                         rope_far_init=math.nan if rope is None else rope.far_init, parameter_gap=gap))
    return pd.DataFrame(rows, columns=XPOS_PAIR_COLUMNS)


def xpos_checks(pairs: pd.DataFrame) -> dict[str, float]:
    """The xPos check and reported numbers (see ``CLAIMS``) from :func:`xpos_pairs`; every share but the check's is
    over the judged pairs."""
    nothing = dict(xpos_generalizes=0.0, xpos_far_predicted=1.0, xpos_parameter_gap=math.nan,
                   xpos_lower_share=math.nan, xpos_lower_at_init=math.nan, xpos_predicted_lower=math.nan)
    if not len(pairs):
        return nothing
    judged = pairs[pairs.judged.astype(bool)]
    to_prediction = np.abs(np.log(judged.far / judged.far_predicted))
    to_twin = np.abs(np.log(judged.far / judged.rope_far))
    values = dict(xpos_generalizes=float((pairs.measured != "generalizes").sum()),
                  xpos_far_predicted=float((to_prediction < to_twin).sum() / len(pairs)))
    if not len(judged):
        return nothing | values
    return values | dict(xpos_parameter_gap=float(judged.parameter_gap.mean()),
                         xpos_lower_share=float((judged.far < judged.rope_far).mean()),
                         xpos_lower_at_init=float((judged.far_init < judged.rope_far_init).mean()),
                         xpos_predicted_lower=float((judged.far_predicted < judged.rope_far).mean()))
