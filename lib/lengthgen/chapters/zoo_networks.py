"""Chapter 11 (``11_zoo_networks``): the zoo's encodings inside chapter 6's small decoder, on full-sequence tasks.

Every encoding of :mod:`lengthgen.model.zoo_network` is trained on instance sizes ``1 .. N`` of the tasks of
:mod:`lengthgen.model.sequence_tasks` (shift by ``k``, copy with distinct tokens, reversal) and scored by exact match
at sizes up to ``size_factor * N``. Before any run of the chapter, the verdict of every (encoding, task) cell was
registered in :data:`PREDICTED_VERDICTS` with the mechanism behind it. A run is *not learned* when its exact match at
size ``N`` is below :data:`LEARNED_FLOOR`; else it *generalizes* when its exact match at every evaluated size in
``(N, 2N]`` is at least :data:`GENERALIZES_FLOOR`, and *fails* otherwise.

Kazemnejad et al. (2023) train a ~107M decoder on lengths up to 20 and report exact match at 21-33; the chapter scores
its models at the same multiples of the training size (:func:`literature_sizes`) and sets the numbers side by side
(:data:`KAZEMNEJAD`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..analysis.network_zoo import NetworkZooStudy, verdict_table
from ..book.parameters import ParameterError, parameter
from ..model.sequence_tasks import SEQUENCE_TASKS, sequence_length
from ..model.training import TrainedRun
from ..model.transformer import NETWORK_ZOO
from ..model.zoo_network import ZooNetworkRunConfig, exact_match, zoo_config
from .committed import CommittedSweep
from .common import GB, Execution, Network, Optimizer, map_stacked
from .seeds import seeds

LITERATURE_TRAIN = 20  # Kazemnejad et al.'s longest training instance
LITERATURE_MODEL = "a decoder of about 107M parameters"  # Kazemnejad et al.'s model, as their paper describes it
LITERATURE_SEEDS = 3  # seeds behind each of Kazemnejad et al.'s numbers (they report the mean)

# Kazemnejad et al. 2023, exact match (mean of 3 seeds) at instance lengths beyond their training length 20.
KAZEMNEJAD: dict[str, dict[str, dict[int, float]]] = {
    "copy": {"nope": {21: .79, 25: .70, 29: .34, 33: 0.0}, "t5": {21: .80, 25: .73, 29: .66, 33: .24},
             "alibi": {21: .82, 25: .73, 29: .44, 33: .01}, "partial_rope": {21: .04, 25: 0.0, 29: 0.0, 33: 0.0},
             "ape": {21: .54, 25: 0.0, 29: 0.0, 33: 0.0}},
    "reversal": {"nope": {21: .99, 23: .95, 25: .54}, "t5": {21: .99, 23: .96, 25: .61},
                 "alibi": {21: 1.0, 23: .94, 25: .04}, "partial_rope": {21: .79, 23: .29, 25: 0.0},
                 "ape": {21: .46, 23: 0.0, 25: 0.0}},
}

HELD_OUT_MINIMUM = {"relative": 6, "absolute": 2}  # learned held-out shift runs each held-out check needs
# the committed sweep's held-out shift runs (at the defaults) draw here
HELD_OUT_SHIFT_SEEDS = seeds("11_zoo_networks", "held_out")
# the seeds the prototypes of the code ran (before and after the registration)
PROTOTYPE_SEEDS = seeds("11_zoo_networks", "prototype")
REVISION_SEEDS = seeds("11_zoo_networks", "revision")  # reserved for the first run at the defaults (it used 700-701), after which


@dataclass(frozen=True)
class Parameters(CommittedSweep, Network, Optimizer, Execution):
    """Chapter 11's parameters."""

    chapter = "11_zoo_networks"
    held_out_seeds = HELD_OUT_SHIFT_SEEDS
    encodings: tuple[str, ...] = parameter("encodings to train", choices=NETWORK_ZOO)
    tasks: tuple[str, ...] = parameter("tasks to train each encoding on", choices=SEQUENCE_TASKS)
    train_size: int = parameter("largest training instance N (answers per instance)", 2, 256)
    size_factor: int = parameter("largest evaluated instance, in multiples of N", 2, 16)
    offset: int = parameter("shift's offset k", 1, 64)
    vocab: int = parameter("vocabulary (the last token is the separator; copy and reversal need vocab - 1 >= the "
                           "largest evaluated size)", 3, 4096)
    eval_batch: int = parameter("evaluation instances per size", 1, 65_536)
    rope_base: float = parameter("RoPE base b (rope, partial_rope, randomized)", 2.0, 1e9)
    rotary_fraction: float = parameter("share of each head's coordinates partial RoPE rotates", 0.01, 1.0)
    random_span: int = parameter("randomized positions are drawn from 0 .. random_span - 1 (at least the longest "
                                 "evaluated sequence)", 2, 1_000_000)

    def check(self) -> None:
        super().check()
        if self.dim % self.heads or (self.dim // self.heads) % 2:
            raise ParameterError(f"parameter 'heads' = {self.heads} is out of range: dim / heads must be an even "
                                 f"integer (dim = {self.dim})")
        rotated = int(self.dim // self.heads * self.rotary_fraction)
        if rotated < 2 or rotated % 2:
            raise ParameterError(f"parameter 'rotary_fraction' = {self.rotary_fraction} is out of range: "
                                 f"int(rotary_fraction * head_dim) = {rotated} must be an even number >= 2")
        if self.random_span < self.longest:
            raise ParameterError(f"parameter 'random_span' = {self.random_span} is out of range: must be at least the "
                                 f"longest evaluated sequence, {self.longest} tokens")
        if {"copy", "reversal"} & set(self.tasks) and self.vocab - 1 < self.largest_size:
            raise ParameterError(f"parameter 'vocab' = {self.vocab} is out of range: copy and reversal draw distinct "
                                 f"tokens, so vocab - 1 must be at least the largest evaluated size "
                                 f"{self.largest_size} (size_factor * train_size)")

    @property
    def largest_size(self) -> int:
        return self.size_factor * self.train_size

    @property
    def longest(self) -> int:
        """Tokens in the longest evaluated instance of any task."""
        return max(sequence_length(t, self.largest_size, self.offset) for t in self.tasks)

    def memory_gb(self) -> float:
        attention = 16 * self.layers * self.heads * self.longest**2  # logits and weights, float32, forward
        return self.workers * self.eval_batch * (attention + 8 * self.longest * (self.vocab + 8 * self.dim)) / GB

    def memory_rule(self) -> str:
        return "workers x eval_batch x (layers x heads x longest^2 attention + longest x (vocab + 8 dim) activations)"


def literature_sizes(train_size: int, task: str) -> dict[int, int]:
    """Kazemnejad et al.'s evaluated lengths mapped to our sizes at the same multiple of the training size
    (``ceil(length * N / 20)``)."""
    return {length: math.ceil(length * train_size / LITERATURE_TRAIN) for length in KAZEMNEJAD.get(task, {}).get("nope", {})}


def evaluated_sizes(p: Parameters, task: str) -> list[int]:
    """``N/2``, ``N``, every size ``N+1 .. 2N`` (the verdict's range), the literature's sizes, then ``3N .. size_factor N``."""
    n = p.train_size
    sizes = {max(1, n // 2), *range(n, 2 * n + 1), *literature_sizes(n, task).values()}
    sizes |= {f * n for f in range(3, p.size_factor + 1)}
    return sorted(s for s in sizes if s <= p.largest_size)


def run_configs(p: Parameters) -> list[ZooNetworkRunConfig]:
    """One run per (encoding, task, seed)."""
    configs = []
    for encoding in p.encodings:
        for task in p.tasks:
            model = zoo_config(vocab=p.vocab, dim=p.dim, layers=p.layers, heads=p.heads, encoding=encoding,
                               max_length=p.longest, rope_base=p.rope_base, rotary_fraction=p.rotary_fraction,
                               random_span=p.random_span,
                               fire_threshold=float(sequence_length(task, p.train_size, p.offset)))
            configs += [ZooNetworkRunConfig(model=model, task=task, train_size=p.train_size, offset=p.offset,
                                            steps=p.steps, batch=p.batch, lr=p.lr, seed=s, device=p.device,
                                            backend=p.backend)
                        for s in p.seed_list]
    return configs


LOSS_EVERY = 25  # steps between the kept points of a training-loss curve


def measure_run(run: TrainedRun, job: tuple[list[int], int]) -> tuple[list[dict], list[dict]]:
    """In the worker: exact match per size, and the training loss (mean over each :data:`LOSS_EVERY` steps, and over the
    last steps when they are fewer)."""
    sizes, eval_batch = job
    cfg = run.config
    ids = dict(encoding=cfg.model.encoding, task=cfg.task, seed=cfg.seed)
    rows = [dict(**ids, **row) for row in exact_match(run.model, cfg, sizes, eval_batch)]
    curve = np.asarray(run.losses, dtype=float)
    ends = sorted(set(range(LOSS_EVERY, len(curve) + 1, LOSS_EVERY)) | {len(curve)})
    return rows, [dict(**ids, step=end, loss=float(curve[max(0, end - LOSS_EVERY): end].mean())) for end in ends]


RELATIVE_SHIFT = ("rope", "t5", "partial_rope")
ABSOLUTE = ("ape", "sinusoidal")


def _carry_groups(verdicts: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The learned relative (RoPE, T5, partial RoPE) shift runs and the learned absolute (APE, sinusoidal) runs."""
    learned = verdicts[verdicts.learned]
    relative = learned[(learned.task == "shift") & learned.encoding.isin(RELATIVE_SHIFT)]
    return relative, learned[learned.encoding.isin(ABSOLUTE)]


def held_out_shift(committed: pd.DataFrame) -> pd.DataFrame:
    """The committed sweep's shift runs on :data:`HELD_OUT_SHIFT_SEEDS`."""
    return committed[(committed.task == "shift") & committed.seed.isin(HELD_OUT_SHIFT_SEEDS)]


def claim_values(own: pd.DataFrame, committed: pd.DataFrame | None = None) -> dict[str, float]:
    """The value of every check and reported number of ``CLAIMS``. The checks named without ``held_out`` judge this
    page's runs (``own``), which the tests repeat; the ``held_out`` checks judge the committed sweep's shift runs on
    :data:`HELD_OUT_SHIFT_SEEDS`. The reported counts (registered disagreements, runs learned, generalizing cells,
    reversal) pool this page's runs with all of the sweep's."""
    everything = own if committed is None else pd.concat([own, committed], ignore_index=True)
    relative, absolute = _carry_groups(own)
    shift = relative[relative.encoding.isin(("rope", "t5"))]
    every_learned = everything[everything.learned]
    reversal = every_learned[every_learned.task == "reversal"]
    swept = pd.DataFrame(columns=own.columns) if committed is None else committed[committed.learned]
    swept_absolute = swept[swept.encoding.isin(ABSOLUTE) & swept.task.isin(("copy", "reversal"))]
    held_relative, held_absolute = _carry_groups(held_out_shift(own.iloc[:0] if committed is None else committed))
    per_cell = everything.groupby(["encoding", "task"]).measured.agg(lambda m: bool((m == "generalizes").all()))
    return dict(registered_cells=float((every_learned.measured != every_learned.predicted).sum()),
                not_learned_runs=float((~everything.learned).sum()),
                absolute_never_generalize=float((absolute.measured == "generalizes").sum()),
                absolute_collapses_past_n=float(absolute.carries.sum()),
                relative_carries_past_n=float((~relative.carries).sum()),
                relative_shift_generalizes=float((shift.measured != "generalizes").sum()),
                judged_groups=float((len(relative) == 0) + (len(absolute) == 0)),
                committed_absolute_carries=float(swept_absolute.carries.sum()),
                committed_absolute_judged=float(len(swept_absolute)),
                held_out_relative_carries=float(held_relative.carries.mean()) if len(held_relative) else float("nan"),
                held_out_absolute_carries=float(held_absolute.carries.sum()),
                held_out_judged=float((len(held_relative) < HELD_OUT_MINIMUM["relative"])
                                      + (len(held_absolute) < HELD_OUT_MINIMUM["absolute"])),
                held_out_relative_runs=float(len(held_relative)),
                reversal_generalizes=float((reversal.measured == "generalizes").sum()),
                reversal_learned=float(len(reversal)),
                fresh_seeds=float(everything.seed.isin(PROTOTYPE_SEEDS + REVISION_SEEDS).sum()),
                learned_somewhere=float((~own.groupby("task").learned.any()).sum()),
                learned_runs=float(everything.learned.sum()), generalizing_cells=float(per_cell.sum()))


def literature_table(accuracy: pd.DataFrame, train_size: int) -> pd.DataFrame:
    """Kazemnejad et al.'s exact match beside ours (mean and sd over seeds) at the same multiples of the training size,
    for every (task, encoding) both have."""
    rows = []
    for task, by_encoding in KAZEMNEJAD.items():
        sizes = literature_sizes(train_size, task)
        for encoding, theirs in by_encoding.items():
            ours = accuracy[(accuracy.task == task) & (accuracy.encoding == encoding)]
            if ours.empty:
                continue
            for length, value in theirs.items():
                at = ours[ours["size"] == sizes[length]].exact
                rows.append(dict(task=task, encoding=encoding, their_length=length, multiple=length / LITERATURE_TRAIN,
                                 our_size=sizes[length], our_multiple=sizes[length] / train_size, theirs=value,
                                 ours=at.mean(),
                                 ours_sd=at.std(ddof=1) if len(at) > 1 else np.nan, seeds=len(at)))
    return pd.DataFrame(rows)


def network_zoo_study(p: Parameters, progress: bool = True) -> NetworkZooStudy:
    """Train every (encoding, task, seed) decoder and score it by exact match at every evaluated size."""
    configs = run_configs(p)
    jobs = [(cfg, (evaluated_sizes(p, cfg.task), p.eval_batch)) for cfg in configs]
    results = map_stacked(measure_run, jobs, p.workers, progress)
    accuracy = pd.DataFrame([row for rows, _ in results for row in rows])
    losses = pd.DataFrame([row for _, rows in results for row in rows])
    return NetworkZooStudy(accuracy, losses, verdict_table(accuracy, p.train_size))


