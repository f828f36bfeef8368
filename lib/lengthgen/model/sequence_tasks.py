"""Full-sequence tasks with an instance size ``n``, scored by exact match: shift, copy and reversal.

An instance of size ``n`` has ``n`` answers, so a model trained on sizes ``1 .. N`` can be judged at
any size (the "length" of Kazemnejad et al. 2023 is this ``n``). Content tokens are drawn from
``0 .. vocab - 2``; token ``vocab - 1`` is the separator. Positions with no answer carry ``IGNORE``.

* ``shift``: ``n + k`` random tokens; position ``t >= k`` answers the token at ``t - k`` (the
  single heads' rule, applied by a whole network);
* ``copy``: ``x_1 .. x_n SEP a_1 .. a_{n-1}`` with answers ``a_j = x_j``; position ``n + j - 1`` answers
  ``a_j`` (the separator, at position ``n``, answers ``a_1``). The content tokens of one instance are distinct (sampled without
  replacement), so matching the previous token finds the source unambiguously: Zhou et al.
  2023's "copy with unique tokens";
* ``reversal``: the same layout with ``a_j = x_{n+1-j}``: the source of answer ``j`` is ``2j - 1``
  positions back from where it is asked, a relation of the query and the separator's
  position, not of the offset alone.

Training batches mix sizes ``1 .. N`` uniformly, each sequence padded to the longest with
random content tokens whose positions carry no answer (the mask is causal, so padding after an
instance never changes it).
"""

from __future__ import annotations

from typing import Literal

import torch

from .tasks import IGNORE

SequenceTask = Literal["shift", "copy", "reversal"]
SEQUENCE_TASKS: tuple[str, ...] = ("shift", "copy", "reversal")


def sequence_length(task: SequenceTask, size: int, offset: int) -> int:
    """Tokens in an instance of ``size`` answers: ``size + offset`` for shift, ``2 size`` for copy and reversal."""
    if task == "shift":
        return size + offset
    if task in ("copy", "reversal"):
        return 2 * size
    raise ValueError(f"task must be one of {SEQUENCE_TASKS}, got {task!r}")


def check_task(task: SequenceTask, largest_size: int, vocab: int) -> None:
    """Raise unless the vocabulary can hold ``largest_size`` distinct content tokens plus the separator."""
    if task not in SEQUENCE_TASKS:
        raise ValueError(f"task must be one of {SEQUENCE_TASKS}, got {task!r}")
    if largest_size < 1:
        raise ValueError(f"the instance size must be at least 1, got {largest_size}")
    if task in ("copy", "reversal") and vocab - 1 < largest_size:
        raise ValueError(f"{task} with distinct tokens needs vocab - 1 >= the largest size {largest_size}, got vocab {vocab}")
    if vocab < 3:
        raise ValueError(f"vocab must be at least 3, got {vocab}")


def instance(task: SequenceTask, size: int, length: int, vocab: int, offset: int,
             gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One instance of ``size`` answers padded to ``length`` tokens: ``(tokens, targets)``, both ``(length,)`` int64."""
    tokens = torch.randint(0, vocab - 1, (length,), generator=gen)
    targets = torch.full((length,), IGNORE, dtype=torch.long)
    if task == "shift":
        targets[offset: offset + size] = tokens[:size]
        return tokens, targets
    content = torch.randperm(vocab - 1, generator=gen)[:size]
    answers = content if task == "copy" else content.flip(0)
    tokens[:size] = content
    tokens[size] = vocab - 1
    tokens[size + 1: 2 * size] = answers[:-1]
    targets[size: 2 * size] = answers
    return tokens, targets


def sequence_batch(task: SequenceTask, batch: int, sizes: list[int] | int, vocab: int, offset: int,
                   gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``(batch, length)`` tokens and targets; ``sizes`` is one size for every sequence, or a size per sequence
    (padded to the longest)."""
    per_sequence = [sizes] * batch if isinstance(sizes, int) else list(sizes)
    if len(per_sequence) != batch:
        raise ValueError(f"need one size per sequence: {len(per_sequence)} sizes for a batch of {batch}")
    length = max(sequence_length(task, n, offset) for n in per_sequence)
    pairs = [instance(task, n, length, vocab, offset, gen) for n in per_sequence]
    return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])


def training_batch(task: SequenceTask, batch: int, largest_size: int, vocab: int, offset: int,
                   gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A training batch: sizes uniform in ``1 .. largest_size``, padded to the length of ``largest_size``."""
    sizes = torch.randint(1, largest_size + 1, (batch,), generator=gen).tolist()
    tokens, targets = sequence_batch(task, batch, sizes, vocab, offset, gen)
    length = sequence_length(task, largest_size, offset)
    if tokens.shape[1] < length:
        pad = torch.randint(0, vocab - 1, (batch, length - tokens.shape[1]), generator=gen)
        tokens = torch.cat([tokens, pad], dim=1)
        targets = torch.cat([targets, torch.full_like(pad, IGNORE)], dim=1)
    return tokens, targets
