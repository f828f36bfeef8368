"""Full-sequence tasks for the multi-layer transformer.

Each task turns a batch of random tokens into (inputs, targets), with ``IGNORE``
where a position has no answer. Both are defined at every length, so a model
trained at length ``T`` can be scored at any ``L``.

* ``shift``: every position ``t >= k`` outputs the token at ``t - k``: the book's
  fixed-offset rule, now applied at every position of a deep network.
* ``copy``: the first half is random content, a separator follows, and the second
  half must reproduce the first token by token. The rule "output the token
  ``n + 1`` positions back" has an offset that grows with the sequence, so a fixed
  relative offset cannot solve it; a model must match content (induction), which
  tests whether "relative generalizes" survives when the answer spans the sequence.
"""

from __future__ import annotations

from typing import Literal

import torch

from .tasks import IGNORE, offset_targets, sample_tokens

Task = Literal["shift", "copy"]
TASKS: tuple[str, ...] = ("shift", "copy")


def shift_batch(batch: int, length: int, vocab: int, offset: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Random tokens and their shift-by-``offset`` targets."""
    tokens = sample_tokens(batch, length, vocab, gen)
    return tokens, offset_targets(tokens, offset)


def copy_batch(
    batch: int, length: int, vocab: int, gen: torch.Generator, variable: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """``x_1 .. x_n SEP x_1 .. x_n`` then random filler (token ``vocab - 1`` is the separator).

    ``n`` is drawn per sequence from ``1 .. (length - 1) // 2`` when ``variable`` (training,
    so no single offset solves the task), else it is the largest that fits (evaluation).
    Position ``n + j`` (the separator for ``j = 0``) predicts ``x_{j+1}``; every other
    position is ``IGNORE``.
    """
    n_max = (length - 1) // 2
    if variable:
        sizes = torch.randint(1, n_max + 1, (batch,), generator=gen)
    else:
        sizes = torch.full((batch,), n_max)
    tokens = torch.randint(0, vocab - 1, (batch, length), generator=gen)
    targets = torch.full_like(tokens, IGNORE)
    for i, n in enumerate(sizes.tolist()):
        tokens[i, n] = vocab - 1
        tokens[i, n + 1 : 2 * n + 1] = tokens[i, :n]
        targets[i, n : 2 * n] = tokens[i, :n]
    return tokens, targets


def task_batch(
    task: Task, batch: int, length: int, vocab: int, offset: int, gen: torch.Generator, train: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of the named task (``train=False``: the evaluation form, e.g. the longest copy that fits)."""
    if task == "shift":
        return shift_batch(batch, length, vocab, offset, gen)
    if task == "copy":
        return copy_batch(batch, length, vocab, gen, variable=train)
    raise ValueError(f"task must be one of {TASKS}, got {task!r}")
