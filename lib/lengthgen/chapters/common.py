"""What several chapters share: parameter groups, their rules, and the runs they train.

Each chapter's ``Parameters`` (in its analysis module) is a frozen dataclass built from the
groups below, so a parameter that several chapters use is declared once, with one meaning and
one range.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..book.parallel import map_runs
from ..book.parameters import ChapterParameters, ParameterError, parameter
from ..model.heads import HeadRunConfig
from ..model.training import BACKENDS, RunConfig, TrainedRun, stack_key, train_together

GB = 1024**3


@dataclass(frozen=True)
class Seeds(ChapterParameters):
    seeds: int = parameter("independent seeds per setting", 1, 100)
    seed_start: int = parameter("first seed: seeds are seed_start .. seed_start + seeds - 1 (held-out sweeps start elsewhere)",
                                0, 1_000_000)

    @property
    def seed_list(self) -> range:
        return range(self.seed_start, self.seed_start + self.seeds)


@dataclass(frozen=True)
class Execution(ChapterParameters):
    workers: int = parameter("worker processes, one torch thread each; results do not depend on it", 1, 256)
    device: str = parameter("where tensors live: 'auto' (CUDA when available), 'cpu', 'cuda' or 'cuda:N'")


@dataclass(frozen=True)
class Task(ChapterParameters):
    vocab: int = parameter("vocabulary size V", 2, 4096)
    train_length: int = parameter("training sequence length T (tokens)", 4, 1024)
    offsets: tuple[int, ...] = parameter("target offsets k, one set of seeds each (1 <= k < train_length)", 1, 1023)

    def check(self) -> None:
        super().check()
        for k in self.offsets:
            if not k < self.train_length:
                raise ParameterError(f"parameter 'offsets' contains {k}, out of range: every offset must be in "
                                     f"[1, train_length - 1] = [1, {self.train_length - 1}]")


@dataclass(frozen=True)
class Head(ChapterParameters):
    dim: int = parameter("head dimension d (even: rotary planes pair coordinates)", 4, 512)

    def check(self) -> None:
        super().check()
        if self.dim % 2:
            raise ParameterError(f"parameter 'dim' = {self.dim} is out of range: must be even (rotary planes pair coordinates)")


@dataclass(frozen=True)
class Optimizer(ChapterParameters):
    steps: int = parameter("Adam steps per run", 1, 100_000)
    batch: int = parameter("training sequences (or instances) per step", 1, 4096)
    lr: float = parameter("Adam learning rate (the peak, where a chapter warms it up)", 1e-6, 1.0)


@dataclass(frozen=True)
class HeadTraining(Seeds, Task, Head, Optimizer):
    pass


@dataclass(frozen=True)
class Network(ChapterParameters):
    """A decoder's shape (chapters 6, 11, 12 and 13; each checks how its heads split the width)."""

    dim: int = parameter("model width d", 8, 1024)
    layers: int = parameter("decoder blocks", 1, 24)
    heads: int = parameter("attention heads per block", 1, 64)
    backend: str = parameter("how the trainer computes a step: 'eager', or 'compiled' (torch.compile, cached on disk in "
                             ".cache/; it changes rounding, and falls back to eager where it cannot compile)",
                             choices=BACKENDS)


@dataclass(frozen=True)
class RetrievalProbes(ChapterParameters):
    """How chapters 6 and 13 find and read a network's retrieval heads, and their second variant's shape."""

    compare_heads: int = parameter("heads per block of the wider-head variant", 1, 64)
    fixed_turns: float = parameter("full turns of the slowest plane within T at the identifiable base", 0.1, 100.0)
    kernel_batch: int = parameter("sequences for the measured kernels and the per-head target mass", 1, 256)
    retrieval_mass: float = parameter("in-range mass on offset k that marks a retrieval head", 0.0, 1.0)

    def check(self) -> None:
        super().check()
        dim = self.dim  # type: ignore[attr-defined] - with Network
        for name in ("heads", "compare_heads"):
            n = getattr(self, name)
            if dim % n or (dim // n) % 2 or dim // n < 4:
                valid = [h for h in range(1, dim + 1)
                         if dim % h == 0 and (dim // h) % 2 == 0 and dim // h >= 4]
                raise ParameterError(f"parameter {name!r} = {n} must split dim = {dim} into heads of even size >= 4: "
                                     f"valid values are {valid}")


@dataclass(frozen=True)
class LengthSweep(ChapterParameters):
    length_factor: int = parameter("longest evaluated length, in multiples of T", 2, 1024)
    eval_batch: int = parameter("evaluation sequences per length", 1, 65_536)

    @property
    def longest(self) -> int:
        return self.length_factor * self.train_length  # type: ignore[attr-defined]


def power_of_two_at_least(name: str, value: int, smallest: int, why: str) -> None:
    """Raise unless ``value`` is a power of two and at least ``smallest``."""
    if value < smallest or value & (value - 1):
        raise ParameterError(f"parameter {name!r} = {value} is out of range: must be a power of two >= {smallest} ({why})")


def head_run_configs(p: Any, kind: str, **overrides: Any) -> list[HeadRunConfig]:
    """One single-head run per (offset, seed): ``p.offsets`` x ``p.seed_list``, trained on ``p.device``."""
    shared = dict(dim=p.dim, vocab=p.vocab, train_length=p.train_length, steps=p.steps, batch=p.batch, lr=p.lr,
                  device=p.device)
    if hasattr(p, "length_factor"):
        shared["max_length"] = p.length_factor * p.train_length
    shared.update(overrides)
    return [HeadRunConfig(kind=kind, offset=k, seed=seed, **shared) for k in p.offsets for seed in p.seed_list]


MAX_STACK = 10  # replicas trained together as one stacked model


def seed_stacks(configs: list[RunConfig], workers: int) -> list[list[int]]:
    """Indices of ``configs`` in groups that differ only in their seed (trained together), split so that
    every worker gets a group where possible and no group exceeds :data:`MAX_STACK` replicas."""
    groups: dict[RunConfig, list[int]] = {}
    for i, cfg in enumerate(configs):
        groups.setdefault(stack_key(cfg), []).append(i)
    stacks = [idx[j : j + MAX_STACK] for idx in groups.values() for j in range(0, len(idx), MAX_STACK)]
    while len(stacks) < workers and max(len(s) for s in stacks) > 1:
        largest = max(range(len(stacks)), key=lambda i: len(stacks[i]))
        group = stacks.pop(largest)
        half = (len(group) + 1) // 2
        stacks += [group[:half], group[half:]]
    return sorted(stacks, key=lambda s: -configs[s[0]].steps * len(s))  # longest first, so no worker is left alone at the end


def _train_stack_and_measure(job: tuple[Callable[[TrainedRun, Any], Any], list[RunConfig], list[Any], tuple[int, ...]],
                             ) -> list[Any]:
    measure, configs, extras, snapshots = job
    runs = train_together(configs, snapshots=snapshots)
    return [measure(run, extra) for run, extra in zip(runs, extras, strict=True)]


def map_stacked(measure: Callable[[TrainedRun, Any], Any], jobs: list[tuple[RunConfig, Any]], workers: int,
                progress: bool = True, desc: str = "train + measure", snapshots: tuple[int, ...] = ()) -> list[Any]:
    """``[measure(train(cfg), extra) for cfg, extra in jobs]``, with runs that differ only in their seed trained
    together (:func:`lengthgen.model.training.train_together`) in ``workers`` processes; results in job order.

    ``measure`` must be importable (a module-level function): it runs in the worker, next to the trained model
    (and its parameter ``snapshots`` at the listed steps).
    """
    configs = [cfg for cfg, _ in jobs]
    stacks = seed_stacks(configs, workers)
    work = [(measure, [configs[i] for i in stack], [jobs[i][1] for i in stack], tuple(snapshots)) for stack in stacks]
    results: list[Any] = [None] * len(jobs)
    for stack, measured in zip(stacks, map_runs(_train_stack_and_measure, work, workers=workers, progress=progress,
                                                desc=desc), strict=True):
        for i, value in zip(stack, measured, strict=True):
            results[i] = value
    return results
