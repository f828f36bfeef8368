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

from ...analysis.held_out import CommittedRuns
from ...book.parameters import ParameterError, parameter
from ...model.reasoning_tasks import check_task, sequence_length
from ...model.relation_network import (
    SCHEMES,
    RelationNetworkConfig,
    RelationRunConfig,
    constant_prefix_gap,
    exact_match,
    table_usage,
)
from ...model.training import TrainedRun
from ..committed import CommittedSweep
from ..common import GB, Execution, Network, Optimizer, map_stacked
from .registered import FIRE, HELD_OUT_SEEDS, INTERLEAVED, LOSS_EVERY, TRAINED_TASKS
from .verdicts import verdict_table

# What the pilot runs (seeds 0-2, before this module was written; their records were not kept) chose and showed.
PILOT = ("Pilot runs (seeds 0-2, N = 8; their records were not kept) chose the recipe of the defaults: the number of "
         "steps, the learning rate, the tables' scale and their L1 weight, with which the learned entries sat on one "
         "relation and value per head. They also showed exact match decaying gradually beyond N in runs whose every "
         "read stays right, since one wrong answer among up to 2N spoils an instance: the generalization criterion "
         "therefore reads answer accuracy, and exact match is shown beside it.")


@dataclass(frozen=True)
class Parameters(CommittedSweep, Network, Optimizer, Execution):
    """Chapter 12's parameters."""

    chapter = "12_sequential_complexity"
    held_out_seeds = HELD_OUT_SEEDS
    tasks: tuple[str, ...] = parameter("reasoning tasks to train", choices=TRAINED_TASKS)
    schemes: tuple[str, ...] = parameter("position schemes (each a set of relations the bias learns), or 'fire' (FIRE's "
                                         "learned bias, no tables)", choices=(*SCHEMES, FIRE))
    train_scale: int = parameter("largest training scale N (scales 1 .. N are trained)", 2, 64)
    scale_factor: int = parameter("largest evaluated scale, in multiples of N", 2, 8)
    vocab: int = parameter("vocabulary (copy and reversal draw distinct tokens: it must hold the largest scale's)",
                           8, 4096)
    eval_batch: int = parameter("evaluation instances per scale", 1, 65_536)
    table_scale: float = parameter("the bias is this multiple of the relation tables (moves logits faster)", 0.01, 1000.0)
    table_l1: float = parameter("weight of the L1 penalty on the relation tables", 0.0, 10.0)

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
                              steps=p.steps, batch=p.batch, lr=p.lr, seed=seed, device=p.device, backend=p.backend)
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


def committed_study(runs: CommittedRuns) -> ComplexityStudy:
    """The study of a committed sweep's runs of this chapter (read by
    :func:`lengthgen.analysis.held_out.committed_runs`), at the one training scale and factor they share."""
    study = study_from([r["details"] for r in runs.records], int(runs.setting("train_scale")),
                       int(runs.setting("scale_factor")))
    if study.verdicts.duplicated(["scheme", "task", "seed"]).any():
        raise ValueError("the committed sweep has two runs of the same (scheme, task, seed)")
    return study


def cell_seconds(runs: CommittedRuns) -> dict[tuple[str, str], float]:
    """(task, scheme): the wall time of the committed record that trained the cell."""
    return {(row["task"], row["scheme"]): wall for r, wall in zip(runs.records, runs.wall_seconds, strict=True)
            for row in r["details"]["accuracy"]}
