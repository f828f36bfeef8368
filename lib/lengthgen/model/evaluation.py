"""Accuracy of a trained model against sequence length: the one ``length_sweep`` every chapter uses.

Three numbers per length ``L``, over the positions that have a target:

* ``last``: the last such position;
* ``in_range``: the positions ``t < T`` (the training length);
* ``out_of_range``: the positions ``t >= T`` (none at ``L = T``), optionally thinned to at
  most ``out_of_range_queries`` evenly spaced positions.

Each is the mean over positions of the per-position accuracy over ``batch`` fresh sequences
from the run's evaluation stream (one stream per length, so adding a length changes nothing
else). The model predicts each set of positions through ``model.predict``: the single heads
score only the asked queries (a single query at ``L = 8192`` needs a few megabytes), the
transformer runs one forward pass.
"""

from __future__ import annotations

import pandas as pd
import torch

from .seeding import generator
from .tasks import IGNORE, task_batch
from .training import RunConfig


def doubling_lengths(train_length: int, length_factor: int) -> list[int]:
    """``T, 2T, 4T, ...`` up to and including ``length_factor * T``."""
    lengths, factor = [], 1
    while factor < length_factor:
        lengths.append(factor * train_length)
        factor *= 2
    return lengths + [length_factor * train_length]


def metric_positions(scored: torch.Tensor, train_length: int, out_of_range_queries: int | None) -> dict[str, torch.Tensor]:
    """The positions of each metric, from the sorted positions that have a target."""
    sets = {"last": scored[-1:], "in_range": scored[scored < train_length], "out_of_range": scored[scored >= train_length]}
    far = sets["out_of_range"]
    if out_of_range_queries is not None and len(far) > out_of_range_queries:
        thinned = torch.linspace(int(far[0]), int(far[-1]), out_of_range_queries, device=far.device)
        sets["out_of_range"] = thinned.round().long().unique()
    return {name: positions for name, positions in sets.items() if len(positions)}


@torch.no_grad()
def length_sweep(
    model: torch.nn.Module,
    cfg: RunConfig,
    lengths: list[int],
    batch: int,
    out_of_range_queries: int | None = None,
    sequence_chunk: int | None = None,
) -> pd.DataFrame:
    """Tidy table ``length, metric, accuracy, n`` (``n``: scored sequence-position pairs, for binomial intervals).

    Sequences are drawn ``sequence_chunk`` at a time (``None``: all ``batch`` at once) in the
    evaluation form of ``cfg.task`` and moved to the model's device.
    """
    device = next(model.parameters()).device
    rows = []
    for length in lengths:
        gen = generator(cfg.seed, f"{cfg.eval_stream}-{length}")
        chunk = batch if sequence_chunk is None else sequence_chunk
        sets: dict[str, torch.Tensor] | None = None
        correct: dict[str, torch.Tensor] = {}
        seen = 0
        for start in range(0, batch, chunk):
            tokens, targets = task_batch(cfg.task, min(chunk, batch - start), length, cfg.vocab, cfg.offset, gen, train=False)
            scored = torch.nonzero((targets != IGNORE).any(0))[:, 0]
            if sets is None:
                sets = metric_positions(scored, cfg.train_length, out_of_range_queries)
            predicted = model.predict(tokens.to(device), list(sets.values()))
            for (name, positions), pred in zip(sets.items(), predicted, strict=True):
                hits = (pred.cpu() == targets[:, positions]).sum(0).to(torch.float64)
                correct[name] = hits if name not in correct else correct[name] + hits
            seen += len(tokens)
        for name, positions in sets.items():
            rows.append(dict(length=length, metric=name, accuracy=float((correct[name] / seen).mean()), n=seen * len(positions)))
    return pd.DataFrame(rows)
