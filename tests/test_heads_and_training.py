import subprocess
import sys

import pytest
import torch

from lengthgen.equivariance import logit_matrix, toeplitz_deviation
from lengthgen.evaluation import accuracy_at, length_sweep
from lengthgen.heads import ApeHead, RopeHead
from lengthgen.seeding import generator
from lengthgen.tasks import sample_tokens
from lengthgen.training import RunConfig, build_head, train

SMALL = RunConfig(dim=16, vocab=8, train_length=12, offset=3, batch=16, steps=40, max_length=64)


@pytest.mark.parametrize("kind", ["rope", "ape"])
def test_training_is_bitwise_deterministic(kind):
    a, b = train(SMALL.with_(kind=kind)), train(SMALL.with_(kind=kind))
    assert a.losses == b.losses
    for (name, pa), (_, pb) in zip(a.head.named_parameters(), b.head.named_parameters(), strict=True):
        assert torch.equal(pa, pb), name
    assert train(SMALL.with_(kind=kind, seed=1)).losses != a.losses


def test_training_learns_the_task():
    run = train(RunConfig(dim=32, vocab=16, train_length=16, offset=3, steps=300, batch=32))
    sweep = length_sweep(run.head, [16], 16, 3, 16, seed=0, batch=64)
    assert sweep[sweep.metric == "last"].accuracy.iloc[0] > 0.9


def test_ape_rows_beyond_training_length_are_untouched():
    run = train(SMALL.with_(kind="ape"))
    table, init = run.head.table.detach(), run.initial_state["table"]
    assert torch.equal(table[SMALL.train_length :], init[SMALL.train_length :])
    assert not torch.equal(table[: SMALL.train_length], init[: SMALL.train_length])


def test_query_logits_equal_full_forward():
    for head in (build_head(SMALL.with_(kind="rope")), build_head(SMALL.with_(kind="ape"))):
        tokens = sample_tokens(5, 30, SMALL.vocab, generator(0, "t"))
        full = head(tokens)
        queries = torch.tensor([0, 7, 29])
        assert torch.allclose(head.query_logits(tokens, queries), full[:, queries], atol=1e-5)


def test_rope_logits_are_toeplitz_but_ape_are_not():
    rope = build_head(SMALL.with_(kind="rope"))
    ape = build_head(SMALL.with_(kind="ape", table_init_std=1.0))
    assert toeplitz_deviation(logit_matrix(rope, 64)) < 1e-12
    assert toeplitz_deviation(logit_matrix(ape, 64)) > 1e-2


def test_rope_offset_logits_match_matrix():
    head = build_head(SMALL.with_(kind="rope")).double()
    mat = head.position_logits(torch.arange(20), torch.arange(20))
    f = head.offset_logits(torch.arange(20))
    assert torch.allclose(mat[19].flip(0), f, atol=1e-12)


def test_accuracy_at_agrees_with_argmax_of_forward():
    head = build_head(SMALL.with_(kind="rope"))
    tokens = sample_tokens(8, 20, SMALL.vocab, generator(0, "a"))
    q = torch.arange(3, 20)
    pred = head(tokens).argmax(-1)[:, q]
    expected = (pred == tokens[:, q - 3]).double().mean(0)
    assert torch.allclose(accuracy_at(head, tokens, 3, q), expected)


def test_ape_refuses_positions_beyond_its_table():
    head = ApeHead(8, 4, 10, generator(0, "i"))
    with pytest.raises(ValueError, match="max_length"):
        head.attention(11)


def test_rope_head_accepts_custom_frequencies():
    head = RopeHead(8, 4, generator(0, "i"), freqs=torch.ones(4))
    assert torch.equal(head.freqs, torch.ones(4, dtype=torch.float64))


def test_single_query_evaluation_at_8192_is_memory_frugal():
    """Peak resident memory of a one-query evaluation at L = 8192 (batch 256) stays well under 2 GB."""
    code = """
import resource, torch
from lengthgen.training import RunConfig, build_head
from lengthgen.evaluation import length_sweep
head = build_head(RunConfig(kind="rope"))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
length_sweep(head, [8192], 32, 5, 64, seed=0, batch=256, out_of_range_queries=1)
print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    before_kb, peak_kb = map(int, out)
    assert peak_kb < 2 * 1024 * 1024, f"peak RSS {peak_kb / 1024:.0f} MB"
    assert peak_kb - before_kb < 512 * 1024, f"evaluation added {(peak_kb - before_kb) / 1024:.0f} MB"
