"""Chapter 10's committed sweep: its held-out heads read back, their design checked, and the pooled cells judged."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...analysis.held_out import CommittedRuns, committed_runs
from ...analysis.stats import binomial_interval, excess_failure_p_value
from ..committed import SIGNIFICANCE, TOLERATED_FAILURE_RATE
from .mechanisms import (
    DIAGNOSTIC_COLUMNS,
)
from .registered import (
    CHAPTER,
    EXPECT_LEARNED,
    FIRE_DRIFT_TOLERANCE,
    HELD_OUT_CONFIDENCE,
    HELD_OUT_DESIGN,
    HELD_OUT_DEVICE,
    HELD_OUT_EVIDENCE,
    HELD_OUT_FREE,
    HELD_OUT_MIN_JUDGED,
    HELD_OUT_RUN_SEEDS,
    XPOS_PAIRED_SHARE,
)
from .verdicts import XPOS_PAIR_COLUMNS, xpos_checks


@dataclass
class HeldOutZoo:
    """The committed sweep's current runs of this chapter: their checks, per-head details and parameters."""

    runs: CommittedRuns  # checks of every present run, and how many the spec lists and miss
    verdicts: pd.DataFrame  # one row per (encoding, offset, seed) of the present runs: verdict_table's columns
    t5: pd.DataFrame  # one row per T5 head: offset, seed, t5_margin
    fire: pd.DataFrame  # one row per FIRE head: ZooStudy.fire's columns
    xpos: pd.DataFrame  # one row per xPos head: xpos_pairs' columns
    diagnostics: pd.DataFrame  # one row per trained head: encoding, offset, seed and attention_diagnostics' numbers
    parameters: list[dict]  # each present run's full parameters
    wall_times: list[float]  # seconds of each present run


def held_out_zoo(name: str) -> HeldOutZoo | None:
    """Read the committed sweep ``data/sweeps/<name>`` (None for ``""``): every current run's checks and details."""
    if not name:
        return None
    runs = committed_runs(name, CHAPTER)
    return HeldOutZoo(runs, runs.rows("verdicts"), runs.rows("t5", ["offset", "seed", "t5_margin"]),
                      runs.rows("fire", ["offset", "seed", "c", "threshold", "drift_error", "no_drift_error",
                                         "fraction_error"]),
                      runs.rows("xpos_pairs", XPOS_PAIR_COLUMNS),
                      runs.rows("diagnostics", ["encoding", "offset", "seed", *DIAGNOSTIC_COLUMNS]),
                      runs.parameters, runs.wall_seconds)


def design_violations(held: HeldOutZoo, defaults: dict) -> int:
    """Runs of ``held`` away from :data:`HELD_OUT_DESIGN` (an offset's seeds not its own, a head another run has too,
    a device other than :data:`HELD_OUT_DEVICE`, a parameter outside :data:`HELD_OUT_FREE` away from ``defaults``),
    plus the design's (offset, seed) heads that no run has."""
    design = {(k, seed) for k, starts in HELD_OUT_DESIGN.items() for start in starts
              for seed in range(start, start + HELD_OUT_RUN_SEEDS)}
    bad, seen = 0, set()
    for run in held.parameters:
        heads = {(k, seed) for k in run["offsets"] for seed in range(run["seed_start"], run["seed_start"] + run["seeds"])}
        moved = any(run[name] != value for name, value in defaults.items() if name not in HELD_OUT_FREE)
        bad += int(moved or not heads <= design or bool(heads & seen) or run["seeds"] != HELD_OUT_RUN_SEEDS
                   or run["device"] != HELD_OUT_DEVICE)
        seen |= heads
    return bad + len(design - seen)


def pooled_cell(misses: int, judged: int, needed: int) -> tuple[float, bool]:
    """The held-out rule on one pooled cell: the exact one-sided binomial p-value of ``misses`` in ``judged`` at
    :data:`TOLERATED_FAILURE_RATE` (NaN when nothing is judged), and whether the cell holds (p at least
    :data:`SIGNIFICANCE` over at least ``needed`` judged heads)."""
    p_value = excess_failure_p_value(misses, judged, TOLERATED_FAILURE_RATE) if judged else math.nan
    return p_value, bool(judged >= needed and p_value >= SIGNIFICANCE)


def held_out_cells(verdicts: pd.DataFrame, needed: int = HELD_OUT_MIN_JUDGED) -> pd.DataFrame:
    """Per encoding over the held-out heads: the revised verdict, heads, heads learned, heads generalizing; among the
    learned heads, those whose verdict is the revised one, their share and its exact interval
    (:data:`HELD_OUT_CONFIDENCE`); and the pooled test of ``held_out_verdicts`` (encodings expected to learn only):
    heads judged, misses, the one-sided binomial p-value, and whether the cell holds (over at least ``needed``)."""
    rows = []
    for encoding, g in verdicts.groupby("encoding", sort=False):
        learned = g[g.learned.astype(bool)]
        agree = int(learned.agrees_revised.astype(bool).sum())
        low, high = binomial_interval(agree, len(learned), HELD_OUT_CONFIDENCE) if len(learned) else (math.nan,) * 2
        revised = g.revised.iloc[0]
        judged = g if revised == "generalizes" else learned
        misses = int((judged.measured != revised).sum())
        tested = encoding in EXPECT_LEARNED
        p_value, holds = pooled_cell(misses, len(judged), needed)
        rows.append(dict(encoding=encoding, revised=revised, heads=len(g), learned=len(learned),
                         generalizes=int((g.measured == "generalizes").sum()), agree=agree,
                         share=agree / len(learned) if len(learned) else math.nan, low=low, high=high,
                         judged=len(judged) if tested else 0, misses=misses if tested else 0,
                         p_value=p_value if tested else math.nan, holds=holds if tested else None,
                         worst_beyond=float(learned.worst_beyond.mean()) if len(learned) else math.nan))
    return pd.DataFrame(rows, columns=["encoding", "revised", "heads", "learned", "generalizes", "agree", "share", "low",
                                       "high", "judged", "misses", "p_value", "holds", "worst_beyond"])


def held_out_mechanism_table(held: HeldOutZoo) -> pd.DataFrame:
    """The pooled mechanism checks of ``held_out_mechanisms``, one row each: heads judged, misses, the p-value (T5,
    FIRE) or the share closer to the prediction (xPos), and whether it holds."""
    learned = held.verdicts.set_index(["encoding", "offset", "seed"]).learned.astype(bool)
    t5_miss = int((~(held.t5.t5_margin.astype(float) > 0)).sum())
    fire = held.fire[[bool(learned.get(("fire", o, s), False)) for o, s in zip(held.fire.offset, held.fire.seed,
                                                                                  strict=True)]]
    fire_miss = int((~(fire.drift_error.astype(float) <= FIRE_DRIFT_TOLERANCE)).sum())
    share = xpos_checks(held.xpos)["xpos_far_predicted"] if len(held.xpos) else math.nan
    rows = [dict(mechanism=name, judged=n, misses=miss, statistic=p_value, holds=holds)
            for name, miss, n in (("t5_far_outweigh", t5_miss, len(held.t5)), ("fire_drift", fire_miss, len(fire)))
            for p_value, holds in [pooled_cell(miss, n, HELD_OUT_MIN_JUDGED)]]
    closer = round(share * len(held.xpos)) if len(held.xpos) else 0
    rows.append(dict(mechanism="xpos_far_predicted", judged=len(held.xpos), misses=len(held.xpos) - closer,
                     statistic=share, holds=bool(len(held.xpos) >= HELD_OUT_MIN_JUDGED and share >= XPOS_PAIRED_SHARE)))
    return pd.DataFrame(rows, columns=["mechanism", "judged", "misses", "statistic", "holds"])


def offset_cells(verdicts: pd.DataFrame) -> int:
    """(encoding, offset) cells of the encodings expected to learn whose misses fail held_out_verdicts' binomial rule
    on their own heads (no minimum of judged heads; a cell with none judged fails)."""
    failing = 0
    for _, g in verdicts[verdicts.encoding.isin(EXPECT_LEARNED)].groupby("offset"):
        cells = held_out_cells(g, needed=1)
        failing += int((~cells.holds.astype(bool)).sum())
    return failing


def failing_argmax(held: HeldOutZoo, encoding: str) -> float:
    """Mean over the held-out heads of ``encoding`` that learned and fail of the share of out-of-range diagnostic
    queries whose most-attended key is the target (NaN when none fails)."""
    verdicts = held.verdicts[(held.verdicts.encoding == encoding) & (held.verdicts.measured == "fails")]
    heads = set(zip(verdicts.offset, verdicts.seed, strict=True))
    diagnostics = held.diagnostics
    chosen = [e == encoding and (o, s) in heads
              for e, o, s in zip(diagnostics.encoding, diagnostics.offset, diagnostics.seed, strict=True)]
    rows = diagnostics[np.asarray(chosen, dtype=bool)]
    return float(rows.argmax_target.mean()) if len(rows) else math.nan


def held_out_values(held: HeldOutZoo | None, defaults: dict) -> dict[str, float]:
    """The held-out claims' values (see ``CLAIMS``): NaN, a failure for the asserted ones, without a sweep or runs.
    ``defaults``: the parameters the design's runs must keep (the notebook's parameters cell, ``chapter.defaults``)."""
    nothing = dict(held_out_design=math.nan, held_out_verdicts=math.nan, held_out_mechanisms=math.nan,
                   held_out_run_failures=math.nan, held_out_offset_cells=math.nan, held_out_partial_argmax=math.nan,
                   held_out_other_failures=math.nan,
                   held_out_agreement=math.nan, held_out_predicted_disagreements=math.nan)
    if held is None:
        return dict(held_out_complete=0.0) | nothing
    checks = held.runs.checks
    if not len(checks) or not len(held.verdicts):
        return dict(held_out_complete=float(held.runs.missing)) | nothing
    passing = {key: set(run.name[run.passed.map(lambda v: v is True)]) for key, run in checks.groupby("key")}
    guards = checks[checks.role.isin(("proof", "sanity")) & ~checks.name.str.startswith("held_out")]
    cells = held_out_cells(held.verdicts)
    cells = cells[cells.encoding.isin(EXPECT_LEARNED)]
    missing_cells = set(EXPECT_LEARNED) - set(cells.encoding)
    judged = held.verdicts[held.verdicts.encoding.isin(EXPECT_LEARNED) & held.verdicts.learned.astype(bool)]
    return dict(held_out_complete=float(held.runs.missing), held_out_design=float(design_violations(held, defaults)),
                held_out_verdicts=float((~cells.holds.astype(bool)).sum() + len(missing_cells)),
                held_out_mechanisms=float((~held_out_mechanism_table(held).holds.astype(bool)).sum()),
                held_out_run_failures=float(sum(not set(HELD_OUT_EVIDENCE) <= names for names in passing.values())),
                held_out_offset_cells=float(offset_cells(held.verdicts)),
                held_out_partial_argmax=failing_argmax(held, "partial_rope"),
                held_out_other_failures=float(guards.passed.map(lambda v: v is False).sum()),
                held_out_agreement=float(judged.agrees_revised.astype(bool).mean()) if len(judged) else math.nan,
                held_out_predicted_disagreements=float((~held.verdicts.agrees.astype(bool)).sum()))
