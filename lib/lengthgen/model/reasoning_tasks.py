"""Token sequences of the reasoning tasks of :mod:`lengthgen.model.programs`, at any scale ``n``.

Each instance comes as ``(tokens, targets, ids)``: the tokens, the answer each position is asked for
(``IGNORE`` where none), and the *coupled* position ids of the programs' layouts (Cho et al. 2024: an answer
shares its source's id). The layouts are exactly the programs' (the ids come from the same functions), so the
reads a program lists are the reads that answer these sequences; a test checks it by answering each instance
from its program's reads alone. Two tokens are reserved: ``SEP = vocab - 1`` (the separator, and addition's
``=``) and ``PLUS = vocab - 2``. Content tokens are drawn from the task's alphabet (:func:`alphabet`).

* ``copy``, ``reversal``: ``x_1 .. x_n SEP`` then the answers fed back (teacher forcing); answer ``t`` is
  asked at ``n + t - 1``. Distinct tokens (sampled without replacement) from ``vocab - 2``;
* ``copy_repeat``, ``reversal_repeat``: the same with tokens drawn with replacement from
  :data:`REPEAT_ALPHABET` tokens, so that repeats are the rule (Zhou et al. 2023's hard copy);
* ``parity_cot``: bits, ``SEP``, then ``z_t = z_(t-1) xor x_t`` (``z_0 = 0``) in the same layout;
* ``parity_cot_interleaved``: ``SEP x_1 z_1 x_2 z_2 ..``; ``z_t`` is asked at ``x_t``'s position. The separator
  opens the instance and stands for ``z_0 = 0``: without it, on instances opening ``1 1`` the query of ``z_2`` (keys
  ``1 1 1``) and that of ``z_1`` (key ``1``) would see only equal tokens, and a network whose positions enter only
  through attention logits computes the same output at both (every layer averages equal values), so at every scale
  ``n >= 2`` it could answer at most three instances in four entirely right, in expectation over the uniform bits
  (chapter 12 shows it);
* ``addition``: ``a_1 .. a_n PLUS b_1 .. b_n SEP s_1 .. s_(n+1)``, decimal digits, least significant first
  (the reversed order of Lee et al. 2023); ``s_t`` is asked at ``2n + t``;
* ``mode``: ``x_1 .. x_n SEP`` from :data:`REPEAT_ALPHABET` tokens, answered at ``SEP`` by the most frequent
  token (instances are drawn with a unique mode);
* ``parity``: bits, ``SEP``, answered at ``SEP`` by the parity of the ones (no chain of thought).

Training batches mix scales ``1 .. N`` uniformly, each sequence padded to the longest with content tokens whose
positions carry no answer (the mask is causal, so what comes after an instance never changes it).
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from torch.nn import functional as F

from . import programs
from .tasks import IGNORE

REASONING_TASKS: tuple[str, ...] = tuple(programs.PROGRAMS)
REPEAT_ALPHABET = 4  # tokens of the *_repeat tasks and of mode: small, so that repeats are the rule
SEPARATED = ("copy", "copy_repeat", "reversal", "reversal_repeat", "parity_cot")
DISTINCT = ("copy", "reversal")


def alphabet(task: str, vocab: int) -> int:
    """How many content tokens (``0 .. alphabet - 1``) the task draws from."""
    check_task(task, 1, vocab)
    return vocab - 2 if task in DISTINCT else _alphabet_needed(task, 1)


def _alphabet_needed(task: str, largest_scale: int) -> int:
    if task in DISTINCT:
        return largest_scale
    if task in ("parity", "parity_cot", "parity_cot_interleaved"):
        return 2
    return 10 if task == "addition" else REPEAT_ALPHABET


def check_task(task: str, largest_scale: int, vocab: int) -> None:
    """Raise, naming the rule, unless the task exists, the scale is at least 1 and the vocabulary holds the
    task's alphabet plus the two reserved tokens (distinct tokens: one per position of the largest scale)."""
    if task not in REASONING_TASKS:
        raise ValueError(f"task must be one of {REASONING_TASKS}, got {task!r}")
    if largest_scale < 1:
        raise ValueError(f"the scale n must be at least 1, got {largest_scale}")
    needed = _alphabet_needed(task, largest_scale)
    if vocab - 2 < needed:
        raise ValueError(f"{task} at scale {largest_scale} needs vocab >= {needed + 2} (its alphabet of {needed} "
                         f"tokens plus separator and plus), got vocab {vocab}")


def sequence_length(task: str, n: int) -> int:
    """Tokens of an instance of scale ``n``: up to the last position that asks for an answer (a last answer is
    predicted, not fed back; interleaved parity keeps its last ``z_n``, which asks for nothing)."""
    if task in SEPARATED:
        return 2 * n
    if task == "parity_cot_interleaved":
        return 2 * n + 1
    if task == "addition":
        return 3 * n + 2
    if task in ("mode", "parity"):
        return n + 1
    raise ValueError(f"task must be one of {REASONING_TASKS}, got {task!r}")


def coupled_ids(task: str, n: int) -> np.ndarray:
    """``(sequence_length,)`` coupled ids: the programs' layouts (:mod:`lengthgen.model.programs`)."""
    length = sequence_length(task, n)
    if task in ("reversal", "reversal_repeat"):
        return programs.separated_ids(n, lambda t: n - t)[:length]
    if task in SEPARATED:
        return programs.separated_ids(n, lambda t: t - 1)[:length]
    if task == "parity_cot_interleaved":
        return programs.interleaved_ids(n)
    if task == "addition":
        return programs.addition_ids(n)[:length]
    return np.concatenate([np.arange(1, n + 1), [0]])  # mode, parity: no position head reads them


def _unique_modes(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """``x`` ``(count, n)`` with, in every row whose most frequent count is tied, one occurrence of a tied runner-up
    turned into the tied token drawn as the mode (its count then leads by one)."""
    counts = F.one_hot(x, REPEAT_ALPHABET).sum(1)
    tied = counts == counts.max(1, keepdim=True).values
    draw = torch.rand(x.shape[0], REPEAT_ALPHABET, generator=gen)
    chosen = torch.where(tied, draw, -1.0).argmax(1)
    x = x.clone()
    for row in torch.nonzero(tied.sum(1) > 1).flatten().tolist():
        other = int(torch.nonzero(tied[row]).flatten()[torch.nonzero(tied[row]).flatten() != chosen[row]][0])
        x[row, int(torch.nonzero(x[row] == other).flatten()[0])] = chosen[row]
    return x


def _sum_digits(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The ``n + 1`` digits of ``a + b``, least significant first, for digit rows ``(count, n)``."""
    carry = torch.zeros(a.shape[0], dtype=torch.long)
    digits = []
    for k in range(a.shape[1]):
        total = a[:, k] + b[:, k] + carry
        digits.append(total % 10)
        carry = total // 10
    return torch.stack([*digits, carry], dim=1)


def instances(task: str, n: int, count: int, vocab: int,
              gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``count`` instances of scale ``n``: ``(tokens, targets, ids)``, each ``(count, sequence_length)`` int64."""
    check_task(task, n, vocab)
    sep, plus, size = vocab - 1, vocab - 2, alphabet(task, vocab)
    length = sequence_length(task, n)
    tokens = torch.empty(count, length, dtype=torch.long)
    targets = torch.full((count, length), IGNORE, dtype=torch.long)
    if task in DISTINCT:  # a random permutation per row, cut to n
        x = torch.rand(count, size, generator=gen).argsort(1)[:, :n]
    else:
        x = torch.randint(0, size, (count, n), generator=gen)
    if task in SEPARATED:
        answers = {"reversal": x.flip(1), "reversal_repeat": x.flip(1), "parity_cot": x.cumsum(1) % 2}.get(task, x)
        tokens[:, :n], tokens[:, n], tokens[:, n + 1:] = x, sep, answers[:, :-1]
        targets[:, n:] = answers
    elif task == "parity_cot_interleaved":
        z = x.cumsum(1) % 2
        tokens[:, 0], tokens[:, 1::2], tokens[:, 2::2] = sep, x, z
        targets[:, 1::2] = z
    elif task == "addition":
        b = torch.randint(0, size, (count, n), generator=gen)
        digits = _sum_digits(x, b)
        tokens[:, :n], tokens[:, n], tokens[:, n + 1: 2 * n + 1], tokens[:, 2 * n + 1] = x, plus, b, sep
        tokens[:, 2 * n + 2:] = digits[:, :-1]
        targets[:, 2 * n + 1:] = digits
    else:  # mode, parity: one answer at the separator
        if task == "mode":
            x = _unique_modes(x, gen)
        tokens[:, :n], tokens[:, n] = x, sep
        targets[:, n] = F.one_hot(x, size).sum(1).argmax(1) if task == "mode" else x.sum(1) % 2
    return tokens, targets, _ids_tensor(task, n).expand(count, length)


@functools.lru_cache(maxsize=1024)
def _ids_tensor(task: str, n: int) -> torch.Tensor:
    return torch.as_tensor(coupled_ids(task, n), dtype=torch.long)


def instance(task: str, n: int, vocab: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One instance of scale ``n``: ``(tokens, targets, ids)``, each ``(sequence_length,)`` int64."""
    tokens, targets, ids = instances(task, n, 1, vocab, gen)
    return tokens[0], targets[0], ids[0].clone()


def reasoning_batch(task: str, batch: int, scales: list[int] | int, vocab: int, gen: torch.Generator,
                    length: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(tokens, ids, scales, targets)``: ``(batch, length)`` tokens, ids and targets and the ``(batch,)`` scale of
    each sequence. ``scales`` is one scale for all or one per sequence (the instances of each scale are drawn
    together, smallest scale first); sequences are padded to ``length`` (default: the longest) with content tokens
    that have no answer and ids that continue past the instance's."""
    per_sequence = torch.tensor([scales] * batch if isinstance(scales, int) else list(scales), dtype=torch.long)
    if len(per_sequence) != batch:
        raise ValueError(f"need one scale per sequence: {len(per_sequence)} scales for a batch of {batch}")
    longest = max(sequence_length(task, int(n)) for n in per_sequence)
    length = longest if length is None else length
    if length < longest:
        raise ValueError(f"length {length} is shorter than the longest instance ({longest} tokens)")
    tokens = torch.randint(0, alphabet(task, vocab), (batch, length), generator=gen)  # the padding
    targets = torch.full((batch, length), IGNORE, dtype=torch.long)
    ids = torch.empty(batch, length, dtype=torch.long)
    for n in per_sequence.unique().tolist():
        rows = torch.nonzero(per_sequence == n).flatten()
        some_tokens, some_targets, some_ids = instances(task, n, len(rows), vocab, gen)
        width = some_tokens.shape[1]
        tokens[rows, :width], targets[rows, :width], ids[rows, :width] = some_tokens, some_targets, some_ids
        ids[rows, width:] = int(some_ids.max()) + 1 + torch.arange(length - width)
    return tokens, ids, per_sequence, targets


def training_batch(task: str, batch: int, largest_scale: int, vocab: int,
                   gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A training batch: scales uniform in ``1 .. largest_scale``, padded to the length of ``largest_scale``."""
    scales = torch.randint(1, largest_scale + 1, (batch,), generator=gen).tolist()
    return reasoning_batch(task, batch, scales, vocab, gen, sequence_length(task, largest_scale))


def answer_scores(predicted: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
    """``exact``: the share of sequences whose every answer is right; ``token``: the share of answers that are right
    (``predicted`` and ``targets`` ``(batch, length)``, ``IGNORE`` where nothing is asked)."""
    answered = targets != IGNORE
    right = (predicted == targets) | ~answered
    return dict(exact=float(right.all(1).double().mean()), token=float((right & answered).sum() / answered.sum()))
