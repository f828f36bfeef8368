"""Chapter 12's verdicts: SRC's conjecture per (task, scheme) cell, what a run measured and selected, and the groups of
held-out runs its claims count."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...claims import claims_of
from ...model import programs
from ...model.relation_network import SCHEMES
from .registered import (
    ADDED_TASKS,
    FIRE,
    FIRST_SWEEP_TASKS,
    GENERALIZES_FLOOR,
    HELD_OUT_MINIMUM,
    HELD_OUT_SEEDS,
    INTERLEAVED,
    INTERLEAVED_MINIMUM,
    LEARNED_FLOOR,
    PAGE_MINIMUM,
    PILOT_SEEDS,
    SHARE_FLOOR,
    TABLE_SCHEMES,
    TRAINED_TASKS,
)


def conjecture(train_scale: int, scale_factor: int) -> pd.DataFrame:
    """SRC's verdict of every (task, scheme) cell (:func:`lengthgen.model.programs.src_table`), indexed by both."""
    return pd.DataFrame(programs.src_table(train_scale, scale_factor)).set_index(["task", "scheme"])


def invariant_reads(task: str, scheme: str, train_scale: int, scale_factor: int) -> dict[str, set[int]]:
    """:func:`lengthgen.model.programs.invariant_reads` in the network's relations (``hint_offset_0`` is ``offset``);
    none for a scheme that is not an SRC scheme (FIRE)."""
    if scheme not in programs.SCHEMES:
        return {}
    needed: dict[str, set[int]] = {}
    for relation, keys in programs.invariant_reads(task, scheme, train_scale, scale_factor).items():
        needed.setdefault("offset" if relation == "hint_offset_0" else relation, set()).update(keys)
    return needed


def invariant_text(task: str, scheme: str, train_scale: int, scale_factor: int) -> str:
    """The invariant reads of a cell in words: ``"hint_mirror_2 = -1; offset = 1"`` (``"none"``)."""
    return "; ".join(f"{r} = {', '.join(map(str, sorted(k)))}"
                     for r, k in sorted(invariant_reads(task, scheme, train_scale, scale_factor).items())) or "none"


def selection(usage: pd.DataFrame, train_scale: int, scale_factor: int) -> pd.DataFrame:
    """Per run: the relation holding most of the tables' used mass (``selected``; ``none`` when no entry is used),
    its largest positive entry across layers and heads (``value``, ``bias``), and whether that is a read of an
    SRC-invariant program of the task, the relation holding at least :data:`SHARE_FLOOR` of the mass (``needed``), and
    the share of the used mass on relations of the task's invariant reads (``invariant_mass``;
    offsets stand for ``hint_offset_0``, the same relation). A run with no usage rows (no tables) is not in the
    table; :func:`verdict_table` marks it as selecting nothing."""
    rows = []
    for (scheme, task, seed), g in (usage.groupby(["scheme", "task", "seed"], sort=False) if len(usage) else ()):
        mass = g.groupby("relation").mass.sum()
        selected = str(mass.idxmax()) if mass.max() > 0 else "none"
        needed = invariant_reads(task, scheme, train_scale, scale_factor)
        value, bias, ok = "", float("nan"), False
        if selected != "none":
            peak = g[g.relation == selected].sort_values("peak_bias").iloc[-1]
            value, bias = str(peak.peak_value), float(peak.peak_bias)
            ok = (selected in needed and selected != "absolute" and bias > 0 and int(value) in needed[selected]
                  and mass.max() >= SHARE_FLOOR * mass.sum())
        rows.append(dict(scheme=scheme, task=task, seed=seed, selected=selected, value=value, bias=bias,
                         share=float(mass.max() / mass.sum()) if mass.sum() > 0 else 0.0, needed=ok,
                         invariant_mass=float(mass[mass.index.isin(list(needed))].sum() / mass.sum())
                         if mass.sum() > 0 else 0.0,
                         invariant_reads=invariant_text(task, scheme, train_scale, scale_factor)))
    return pd.DataFrame(rows, columns=["scheme", "task", "seed", "selected", "value", "bias", "share", "needed",
                                       "invariant_mass", "invariant_reads"])


def measured_verdict(in_range: float, worst_answers: float) -> str:
    """Not learned, generalizes or fails, from the lowest exact match at training scales and the lowest answer
    accuracy over ``N+1 .. 2N``."""
    if in_range < LEARNED_FLOOR:
        return "not learned"
    return "generalizes" if worst_answers >= GENERALIZES_FLOOR else "fails"


def verdict_table(accuracy: pd.DataFrame, usage: pd.DataFrame, train_scale: int, scale_factor: int) -> pd.DataFrame:
    """One row per run: lowest exact match at the evaluated training scales, lowest answer accuracy over
    ``N+1 .. 2N``, exact match at ``N+1`` and ``2N``, SRC at ``N`` and at the largest scale, the measured and the
    conjecture's verdicts, and what the tables selected (:func:`selection`)."""
    src = conjecture(train_scale, scale_factor)
    n, rows = train_scale, []
    for (scheme, task, seed), g in accuracy.groupby(["scheme", "task", "seed"], sort=False):
        at = g.set_index("scale")
        beyond = at[(at.index > n) & (at.index <= 2 * n)]
        in_range = float(at.exact[at.index <= n].min())
        worst = float(beyond.token.min())
        measured = measured_verdict(in_range, worst)
        registered = (task, scheme) in src.index  # FIRE is compared with the schemes, not an SRC scheme
        cell = src.loc[(task, scheme)] if registered else pd.Series(dict(src_train=np.nan, src_largest=np.nan,
                                                                             predicted="", program=""))
        rows.append(dict(scheme=scheme, task=task, seed=seed, in_range=in_range, worst_answers=worst,
                         exact_n1=float(at.exact[n + 1]), exact_2n=float(at.exact[2 * n]),
                         answers_2n=float(at.token[2 * n]), src_n=cell.src_train, src_largest=cell.src_largest,
                         registered=registered, grows=cell.predicted == "fails", predicted=cell.predicted,
                         program=cell.program, measured=measured, learned=measured != "not learned",
                         agrees=registered and measured == cell.predicted, position_head=programs.has_position_head(task)))
    verdicts = pd.DataFrame(rows).merge(selection(usage, train_scale, scale_factor), on=["scheme", "task", "seed"],
                                        how="left")
    return verdicts.fillna({"selected": "none", "value": "", "share": 0.0, "needed": False, "invariant_mass": 0.0,
                            "invariant_reads": "none"}).astype({"needed": bool})


def _share(judged: pd.DataFrame, column: str) -> float:
    return float(judged[column].mean()) if len(judged) else float("nan")


def rpe_growing_tasks(train_scale: int, scale_factor: int, tasks: tuple[str, ...] = FIRST_SWEEP_TASKS) -> tuple[str, ...]:
    """The tasks (of ``tasks``: by default those the first-sweep checks judge) on which SRC grows under plain offsets
    and not under the scale hint."""
    src = conjecture(train_scale, scale_factor).predicted
    return tuple(t for t in tasks if src[(t, "rpe")] == "fails" and src[(t, "rpe_scale_hint")] == "generalizes")


def held_out_groups(committed: pd.DataFrame, train_scale: int, scale_factor: int) -> dict[str, pd.DataFrame]:
    """The committed sweep's runs each held-out check judges (one definition for the checks and the prose). The checks
    registered with the first sweep judge its tasks (:data:`FIRST_SWEEP_TASKS`); the ``added_*`` groups hold the
    tasks added later (:data:`ADDED_TASKS`), which have their own checks."""
    added = committed[committed.task.isin(ADDED_TASKS)]
    committed = committed[committed.task.isin(FIRST_SWEEP_TASKS)]
    learned = committed[committed.learned]
    positional = learned[learned.position_head]
    where_rpe_grows = committed.task.isin(rpe_growing_tasks(train_scale, scale_factor))
    added_learned = added[added.learned]
    interleaved = added_learned[added_learned.task == INTERLEAVED]
    return dict(
        first=committed,
        learned=learned,
        hint=positional[positional.scheme == "rpe_scale_hint"],
        lbpe=positional[positional.scheme == "lbpe"],
        fire=positional[positional.scheme == FIRE],
        hint_where_rpe_grows=learned[(learned.scheme == "rpe_scale_hint") & learned.task.isin(
            rpe_growing_tasks(train_scale, scale_factor))],
        hint_all_where_rpe_grows=committed[(committed.scheme == "rpe_scale_hint") & where_rpe_grows],
        rpe_all_where_rpe_grows=committed[(committed.scheme == "rpe") & where_rpe_grows],
        growing=learned[learned.grows & learned.scheme.isin(TABLE_SCHEMES)],
        absolute=positional[positional.scheme.isin(["ape", "nope"])],
        invariant=learned[learned.registered & ~learned.grows],
        invariant_cells=committed[committed.registered & ~committed.grows & committed.position_head],
        added=added,
        added_learned=added_learned,
        added_hint=added_learned[(added_learned.scheme == "rpe_scale_hint") & added_learned.task.isin(
            rpe_growing_tasks(train_scale, scale_factor, ADDED_TASKS))],
        added_growing=added_learned[added_learned.grows & added_learned.scheme.isin(TABLE_SCHEMES)],
        added_invariant=added_learned[added_learned.registered & ~added_learned.grows],
        interleaved_invariant=interleaved[interleaved.registered & ~interleaved.grows],
    )


def claim_values(own: pd.DataFrame, committed: pd.DataFrame | None = None, train_scale: int = 8,
                 scale_factor: int = 4) -> dict[str, float]:
    """Every claim's value from this page's run verdicts and, when given, the committed sweep's (at its ``train_scale``
    and ``scale_factor``). Without a committed sweep the held-out checks get NaN: they judged nothing, and fail."""
    everything = own if committed is None else pd.concat([own, committed], ignore_index=True)
    hint = own[own.learned & own.position_head & (own.scheme == "rpe_scale_hint")]
    rpe = own[(own.scheme == "rpe") & own.position_head]
    nan = float("nan")
    values = dict(
        registered_cells=float((everything.learned & everything.registered & ~everything.agrees).sum()),
        not_learned_runs=float((~everything.learned).sum()),
        hint_generalizes=float((hint.measured != "generalizes").sum()),
        hint_selects_needed=float((~hint.needed).sum()),
        judged_groups=float(len(hint) < PAGE_MINIMUM),
        rpe_generalizes=float((rpe.learned & (rpe.measured == "generalizes")).sum()),
        rpe_learned=float(rpe.learned.sum()),
        fresh_seeds=float(everything.seed.isin(PILOT_SEEDS).sum()
                          + (0 if committed is None else (~committed.seed.isin(HELD_OUT_SEEDS)).sum())),
    )
    if committed is None:
        held_out = [name for name in claims_of("12_sequential_complexity") if name.startswith("held_out")]
        return values | dict.fromkeys(held_out, nan)  # the checks that read the sweep: NaN (not judged) without one
    g = held_out_groups(committed, train_scale, scale_factor)
    generalizes = {name: g[name].measured == "generalizes" for name in g}
    hint_gap = (g["hint_all_where_rpe_grows"].answers_2n.mean() - g["rpe_all_where_rpe_grows"].answers_2n.mean()
                if len(g["hint_all_where_rpe_grows"]) and len(g["rpe_all_where_rpe_grows"]) else nan)
    cells_without = g["invariant_cells"].groupby(["task", "scheme"]).measured.agg(lambda m: not (m == "generalizes").any())
    return values | dict(
        held_out_hint_generalizes=_share(g["hint"].assign(ok=generalizes["hint"]), "ok"),
        held_out_hint_where_rpe_grows=float((~generalizes["hint_where_rpe_grows"]).sum()),
        held_out_hint_learned_where_rpe_grows=float(len(g["hint_where_rpe_grows"])),
        held_out_hint_gap=float(hint_gap),
        held_out_selects_needed=_share(g["hint"], "needed"),
        held_out_lbpe_selects_needed=_share(g["lbpe"], "needed"),
        held_out_lbpe_invariant_mass=_share(g["lbpe"], "invariant_mass"),
        held_out_growing_fails=float(generalizes["growing"].sum()),
        held_out_growing_runs=float(len(g["growing"])),
        held_out_absolute_generalizes=float(generalizes["absolute"].sum()),
        held_out_judged=float((len(g["hint"]) < HELD_OUT_MINIMUM["hint"]) + (len(g["lbpe"]) < HELD_OUT_MINIMUM["lbpe"])),
        held_out_invariant_share=_share(g["invariant"].assign(ok=generalizes["invariant"]), "ok"),
        held_out_invariant_cells_without_lg=float(cells_without.sum()),
        held_out_disagreements=float((g["learned"].registered & ~g["learned"].agrees).sum()),
        held_out_lbpe_generalizes=_share(g["lbpe"].assign(ok=generalizes["lbpe"]), "ok"),
        held_out_fire_generalizes=_share(g["fire"].assign(ok=generalizes["fire"]), "ok"),
        held_out_added_hint_generalizes=_share(g["added_hint"].assign(ok=generalizes["added_hint"]), "ok"),
        held_out_added_hint_runs=float(len(g["added_hint"])),
        held_out_added_growing_fails=float(generalizes["added_growing"].sum()),
        held_out_added_growing_runs=float(len(g["added_growing"])),
        held_out_added_invariant_share=_share(g["added_invariant"].assign(ok=generalizes["added_invariant"]), "ok"),
        held_out_added_learned=float(len(g["added_learned"])),
        held_out_added_disagreements=float((g["added_learned"].registered & ~g["added_learned"].agrees).sum()),
        held_out_interleaved_generalizes=_share(g["interleaved_invariant"].assign(
            ok=generalizes["interleaved_invariant"]), "ok"),
        held_out_interleaved_judged=float(len(g["interleaved_invariant"]) < INTERLEAVED_MINIMUM),
        held_out_interleaved_runs=float(len(g["interleaved_invariant"])),
    )


def cell_table(verdicts: pd.DataFrame, seconds: dict[tuple[str, str], float] | None = None) -> pd.DataFrame:
    """One row per (task, scheme), in the order of :data:`TRAINED_TASKS` and of the schemes (FIRE last, anything else
    after it): SRC at N and at the largest scale (NaN for FIRE, which is not an SRC scheme), the conjecture's verdict,
    the measured verdicts (runs of each), runs agreeing among the learned, mean exact match at N + 1 and 2N, mean
    answer accuracy at 2N, what the tables selected and, when ``seconds`` gives them (a committed sweep's
    :attr:`CommittedRuns.cell_seconds`), the wall time of the run record that trained the cell's seeds."""
    order = {name: k for k, name in enumerate((*TRAINED_TASKS, *SCHEMES, FIRE))}
    rows = []
    for (task, scheme), g in sorted(verdicts.groupby(["task", "scheme"], sort=False),
                                    key=lambda cell: tuple(order.get(name, len(order)) for name in cell[0])):
        learned = g[g.learned]
        rows.append(dict(task=task, scheme=scheme, src_N=g.src_n.iloc[0], src_largest=g.src_largest.iloc[0],
                         predicted=g.predicted.iloc[0],
                         measured=", ".join(f"{m} x{k}" for m, k in g.measured.value_counts().items()),
                         agree=f"{int(learned.agrees.sum())} of {len(learned)}" if g.registered.iloc[0] else "n/a",
                         exact_N1=g.exact_n1.mean(),
                         exact_2N=g.exact_2n.mean(), answers_2N=g.answers_2n.mean(),
                         selected=", ".join(sorted({f"{s} = {v}" if s != "none" else s
                                                    for s, v in zip(g.selected, g.value, strict=True)}))))
        if seconds is not None:
            rows[-1]["wall_s"] = seconds.get((task, scheme), np.nan)
    return pd.DataFrame(rows, columns=["task", "scheme", "src_N", "src_largest", "predicted", "measured", "agree",
                                       "exact_N1", "exact_2N", "answers_2N", "selected",
                                       *(["wall_s"] if seconds is not None else [])])


def disagreements(verdicts: pd.DataFrame) -> str:
    """The learned runs whose measured verdict differs from the conjecture's, per cell, in words (``"none"``)."""
    learned = verdicts[verdicts.learned & verdicts.registered]
    runs = learned.groupby(["scheme", "task"]).size()
    return "; ".join(f"{scheme} on {task}: conjecture {g.predicted.iloc[0]}, measured {g.measured.iloc[0]} in "
                     f"{len(g)} of {runs[(scheme, task)]} learned runs"
                     for (scheme, task), g in learned[~learned.agrees].groupby(["scheme", "task"], sort=False)) or "none"
