"""Chapter 12 (``12_sequential_complexity``): Sequential Representation Complexity, Scale Hint and a learned
position-relation encoding, tested in a small decoder whose positions enter only as learned relation biases.

The conjecture's verdict of every (task, scheme) cell is :func:`lengthgen.model.programs.src_table`'s, registered
with that module before any model was trained on the reasoning tasks. A run of
:class:`lengthgen.model.relation_network.RelationTransformer` is trained on scales ``1 .. N`` and scored at every
evaluated scale. It *has not learned* its task when its exact match at a training scale is below
:data:`LEARNED_FLOOR`; it *generalizes* when its answer accuracy (the share of answers right) is at least
:data:`GENERALIZES_FLOOR` at every scale ``N+1 .. 2N``, and *fails* otherwise. Which relation a run selected is read
from its tables (:func:`lengthgen.model.relation_network.table_usage`) and compared with the reads of the programs
whose SRC stays invariant (:func:`lengthgen.model.programs.invariant_reads`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..book.parameters import ParameterError, parameter
from ..book.paths import SWEEPS_DIR
from ..book.sweep import expand, load_spec, stored_records
from ..claims import claims_of
from ..model import programs
from ..model.reasoning_tasks import check_task, sequence_length
from ..model.relation_network import (
    SCHEMES,
    RelationNetworkConfig,
    RelationRunConfig,
    constant_prefix_gap,
    exact_match,
    table_usage,
)
from ..model.training import TrainedRun
from .common import GB, Execution, Seeds, map_stacked

FIRE = "fire"  # the published learned relative bias (Li et al. 2023), trained beside the schemes; not an SRC scheme
FIRST_SWEEP_TASKS = ("copy", "copy_repeat", "reversal", "reversal_repeat", "parity_cot", "mode", "parity")
INTERLEAVED = "parity_cot_interleaved"  # parity with the chain of thought between the bits, opened by the separator
ADDED_TASKS = (INTERLEAVED, "addition")  # trained from the second regeneration of the sweep on; own checks
TRAINED_TASKS = (*FIRST_SWEEP_TASKS, *ADDED_TASKS)
LEARNED_FLOOR = 0.99  # exact match at every evaluated training scale below which a run has not learned (the issue's)
GENERALIZES_FLOOR = 0.9  # lowest answer accuracy over scales N+1 .. 2N of a run that generalizes
SELECTING_SCHEMES = ("rpe_scale_hint", "lbpe")  # schemes whose bias chooses among several relations
PILOT_SEEDS = (0, 1, 2)  # the seeds of the pilot runs that chose the recipe (table scale, L1, steps, learning rate)
HELD_OUT_SEEDS = tuple(range(920, 940))  # the committed sweep's runs draw here, reserved before any of them ran
HELD_OUT_MINIMUM = {"hint": 8, "lbpe": 6}  # learned held-out runs (of 15 per scheme) each held-out share needs
PAGE_MINIMUM = 2  # learned hint runs this page's checks need (of its seeds, 3 at the defaults)
SHARE_FLOOR = 0.5  # share of the tables' used mass the selected relation must hold to count as the selection
INTERLEAVED_MINIMUM = 4  # learned held-out interleaved-parity runs (of 9) in its invariant cells its share needs
GROWING_MINIMUM = 3  # learned held-out runs in cells where SRC grows (offsets, coupling, hint, LBPE) the 'only if' needs
REGISTERED_LBPE_SHARE = 0.75  # held_out_lbpe_selects_needed's threshold when it was registered (see its revision)
HINT_GAP = 0.3  # answer accuracy at 2N, hint minus plain offsets, below which the dashboard qualifies Scale Hint
TABLE_SCHEMES = ("rpe", "coupled", "rpe_scale_hint", "lbpe")  # schemes that can represent a read moving with n
PREFIX_TIE = 1e-4  # logits: float rounding, below which two outputs count as the same (the proof check's bar)
LOSS_EVERY = 25  # steps between the kept points of a training-loss curve

# What the pilot runs (seeds 0-2, before this module was written; their records were not kept) chose and showed.
PILOT = ("Pilot runs (seeds 0-2, N = 8; their records were not kept) chose the recipe of the defaults: the number of "
         "steps, the learning rate, the tables' scale and their L1 weight, with which the learned entries sat on one "
         "relation and value per head. They also showed exact match decaying gradually beyond N in runs whose every "
         "read stays right, since one wrong answer among up to 2N spoils an instance: the generalization criterion "
         "therefore reads answer accuracy, and exact match is shown beside it.")


@dataclass(frozen=True)
class Parameters(Seeds, Execution):
    """Chapter 12's parameters."""

    chapter = "12_sequential_complexity"
    tasks: tuple[str, ...] = parameter("reasoning tasks to train", choices=TRAINED_TASKS)
    schemes: tuple[str, ...] = parameter("position schemes (each a set of relations the bias learns), or 'fire' (FIRE's "
                                         "learned bias, no tables)", choices=(*SCHEMES, FIRE))
    train_scale: int = parameter("largest training scale N (scales 1 .. N are trained)", 2, 64)
    scale_factor: int = parameter("largest evaluated scale, in multiples of N", 2, 8)
    vocab: int = parameter("vocabulary (copy and reversal draw distinct tokens: it must hold the largest scale's)",
                           8, 4096)
    dim: int = parameter("model width", 8, 1024)
    layers: int = parameter("decoder blocks", 1, 12)
    heads: int = parameter("attention heads per block (dim / heads must be an integer)", 1, 64)
    steps: int = parameter("Adam steps per run", 1, 100_000)
    batch: int = parameter("training instances per step", 1, 4096)
    lr: float = parameter("peak Adam learning rate (linear warm-up over the first 10 % of steps)", 1e-6, 1.0)
    eval_batch: int = parameter("evaluation instances per scale", 1, 65_536)
    table_scale: float = parameter("the bias is this multiple of the relation tables (moves logits faster)", 0.01, 1000.0)
    table_l1: float = parameter("weight of the L1 penalty on the relation tables", 0.0, 10.0)
    committed_sweep: str = parameter("committed sweep of this chapter (a folder of data/sweeps) whose runs are judged "
                                     "beside this run's; '' for none (what the sweep's own runs use)")

    def check(self) -> None:
        super().check()
        if self.dim % self.heads:
            raise ParameterError(f"parameter 'heads' = {self.heads} is out of range: dim / heads must be an integer "
                                 f"(dim = {self.dim})")
        for task in self.tasks:
            try:
                check_task(task, self.largest_scale, self.vocab)
            except ValueError as err:
                raise ParameterError(f"parameter 'vocab' = {self.vocab} is out of range for task {task!r} at the "
                                     f"largest evaluated scale {self.largest_scale}: {err}") from err
        if self.committed_sweep and not (SWEEPS_DIR / self.committed_sweep / "spec.yaml").exists():
            known = sorted(p.parent.name for p in SWEEPS_DIR.glob("*/spec.yaml"))
            raise ParameterError(f"parameter 'committed_sweep' = {self.committed_sweep!r} is out of range: no "
                                 f"data/sweeps/{self.committed_sweep}/spec.yaml; committed sweeps: {known} (or '')")
        if self.committed_sweep and set(self.seed_list) & set(HELD_OUT_SEEDS):
            raise ParameterError(f"parameter 'seed_start' = {self.seed_start} is out of range: with a committed sweep, "
                                 f"this page's seeds must avoid the sweep's held-out seeds {HELD_OUT_SEEDS[0]} .. "
                                 f"{HELD_OUT_SEEDS[-1]}")

    @property
    def largest_scale(self) -> int:
        return self.scale_factor * self.train_scale

    @property
    def longest(self) -> int:
        """Tokens in the longest evaluated instance of any task."""
        return max(sequence_length(t, self.largest_scale) for t in self.tasks)

    def memory_gb(self) -> float:
        attention = 16 * self.layers * self.heads * self.longest**2
        return self.workers * self.eval_batch * (attention + 8 * self.longest * (self.vocab + 8 * self.dim)) / GB

    def memory_rule(self) -> str:
        return "workers x eval_batch x (layers x heads x longest^2 attention + longest x (vocab + 8 dim) activations)"


def evaluated_scales(p: Parameters) -> list[int]:
    """``1``, ``N/2``, ``N``, every scale ``N+1 .. 2N`` (the verdict's range), then ``3N .. scale_factor N``."""
    n = p.train_scale
    return sorted({1, max(1, n // 2), *range(n, 2 * n + 1), *(f * n for f in range(3, p.scale_factor + 1))})


def network_config(p: Parameters, scheme: str, task: str) -> RelationNetworkConfig:
    """The relation network of a scheme; for ``fire``, FIRE's bias with its threshold at the longest training sequence
    (as chapter 11's) and no tables."""
    model = RelationNetworkConfig(vocab=p.vocab, dim=p.dim, layers=p.layers, heads=p.heads, scheme=scheme,
                                  max_length=p.longest, table_l1=p.table_l1, table_scale=p.table_scale)
    if scheme == FIRE:
        return model.with_(scheme="nope", encoding=FIRE,
                           fire_threshold=float(sequence_length(task, p.train_scale)))
    return model


def scheme_of(cfg: RelationRunConfig) -> str:
    """The scheme label of a run: its relations' scheme, or ``fire``."""
    return FIRE if cfg.model.encoding == FIRE else cfg.model.scheme


def run_configs(p: Parameters) -> list[RelationRunConfig]:
    """One run per (scheme, task, seed)."""
    return [RelationRunConfig(model=network_config(p, scheme, task), task=task, train_scale=p.train_scale,
                              steps=p.steps, batch=p.batch, lr=p.lr, seed=seed, device=p.device)
            for scheme in p.schemes for task in p.tasks for seed in p.seed_list]


def measure_run(run: TrainedRun, job: tuple[list[int], int]) -> dict[str, list[dict]]:
    """In the worker: exact match and answer accuracy per scale, the table usage, the training loss (mean over
    each :data:`LOSS_EVERY` steps) and the constant-prefix gaps (:func:`constant_prefix_gap`, without and with the
    separator in front)."""
    scales, eval_batch = job
    cfg = run.config
    ids = dict(scheme=scheme_of(cfg), task=cfg.task, seed=cfg.seed)
    curve = np.asarray(run.losses, dtype=float)
    ends = sorted(set(range(LOSS_EVERY, len(curve) + 1, LOSS_EVERY)) | {len(curve)})
    usage = [dict(**ids, **{k: (str(v) if k.endswith("value") else v) for k, v in row.items()})
             for row in table_usage(run.model)]
    return dict(accuracy=[dict(**ids, **row) for row in exact_match(run.model, cfg, scales, eval_batch)],
                usage=usage,
                losses=[dict(**ids, step=end, loss=float(curve[max(0, end - LOSS_EVERY): end].mean())) for end in ends],
                prefix=[dict(**ids, tied=constant_prefix_gap(run.model, opened=False),
                             opened=constant_prefix_gap(run.model, opened=True))])


def conjecture(train_scale: int, scale_factor: int) -> pd.DataFrame:
    """SRC's verdict of every (task, scheme) cell (:func:`lengthgen.model.programs.src_table`), indexed by both."""
    return pd.DataFrame(programs.src_table(train_scale, scale_factor)).set_index(["task", "scheme"])


def has_position_head(task: str) -> bool:
    """Whether some program of the task reads by position (mode and parity read uniformly)."""
    return any(h.build is not None for heads in programs.PROGRAMS[task].values() for h in heads)


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
                         agrees=registered and measured == cell.predicted, position_head=has_position_head(task)))
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


@dataclass
class ComplexityStudy:
    """Everything chapter 12 measures, or reads from the runs of a committed sweep."""

    accuracy: pd.DataFrame  # scheme, task, seed, scale, exact, token, n
    usage: pd.DataFrame  # scheme, task, seed, layer, head, relation, used, mass, share, top/peak value and bias
    losses: pd.DataFrame  # scheme, task, seed, step, loss
    prefix: pd.DataFrame  # scheme, task, seed, tied, opened (constant_prefix_gap without and with the separator)
    verdicts: pd.DataFrame  # one row per run (verdict_table)

    def details(self) -> dict[str, list[dict]]:
        """What the chapter's record carries, so that a sweep of the chapter keeps every run's measurements."""
        return dict(accuracy=self.accuracy.to_dict("records"), usage=self.usage.to_dict("records"),
                    losses=self.losses.to_dict("records"), prefix=self.prefix.to_dict("records"))


def study_from(results: list[dict[str, list[dict]]], train_scale: int, scale_factor: int) -> ComplexityStudy:
    """The study of measured runs (:func:`measure_run`'s dictionaries)."""
    accuracy, usage, losses, prefix = (pd.DataFrame([row for r in results for row in r[k]])
                                       for k in ("accuracy", "usage", "losses", "prefix"))
    return ComplexityStudy(accuracy, usage, losses, prefix, verdict_table(accuracy, usage, train_scale, scale_factor))


def prefix_values(*studies: ComplexityStudy | None) -> dict[str, float]:
    """constant_prefix_tie (the largest gap without the separator, over every network of the given studies) and
    constant_prefix_opened (the smallest with it, over their interleaved-parity networks; NaN when there are none)."""
    prefix = pd.concat([s.prefix for s in studies if s is not None], ignore_index=True)
    opened = prefix.opened[prefix.task == INTERLEAVED]
    return dict(constant_prefix_tie=float(prefix.tied.max()),
                constant_prefix_opened=float(opened.min()) if len(opened) else float("nan"))


def complexity_study(p: Parameters, progress: bool = True) -> ComplexityStudy:
    """Train every (scheme, task, seed) relation network and measure it."""
    jobs = [(cfg, (evaluated_scales(p), p.eval_batch)) for cfg in run_configs(p)]
    return study_from(map_stacked(measure_run, jobs, p.workers, progress), p.train_scale, p.scale_factor)


@dataclass
class CommittedRuns:
    """The runs of a committed sweep of this chapter that its spec lists now (fresh: same code, same notebook)."""

    study: ComplexityStudy | None  # None when no run is present
    expected: int  # chapter runs the spec lists
    missing: int  # of those, runs with no stored record
    train_scale: int
    scale_factor: int
    wall_seconds: list[float]  # each present record's wall time
    cell_seconds: dict[tuple[str, str], float]  # (task, scheme): wall time of the record that trained the cell


def committed_runs(name: str) -> CommittedRuns:
    """Read the committed sweep ``data/sweeps/<name>``: every fresh run record's measurements."""
    folder = SWEEPS_DIR / name
    runs = [r for r in expand(load_spec(folder / "spec.yaml")) if r.chapter == Parameters.chapter]
    records = list(stored_records(folder, {r.key for r in runs}))
    if not records:
        return CommittedRuns(None, len(runs), len(runs), 0, 0, [], {})
    settings = {(int(r["parameters"]["train_scale"]), int(r["parameters"]["scale_factor"])) for r in records}
    if len(settings) != 1:
        raise ValueError(f"the committed sweep {name} mixes training scales or factors {sorted(settings)}")
    train_scale, factor = settings.pop()
    study = study_from([r["details"] for r in records], train_scale, factor)
    if study.verdicts.duplicated(["scheme", "task", "seed"]).any():
        raise ValueError(f"the committed sweep {name} has two runs of the same (scheme, task, seed)")
    seconds = [float(r["wall_time_s"]) if r["wall_time_s"] is not None else float("nan") for r in records]
    cells = {(row["task"], row["scheme"]): wall for r, wall in zip(records, seconds, strict=True)
             for row in r["details"]["accuracy"]}
    return CommittedRuns(study, len(runs), len(runs) - len(records), train_scale, factor, seconds, cells)
