"""Chapter 13's values for its claims, from the default run and from the committed sweep's held-out runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ...analysis.held_out import committed_runs
from ...model.evaluation import doubling_lengths
from .collapse import balanced_accuracy, collapse_cells, configuration_rule, length_only_rule, split_groups
from .phases import (
    learned_planes,
    lift_pairs_value,
    mean_out_of_range,
    out_of_range_at,
    paired_shares,
    phase_summary,
    unseen_phase,
    unseen_plane_change,
    unseen_shares,
)
from .registered import (
    ADAM_CONTROL,
    ADAM_CONTROL_CHECKS,
    ADAM_CONTROL_LABEL,
    ADAM_CONTROL_MIN_PAIRED,
    CHAPTER,
    CHAPTER6_SEEDS,
    HELD_OUT_CHECKS,
    INIT_LABELS,
    NETWORK_KEYS,
    PHASE_CHECKS,
    REGISTERED_PHASE_LIFT_SHARE,
    WIDE_INIT_BAR,
)

if TYPE_CHECKING:  # for the annotations only
    from . import InitializationStudy, Parameters



def held_out_passes(checks: pd.DataFrame) -> pd.Series:
    """Whether each held-out run's check (rows of ``committed_runs(...).checks``) holds: its recorded verdict, and for
    the phase check, which is reported and so recorded without one, its value against the registered bar
    (``REGISTERED_PHASE_LIFT_SHARE``; NaN, not judged, fails)."""
    phase = checks.name.isin(PHASE_CHECKS)
    recorded = checks.passed.map(lambda v: v is True)
    return recorded.where(~phase, checks.value.astype(float) >= REGISTERED_PHASE_LIFT_SHARE)


def held_out_table(checks: pd.DataFrame) -> pd.DataFrame:
    """The held-out runs' evidence, Adam-control and phase checks, one column per run: each value, marked where the run
    fails the check (:func:`held_out_passes`)."""
    shown = checks[checks.name.isin(HELD_OUT_CHECKS + ADAM_CONTROL_CHECKS + PHASE_CHECKS)]
    marks = [f"{v:.3f}" + ("" if ok else " (fails)") for v, ok in zip(shown.value, held_out_passes(shown), strict=True)]
    return shown.assign(value=marks).pivot_table(index="name", columns=["offset", "seeds"], values="value",
                                                 aggfunc="first")


def held_out_values(name: str) -> dict[str, float]:
    """``held_out_complete``, ``held_out_failures``, ``held_out_adam_control`` and ``held_out_phases`` (the last three
    NaN, a failure, without a sweep or without runs)."""
    if not name:
        return dict(held_out_complete=0.0, held_out_failures=float("nan"), held_out_adam_control=float("nan"),
                    held_out_phases=float("nan"))
    held = committed_runs(name, CHAPTER)
    if not len(held.checks):
        return dict(held_out_complete=float(held.missing), held_out_failures=float("nan"),
                    held_out_adam_control=float("nan"), held_out_phases=float("nan"))

    def failing_runs(checks: tuple[str, ...]) -> float:
        """Runs in which one of ``checks`` fails or is missing (a run without the check is no evidence for it)."""
        passing = {key: set(run.name[held_out_passes(run)]) for key, run in held.checks.groupby("key")}
        return float(sum(not set(checks) <= names for names in passing.values()))

    return dict(held_out_complete=float(held.missing), held_out_failures=failing_runs(HELD_OUT_CHECKS),
                held_out_adam_control=failing_runs(ADAM_CONTROL_CHECKS), held_out_phases=failing_runs(PHASE_CHECKS))


def claim_values(study: InitializationStudy, p: Parameters) -> dict[str, float]:
    """Every registered number of the chapter from its study."""
    nets, acc = study.networks, study.accuracy
    T = p.train_length
    lengths = doubling_lengths(T, p.length_factor)
    cells = collapse_cells(nets, lengths)
    split = split_groups(cells) if len(cells) else pd.Series(dtype=bool)
    planes = learned_planes(study.planes, nets)

    def scored(rule: np.ndarray, where: pd.Series | None = None) -> float:
        if not len(cells):
            return float("nan")
        keep = np.ones(len(cells), bool) if where is None else where.to_numpy(bool)
        return balanced_accuracy(cells.collapsed.to_numpy(bool)[keep], np.asarray(rule, bool)[keep]) if keep.any() \
            else float("nan")

    def gap(length: int, init_a: str, base_a: str, init_b: str, base_b: str) -> float:
        return (mean_out_of_range(acc, nets, length, init=init_a, base_kind=base_a)
                - mean_out_of_range(acc, nets, length, init=init_b, base_kind=base_b))

    values = dict(
        fresh_seeds=float(len(set(p.seed_list) & CHAPTER6_SEEDS)),
        init_scale_applied=float(nets.init_scale_error.max()),
        not_learned=float((~nets.learned).sum()),
        without_retrieval_head=float((nets.learned & (nets.retrieval_heads == 0)).sum()),
        wide_init_helps=gap(2 * T, "all", "standard", "gpt2", "standard"),
        qk_init_gain_2T=gap(2 * T, "qk", "standard", "gpt2", "standard"),
        fix_helps_gpt2=gap(4 * T, "gpt2", "identifiable", "gpt2", "standard"),
        fix_gain_wide_4T=gap(4 * T, "all", "identifiable", "all", "standard"),
        collapse_predicted=scored(cells.predicted),
        collapse_length_only=scored(length_only_rule(cells)) if len(cells) else float("nan"),
        collapse_config_rule=scored(configuration_rule(cells)) if len(cells) else float("nan"),
        collapse_predicted_split=scored(cells.predicted, split),
        collapse_split_cells=float(split.sum()),
        collapse_softmax_rule=scored(cells.softmax),
        collapse_measured_rule=scored(cells.measured),
        predicted_measured_agree=float((cells.predicted == cells.measured).mean()) if len(cells) else float("nan"),
        unseen_plane_change_gpt2=unseen_plane_change(planes, "gpt2"),
        unseen_plane_change_wide=unseen_plane_change(planes, "all"),
    )
    shares = unseen_shares(planes)
    median = shares.groupby("init").unseen_share.median()
    pairs = paired_shares(shares)
    values["unseen_share_init"] = float(unseen_shares(planes, "amplitude_init").unseen_share.median()) if len(planes) \
        else float("nan")
    values["unseen_share_gpt2"] = float(median.get("gpt2", float("nan")))
    values["unseen_share_wide"] = float(median.get("all", float("nan")))
    values["unseen_share_wide_lower"] = float((pairs.gpt2 > pairs["all"]).mean()) if len(pairs) else float("nan")
    at_2T = acc[(acc.metric == "out_of_range") & (acc.length == 2 * T)][[*NETWORK_KEYS, "accuracy"]]
    paired = shares.merge(at_2T, on=NETWORK_KEYS)

    def rank(frame: pd.DataFrame) -> float:
        return float(frame.unseen_share.corr(frame.accuracy, method="spearman")) if len(frame) > 2 else float("nan")

    values["unseen_share_rank_correlation"] = rank(paired)
    within = [rank(group) for _, group in paired.groupby("init")]
    values["unseen_share_rank_within"] = float(np.nanmean(within)) if within and not np.all(np.isnan(within)) \
        else float("nan")
    values["unseen_phase_lift_gpt2_higher"] = lift_pairs_value(planes, nets, T)
    phases = phase_summary(planes, T)
    for init, tag in (("gpt2", "gpt2"), ("all", "wide")):
        for measure, name in (("phase_lift", "phase_lift"), ("far_lift_nats", "lift_nats"),
                              ("target_resultant", "resultant")):
            values[f"unseen_{name}_{tag}"] = unseen_phase(phases, init, measure)
    values["unseen_resultant_init"] = unseen_phase(phases, "gpt2", "init_resultant")
    return values | adam_control_values(study, p, values["wide_init_helps"]) | held_out_values(p.committed_sweep)


def adam_control_values(study: InitializationStudy, p: Parameters, wide_gain: float) -> dict[str, float]:
    """The Adam control's numbers: its networks (``study.control``) against the GPT-2 and 'all x s' networks at base
    10^4, paired by seed, head width and offset with the GPT-2 networks trained at ``lr``; ``wide_gain`` is the run's
    ``wide_init_helps``, of which ``adam_control_helps`` is a fraction."""
    names = ["adam_control_not_learned", "adam_control_paired", "adam_control_gain_2T", "adam_control_helps",
             "adam_control_share_lower", "adam_control_minus_wide_2T", "adam_control_change", "adam_control_share",
             "adam_control_phase_lift"]
    control = study.control
    if control is None or not len(control.networks):
        return dict.fromkeys(names, float("nan"))
    two_T = 2 * p.train_length

    def learned_at_2T(part: InitializationStudy, init: str) -> pd.Series:
        return out_of_range_at(part.accuracy, part.networks, two_T, init=init, base_kind="standard").droplevel("init")

    paired = pd.concat([learned_at_2T(study, "gpt2").rename("gpt2"), learned_at_2T(control, ADAM_CONTROL).rename("control")],
                       axis=1, join="inner")
    enough = len(paired) >= ADAM_CONTROL_MIN_PAIRED * len(control.networks)
    gain = float((paired.control - paired.gpt2).mean()) if len(paired) else float("nan")
    control_planes = learned_planes(control.planes, control.networks)
    shares = unseen_shares(pd.concat([learned_planes(study.planes, study.networks), control_planes], ignore_index=True))
    share_pairs = paired_shares(shares, "gpt2", ADAM_CONTROL)
    median = shares[shares.init == ADAM_CONTROL].unseen_share.median() if len(shares) else float("nan")
    control_2T = mean_out_of_range(control.accuracy, control.networks, two_T, init=ADAM_CONTROL, base_kind="standard")
    return dict(
        adam_control_not_learned=float((~control.networks.learned).sum()),
        adam_control_paired=float(len(paired)),
        adam_control_gain_2T=gain,
        adam_control_helps=gain / wide_gain if enough and wide_gain >= WIDE_INIT_BAR else float("nan"),
        adam_control_share_lower=float((share_pairs.gpt2 > share_pairs[ADAM_CONTROL]).mean())
        if enough and len(share_pairs) else float("nan"),
        adam_control_minus_wide_2T=control_2T - mean_out_of_range(study.accuracy, study.networks, two_T, init="all",
                                                                   base_kind="standard"),
        adam_control_change=unseen_plane_change(control_planes, ADAM_CONTROL),
        adam_control_share=float(median) if median == median else float("nan"),
        adam_control_phase_lift=unseen_phase(phase_summary(control_planes, p.train_length), ADAM_CONTROL,
                                             "phase_lift"))


def adam_control_table(study: InitializationStudy, p: Parameters) -> pd.DataFrame:
    """Base 10^4: the GPT-2 networks at ``lr``, the Adam control (GPT-2 at ``lr / s``) and 'all x s' at ``lr``, one row
    each: learned networks, mean out-of-range accuracy at 2T and 4T (learned networks), and over the learned networks'
    retrieval heads the median unseen-plane share, the median relative change of the unseen planes' weights and their
    phase lift (:func:`phase_summary`)."""
    T = p.train_length
    groups = [(f"{INIT_LABELS['gpt2']}, lr", study, "gpt2", p.lr),
              (ADAM_CONTROL_LABEL, study.control, ADAM_CONTROL, p.lr / p.init_scale),
              (f"{INIT_LABELS['all']}, lr", study, "all", p.lr)]
    rows = []
    for label, part, init, lr in groups:
        if part is None or not len(part.networks):
            continue
        nets = part.networks[(part.networks.init == init) & (part.networks.base_kind == "standard")]
        planes = learned_planes(part.planes, part.networks)
        shares = unseen_shares(planes)
        rows.append(dict(initialization=label, learning_rate=lr, learned=f"{int(nets.learned.sum())} of {len(nets)}",
                         **{f"accuracy_{n}T": mean_out_of_range(part.accuracy, part.networks, n * T, init=init,
                                                                base_kind="standard") for n in (2, 4)},
                         unseen_share=float(shares[shares.init == init].unseen_share.median()) if len(shares)
                         else float("nan"),
                         unseen_change=unseen_plane_change(planes, init),
                         unseen_phase_lift=unseen_phase(phase_summary(planes, T), init, "phase_lift")))
    return pd.DataFrame(rows)
