"""The reasoning tasks' sequences: their layouts are the programs', and each program's reads answer them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lengthgen.model import programs
from lengthgen.model import reasoning_tasks as rt
from lengthgen.model.seeding import generator
from lengthgen.model.tasks import IGNORE

VOCAB = 16


def read_tokens(tokens: torch.Tensor, reads: programs.Reads, row: int) -> list[int]:
    """The tokens a position head of a program reads for the query at ``row``."""
    return [int(tokens[j]) for j in np.nonzero(reads.target[row])[0]]


def answer_from_program(task: str, n: int, tokens: torch.Tensor, row: int) -> int:
    """The answer at ``row``, computed only from the program's position heads' reads and the query's own token
    (an independent statement of each task's step, against the generator's targets)."""
    own = int(tokens[row])
    if task == "addition":
        now, before = (h.build(n) for h in programs.PROGRAMS["addition"]["by digit"])
        a_b = read_tokens(tokens, now, row)
        previous = read_tokens(tokens, before, row)
        carry = 0
        if previous:  # the carry into this digit: previous digit's sum, read back through its written digit
            s_prev = own
            carry_in = (s_prev - sum(previous)) % 10
            carry = int(sum(previous) + carry_in >= 10)
        return (sum(a_b) + carry) % 10
    if task == "parity_cot_interleaved":
        (head,) = programs.PROGRAMS[task]["direct"]
        (previous,) = read_tokens(tokens, head.build(n), row)
        return (own + (0 if previous == VOCAB - 1 else previous)) % 2  # the separator stands for z_0 = 0
    (head,) = programs.PROGRAMS[task]["direct"]
    (source,) = read_tokens(tokens, head.build(n), row)
    if task == "parity_cot":
        return (source + (own if row > n else 0)) % 2  # z_t = z_(t-1) xor x_t; z_0 = 0 at the separator
    return source


@pytest.mark.parametrize("task", [t for t in rt.REASONING_TASKS if t not in ("mode", "parity")])
@pytest.mark.parametrize("n", [1, 2, 5])
def test_every_answer_follows_from_the_program_reads(task, n):
    gen = generator(0, f"{task}-{n}")
    for _ in range(20):
        tokens, targets, ids = rt.instance(task, n, VOCAB, gen)
        assert len(tokens) == len(targets) == len(ids) == rt.sequence_length(task, n)
        rows = torch.nonzero(targets != IGNORE).flatten().tolist()
        assert len(rows) == (n + 1 if task == "addition" else n)
        for row in rows:
            assert answer_from_program(task, n, tokens, row) == int(targets[row]), (task, n, row, tokens.tolist())


def test_layouts_and_ids_are_the_programs():
    n = 4
    gen = generator(1, "layout")
    tokens, targets, ids = rt.instance("reversal", n, VOCAB, gen)
    assert tokens[n] == VOCAB - 1 and len(set(tokens[:n].tolist())) == n  # separator; distinct tokens
    assert targets[n:].tolist() == tokens[:n].flip(0).tolist() and (targets[:n] == IGNORE).all()
    assert tokens[n + 1:].tolist() == targets[n:-1].tolist()  # teacher forcing
    assert ids.tolist() == [1, 2, 3, 4, 5, 4, 3, 2]  # the separator continues the answers' ids backwards
    assert rt.coupled_ids("copy", n).tolist() == [1, 2, 3, 4, 0, 1, 2, 3]
    tokens, targets, ids = rt.instance("addition", 2, VOCAB, gen)
    a, b, s = tokens[:2].tolist(), tokens[3:5].tolist(), targets[5:].tolist()
    assert tokens[2] == VOCAB - 2 and tokens[5] == VOCAB - 1
    assert a[0] + 10 * a[1] + b[0] + 10 * b[1] == s[0] + 10 * s[1] + 100 * s[2]
    assert ids.tolist() == [1, 2, 0, 1, 2, 0, 1, 2]
    tokens, targets, ids = rt.instance("parity_cot_interleaved", 3, VOCAB, gen)
    assert tokens[0] == VOCAB - 1 and ids.tolist() == [0, 1, 1, 2, 2, 3, 3]  # the separator opens it (z_0 = 0)
    assert targets[1::2].tolist() == tokens[2::2].tolist() and (targets[0::2] == IGNORE).all()  # z_t asked at x_t


def test_mode_is_unique_and_parity_counts_ones():
    gen = generator(2, "vote")
    for n in (1, 2, 4, 9):
        for _ in range(30):
            tokens, targets, _ = rt.instance("mode", n, VOCAB, gen)
            counts = torch.bincount(tokens[:n], minlength=rt.REPEAT_ALPHABET)
            assert (counts == counts.max()).sum() == 1 and targets[n] == counts.argmax()
            tokens, targets, _ = rt.instance("parity", n, VOCAB, gen)
            assert targets[n] == tokens[:n].sum() % 2 and set(tokens[:n].tolist()) <= {0, 1}


def test_many_instances_at_once_keep_every_rule():
    gen = generator(5, "many")
    tokens, targets, ids = rt.instances("mode", 6, 300, VOCAB, gen)
    counts = torch.nn.functional.one_hot(tokens[:, :6], rt.REPEAT_ALPHABET).sum(1)
    assert ((counts == counts.max(1, keepdim=True).values).sum(1) == 1).all()
    assert torch.equal(targets[:, 6], counts.argmax(1))
    tokens, targets, _ = rt.instances("addition", 4, 300, VOCAB, gen)
    value = lambda digits: (digits * 10 ** torch.arange(digits.shape[1])).sum(1)  # noqa: E731
    assert torch.equal(value(tokens[:, :4]) + value(tokens[:, 5:9]), value(targets[:, 9:]))
    tokens, _, _ = rt.instances("reversal", 7, 300, VOCAB, gen)
    assert all(len(set(row[:7].tolist())) == 7 for row in tokens)
    assert len({tuple(row[:7].tolist()) for row in tokens}) > 250  # rows are drawn independently


def test_repeat_tasks_repeat_and_distinct_tasks_do_not():
    gen = generator(3, "repeat")
    repeats = [len(set(rt.instance("copy_repeat", 8, VOCAB, gen)[0][:8].tolist())) < 8 for _ in range(20)]
    assert all(repeats)  # 8 tokens from an alphabet of 4
    assert all(len(set(rt.instance("copy", 8, VOCAB, gen)[0][:8].tolist())) == 8 for _ in range(20))


def test_training_batches_mix_scales_and_pad_without_answers():
    tokens, ids, scales, targets = rt.training_batch("copy", 64, 5, VOCAB, generator(4, "batch"))
    assert tokens.shape == ids.shape == targets.shape == (64, rt.sequence_length("copy", 5))
    assert set(scales.tolist()) == {1, 2, 3, 4, 5}
    for row, n in enumerate(scales.tolist()):
        length = rt.sequence_length("copy", n)
        assert (targets[row, length:] == IGNORE).all() and (targets[row, n:length] != IGNORE).all()
        assert (tokens[row, length:] < rt.alphabet("copy", VOCAB)).all()
        assert ids[row, length:].tolist() == list(range(int(ids[row, :length].max()) + 1,
                                                       int(ids[row, :length].max()) + 1 + tokens.shape[1] - length))
    again = rt.training_batch("copy", 64, 5, VOCAB, generator(4, "batch"))
    assert all(torch.equal(x, y) for x, y in zip((tokens, ids, scales, targets), again, strict=True))


@pytest.mark.parametrize(("task", "scale", "vocab", "message"), [
    ("sorting", 3, VOCAB, "task must be one of"),
    ("copy", 0, VOCAB, "at least 1"),
    ("copy", 15, VOCAB, "needs vocab >= 17"),
    ("addition", 3, 11, "needs vocab >= 12"),
    ("mode", 3, 5, "needs vocab >= 6"),
])
def test_bad_task_parameters_fail_loudly(task, scale, vocab, message):
    with pytest.raises(ValueError, match=message):
        rt.instance(task, scale, vocab, generator(0, "bad"))
    with pytest.raises(ValueError, match="length 3 is shorter"):
        rt.reasoning_batch("copy", 2, 2, VOCAB, generator(0, "bad"), length=3)
