"""Training and length-sweep evaluation of the small transformer on full-sequence tasks."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import pandas as pd
import torch
from torch import nn

from .seeding import generator
from .sequence_tasks import Task, task_batch
from .tasks import IGNORE
from .transformer import Transformer, TransformerConfig


@dataclass(frozen=True)
class SequenceRunConfig:
    """Everything that defines one transformer run (the seed included)."""

    model: TransformerConfig = field(default_factory=TransformerConfig)
    task: Task = "shift"
    offset: int = 5
    train_length: int = 32
    steps: int = 1500
    batch: int = 32
    lr: float = 3e-3
    seed: int = 0

    def with_(self, **changes: object) -> SequenceRunConfig:
        return replace(self, **changes)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class SequenceRun:
    config: SequenceRunConfig
    model: Transformer
    losses: list[float]
    initial_state: dict[str, torch.Tensor]


def build_model(cfg: SequenceRunConfig) -> Transformer:
    return Transformer(cfg.model, generator(cfg.seed, "init"))


def train_sequence_model(cfg: SequenceRunConfig) -> SequenceRun:
    """Adam (no weight decay, linear warm-up over the first 10 % of steps) on fresh batches of length ``train_length``."""
    model = build_model(cfg)
    initial = {name: p.detach().clone() for name, p in model.named_parameters()}
    gen = generator(cfg.seed, "train-data")
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    warmup = max(1, cfg.steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / warmup))
    vocab = cfg.model.vocab
    losses = []
    for _ in range(cfg.steps):
        tokens, targets = task_batch(cfg.task, cfg.batch, cfg.train_length, vocab, cfg.offset, gen)
        logits = model(tokens)
        loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1), ignore_index=IGNORE)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    return SequenceRun(cfg, model, losses, initial)


@torch.no_grad()
def position_accuracy(model: Transformer, cfg: SequenceRunConfig, length: int, batch: int, chunk: int = 16) -> torch.Tensor:
    """Accuracy at every position ``(length,)`` over ``batch`` fresh sequences (NaN where there is no target)."""
    gen = generator(cfg.seed, f"eval-{cfg.task}-{length}")
    correct = torch.zeros(length, dtype=torch.float64)
    count = torch.zeros(length, dtype=torch.float64)
    for start in range(0, batch, chunk):
        tokens, targets = task_batch(cfg.task, min(chunk, batch - start), length, cfg.model.vocab, cfg.offset, gen, train=False)
        pred = model(tokens).argmax(-1)
        scored = targets != IGNORE
        correct += ((pred == targets) & scored).sum(0)
        count += scored.sum(0)
    return correct / count


def length_sweep(model: Transformer, cfg: SequenceRunConfig, lengths: list[int], batch: int) -> pd.DataFrame:
    """Tidy ``length, metric, accuracy``.

    Metrics: ``last`` (the last scored position), ``in_range`` (scored ``t < T``) and
    ``out_of_range`` (scored ``t >= T``).
    """
    rows = []
    T = cfg.train_length
    for length in lengths:
        acc = position_accuracy(model, cfg, length, batch)
        scored = ~torch.isnan(acc)
        positions = torch.arange(length)
        last = int(positions[scored].max())
        rows.append(dict(length=length, metric="last", accuracy=float(acc[last])))
        for metric, mask in (("in_range", positions < T), ("out_of_range", positions >= T)):
            sel = scored & mask
            if sel.any():
                rows.append(dict(length=length, metric=metric, accuracy=float(acc[sel].mean())))
    return pd.DataFrame(rows)
