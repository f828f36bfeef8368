"""Accuracy of a trained head as a function of sequence length.

Two numbers per length ``L``:

* ``last``: accuracy of the last query (position ``L - 1``);
* ``out_of_range``: mean accuracy over the query positions ``t`` in ``[T, L)``
  (empty, hence NaN, at ``L = T``), or over ``[offset, T)`` reported as ``in_range``.

All evaluation uses :meth:`PositionOnlyHead.query_logits`, which scatters the
attention mass into vocabulary bins instead of building value vectors, so a
single-query evaluation at ``L = 8192`` needs a few megabytes.
"""

from __future__ import annotations

import pandas as pd
import torch

from .heads import PositionOnlyHead
from .seeding import generator
from .tasks import sample_tokens


@torch.no_grad()
def accuracy_at(
    head: PositionOnlyHead,
    tokens: torch.Tensor,
    offset: int,
    query_pos: torch.Tensor,
    chunk: int = 256,
) -> torch.Tensor:
    """Per-query accuracy ``(n_queries,)`` averaged over the batch, for queries ``>= offset``."""
    correct = []
    for start in range(0, len(query_pos), chunk):
        q = query_pos[start : start + chunk]
        pred = head.query_logits(tokens, q).argmax(-1)  # (batch, n_q)
        target = tokens[:, q - offset]
        correct.append((pred == target).to(torch.float64).mean(0))
    return torch.cat(correct)


@torch.no_grad()
def length_sweep(
    head: PositionOnlyHead,
    lengths: list[int],
    train_length: int,
    offset: int,
    vocab: int,
    seed: int,
    batch: int = 256,
    out_of_range_queries: int | None = 512,
) -> pd.DataFrame:
    """Tidy table ``length, metric, accuracy, n`` for each length.

    ``out_of_range_queries`` caps how many evenly spaced out-of-range positions
    are scored per length (``None``: all of them); ``n`` is the number of scored
    (sequence, query) pairs, for binomial intervals.
    """
    rows = []
    for length in lengths:
        tokens = sample_tokens(batch, length, vocab, generator(seed, f"eval-{length}"))
        last = torch.tensor([length - 1])
        rows.append(dict(length=length, metric="last", accuracy=float(accuracy_at(head, tokens, offset, last)[0]), n=batch))
        lo, hi = (offset, min(length, train_length)), (train_length, length)
        for metric, (a, b) in (("in_range", lo), ("out_of_range", hi)):
            if b <= a:
                continue
            pos = torch.arange(a, b)
            if out_of_range_queries is not None and len(pos) > out_of_range_queries:
                pos = torch.linspace(a, b - 1, out_of_range_queries).round().long().unique()
            acc = accuracy_at(head, tokens, offset, pos)
            rows.append(dict(length=length, metric=metric, accuracy=float(acc.mean()), n=batch * len(pos)))
    return pd.DataFrame(rows)
