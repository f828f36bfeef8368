"""The tasks: random token sequences and their targets, defined at every length.

Tokens are i.i.d. uniform over a vocabulary of size ``vocab``. A task turns a batch of them
into ``(inputs, targets)``, with ``IGNORE`` where a position has no answer, so a model
trained at length ``T`` can be scored at any length ``L``.

* ``shift`` (fixed-offset retrieval): every position ``t >= offset`` outputs the token at
  ``t - offset``. The single heads of chapters 1-5 learn exactly this rule; the transformer
  learns it at every position.
* ``copy``: the first half is random content, a separator follows, and the second half must
  reproduce the first token by token. The offset to the source grows with the sequence, so
  no fixed relative offset solves it: a model must match content (induction).
"""

from __future__ import annotations

from typing import Literal

import torch

IGNORE = -100  # the target value cross-entropy skips

Task = Literal["shift", "copy"]
TASKS: tuple[str, ...] = ("shift", "copy")


def sample_tokens(batch: int, length: int, vocab: int, gen: torch.Generator) -> torch.Tensor:
    """A ``(batch, length)`` int64 CPU tensor of i.i.d. uniform tokens."""
    return torch.randint(0, vocab, (batch, length), generator=gen, device="cpu")


def offset_targets(tokens: torch.Tensor, offset: int) -> torch.Tensor:
    """Targets of the offset task: ``target[:, t] = tokens[:, t - offset]``, ``IGNORE`` for ``t < offset``."""
    targets = torch.full_like(tokens, IGNORE)
    targets[:, offset:] = tokens[:, : tokens.shape[1] - offset]
    return targets


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
        sizes = torch.randint(1, n_max + 1, (batch,), generator=gen, device="cpu")
    else:
        sizes = torch.full((batch,), n_max, device="cpu")
    tokens = torch.randint(0, vocab - 1, (batch, length), generator=gen, device="cpu")
    targets = torch.full_like(tokens, IGNORE)
    for i, n in enumerate(sizes.tolist()):
        tokens[i, n] = vocab - 1
        tokens[i, n + 1 : 2 * n + 1] = tokens[i, :n]
        targets[i, n : 2 * n] = tokens[i, :n]
    return tokens, targets


def sequence_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``(batch, length, vocab)`` logits over the positions whose target is not ``IGNORE``."""
    vocab = logits.shape[-1]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1), ignore_index=IGNORE)


def task_batch(
    task: Task, batch: int, length: int, vocab: int, offset: int, gen: torch.Generator, train: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """A CPU batch of the named task (``train=False``: the evaluation form, e.g. the longest copy that fits)."""
    if task == "shift":
        return shift_batch(batch, length, vocab, offset, gen)
    if task == "copy":
        return copy_batch(batch, length, vocab, gen, variable=train)
    raise ValueError(f"task must be one of {TASKS}, got {task!r}")
