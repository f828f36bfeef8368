"""What chapter 12's prose and tables state about its committed sweep, computed in one place so that the notebook
only glues and shows it.

:func:`sweep_numbers` gives the numbers the chapter's section on the committed sweep glues about its runs (counts of runs per
held-out group, shares with their exact binomial intervals, spreads over runs, the disagreements in words), or
``"not run"`` for each when no committed run is present; :func:`rasp_comparison` sets plain offsets' measured
verdicts beside SRC's conjecture and Zhou et al.'s RASP-L verdict, task by task.
"""

from __future__ import annotations

import pandas as pd

from ...analysis.held_out import CommittedRuns
from ...analysis.stats import binomial_interval, spread_text
from .registered import ADDED_TASKS, FIRE, FIRST_SWEEP_TASKS, TRAINED_TASKS
from .verdicts import conjecture, disagreements, held_out_groups, rpe_growing_tasks

NOT_RUN = "not run"  # what every number reads when the committed sweep has no run
# Shares shown with an exact binomial interval: the glued name's stem, the held-out group it counts, and what a run
# of the group must do to count ("generalizes": its measured verdict; "needed": it selected an invariant read).
INTERVAL_GROUPS = {"hint": ("hint", "generalizes"), "chosen": ("hint", "needed"), "lbpe": ("lbpe", "needed"),
                   "added_hint": ("added_hint", "generalizes"), "interleaved": ("interleaved_invariant", "generalizes")}
SWEEP_NUMBERS: tuple[str, ...] = (
    "sweep_runs", "sweep_expected", "sweep_minutes", "sweep_per_record", "sweep_seeds", "held_seeds", "held_runs",
    "held_learned", "held_hint", "held_hint_ok", "held_hint_grows", "held_hint_grows_ok", "held_hint_gap",
    "rpe_growing_tasks", "held_chosen", "held_chosen_ok", "held_lbpe", "held_lbpe_ok", "held_lbpe_invariant_mass",
    "held_growing", "held_growing_ok", "held_absolute", "held_absolute_ok", "held_invariant", "held_invariant_ok",
    "held_cells_without", "held_disagree", "held_lbpe_share", "held_fire_share", "held_fire_learned", "held_fire_runs",
    "held_rpe_learned", "held_rpe_by_task", "added_tasks", "added_runs", "added_learned", "added_hint",
    "added_hint_ok", "added_growing", "added_growing_ok", "added_invariant", "added_invariant_ok", "added_disagree",
    "interleaved_runs", "interleaved_ok", "interleaved_worst", "interleaved_exact_2n",
    *(f"held_{name}_interval" for name in INTERVAL_GROUPS))


def learned_by_task(runs: pd.DataFrame, tasks: tuple[str, ...]) -> str:
    """``"task k of n"`` for each of ``tasks`` that ``runs`` trained: how many of its runs learned in range (``"no run"``
    when ``runs`` trained none of them)."""
    return ", ".join(f"{task} {int(g.learned.sum())} of {len(g)}" for task in tasks
                     if len(g := runs[runs.task == task])) or "no run"


def sweep_numbers(committed: CommittedRuns | None, values: dict[str, float], interval: float) -> dict[str, object]:
    """Every number of :data:`SWEEP_NUMBERS` for the committed sweep ``committed``, with the chapter's claim
    ``values`` and intervals at confidence ``interval``; each is ``"not run"`` without a sweep or a run of it."""
    if committed is None or committed.study is None:
        return dict.fromkeys(SWEEP_NUMBERS, NOT_RUN)
    sv = committed.study.verdicts
    g = held_out_groups(sv, committed.setting("train_scale"), committed.setting("scale_factor"))
    first = g["first"]  # what the checks registered with the first sweep judge

    def ok(name: str) -> int:
        return int((g[name].measured == "generalizes").sum())

    def spread(name: str, column: str) -> str:
        return spread_text(g[name][column]) if len(g[name]) else "no learned run"

    rpe_runs = first[(first.scheme == "rpe") & first.position_head]
    numbers: dict[str, object] = dict(
        sweep_runs=committed.expected - committed.missing, sweep_expected=committed.expected,
        sweep_minutes=f"{sum(committed.wall_seconds) / 60:.0f}",
        sweep_per_record=f"{min(committed.wall_seconds):.0f}-{max(committed.wall_seconds):.0f} s",
        sweep_seeds=int(sv.groupby(["task", "scheme"]).seed.nunique().max()),
        held_seeds=f"{sv.seed.min()}-{sv.seed.max()}", held_runs=len(sv), held_learned=len(g["learned"]),
        held_hint=len(g["hint"]), held_hint_ok=ok("hint"),
        held_hint_grows=len(g["hint_where_rpe_grows"]), held_hint_grows_ok=ok("hint_where_rpe_grows"),
        held_hint_gap=f"{values['held_out_hint_gap']:.2f}",
        rpe_growing_tasks=", ".join(rpe_growing_tasks(committed.setting("train_scale"), committed.setting("scale_factor"))),
        held_chosen=len(g["hint"]), held_chosen_ok=int(g["hint"].needed.sum()),
        held_lbpe=len(g["lbpe"]), held_lbpe_ok=int(g["lbpe"].needed.sum()),
        held_lbpe_invariant_mass=f"{values['held_out_lbpe_invariant_mass']:.2f}",
        held_growing=len(g["growing"]), held_growing_ok=ok("growing"),
        held_absolute=len(g["absolute"]), held_absolute_ok=ok("absolute"),
        held_invariant=len(g["invariant"]), held_invariant_ok=ok("invariant"),
        held_cells_without=int(values["held_out_invariant_cells_without_lg"]),
        held_disagree=disagreements(first),
        held_lbpe_share=f"{values['held_out_lbpe_generalizes']:.2f}",
        held_fire_share=f"{values['held_out_fire_generalizes']:.2f}",
        held_fire_learned=int(first[first.scheme == FIRE].learned.sum()),
        held_fire_runs=int((first.scheme == FIRE).sum()),
        held_rpe_learned=f"{int(rpe_runs.learned.sum())} of {len(rpe_runs)}",
        held_rpe_by_task=learned_by_task(first[first.scheme == "rpe"], FIRST_SWEEP_TASKS),
        added_tasks=", ".join(ADDED_TASKS), added_runs=len(g["added"]), added_learned=len(g["added_learned"]),
        added_hint=len(g["added_hint"]), added_hint_ok=ok("added_hint"),
        added_growing=len(g["added_growing"]), added_growing_ok=ok("added_growing"),
        added_invariant=len(g["added_invariant"]), added_invariant_ok=ok("added_invariant"),
        added_disagree=disagreements(g["added"]),
        interleaved_runs=len(g["interleaved_invariant"]), interleaved_ok=ok("interleaved_invariant"),
        interleaved_worst=spread("interleaved_invariant", "worst_answers"),
        interleaved_exact_2n=spread("interleaved_invariant", "exact_2n"))
    for name, (group, counted) in INTERVAL_GROUPS.items():
        judged = g[group]
        passed = int(judged.needed.sum()) if counted == "needed" else ok(group)
        low, high = binomial_interval(passed, len(judged), interval) if len(judged) else (float("nan"),) * 2
        numbers[f"held_{name}_interval"] = f"{low:.2f}-{high:.2f}" if len(judged) else "none"
    return numbers


def rasp_comparison(committed: CommittedRuns | None) -> pd.DataFrame:
    """Per task the committed sweep trained with plain offsets: the measured verdicts (runs of each), SRC's
    conjecture and the RASP-L verdict of Zhou et al. (2023), where their study has one (empty without a sweep)."""
    columns = ["measured", "conjecture", "rasp_l"]
    if committed is None or committed.study is None:
        return pd.DataFrame(columns=columns)
    src = conjecture(committed.setting("train_scale"), committed.setting("scale_factor"))
    rpe = committed.study.verdicts[committed.study.verdicts.scheme == "rpe"]
    order = {task: k for k, task in enumerate(TRAINED_TASKS)}
    rows = rpe.groupby("task").agg(measured=("measured", lambda m: ", ".join(
        f"{v} x{k}" for v, k in m.value_counts().items())))
    rows = rows.loc[sorted(rows.index, key=lambda task: order.get(task, len(order)))]
    rows["conjecture"] = [src.predicted[(task, "rpe")] for task in rows.index]
    rows["rasp_l"] = [src.rasp_l[(task, "rpe")] or "not in their study" for task in rows.index]
    return rows[columns]
