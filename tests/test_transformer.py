import math

import numpy as np
import pytest
import torch

from lengthgen.chapters.transfer import (
    Parameters,
    content_averaged_kernels,
    head_target_mass,
    last_query_masses,
    measure_network,
    shift_deviation,
)
from lengthgen.model.encodings import identifiable_base, rope_frequencies, rotation_matrix
from lengthgen.model.evaluation import length_sweep
from lengthgen.model.seeding import generator
from lengthgen.model.tasks import IGNORE, copy_batch, shift_batch, task_batch
from lengthgen.model.training import train
from lengthgen.model.transformer import NetworkRunConfig, Transformer, TransformerConfig


def model(encoding="rope", **kw):
    return Transformer(TransformerConfig(vocab=11, dim=16, heads=2, layers=2, max_length=64, encoding=encoding, **kw),
                       generator(0, "init")).double()


@torch.no_grad()
def test_rope_attention_equals_naive_rotation_matrices():
    m = model()
    attn = m.blocks[0].attn
    x = torch.randn(2, 9, 16, dtype=torch.float64, generator=generator(1, "x"))
    q, k, _ = attn.split_heads(x)
    hd = m.cfg.head_dim
    freqs = rope_frequencies(hd)
    naive = torch.empty(2, 2, 9, 9, dtype=torch.float64)
    for t in range(9):
        for s in range(9):
            rq = rotation_matrix(t, freqs, "half") @ q[:, :, t, :, None]
            rk = rotation_matrix(s, freqs, "half") @ k[:, :, s, :, None]
            naive[:, :, t, s] = (rq * rk).sum((-1, -2)) / math.sqrt(hd)
    causal = torch.ones(9, 9, dtype=torch.bool).tril()
    got = attn.logits(x)
    assert torch.allclose(got[..., causal], naive[..., causal], atol=1e-12)
    assert torch.isinf(got[..., ~causal]).all()


@pytest.mark.parametrize("encoding", ["rope", "ape", "nope"])
@torch.no_grad()
def test_fast_path_equals_explicit_path(encoding):
    m = model(encoding)
    x = torch.randn(3, 12, 16, dtype=torch.float64, generator=generator(2, "x"))
    attn = m.blocks[1].attn
    weights = torch.softmax(attn.logits(x, start=5), -1)
    _, _, v = attn.split_heads(x)
    explicit = attn.proj((weights @ v).transpose(1, 2).reshape(3, 12, 16))
    assert torch.allclose(attn(x, start=5), explicit, atol=1e-12)


@torch.no_grad()
def test_network_is_shift_equivariant_with_rope_and_nope_not_ape():
    tokens = torch.randint(0, 11, (2, 10), generator=generator(3, "t"))
    for encoding, equivariant in (("rope", True), ("nope", True), ("ape", False)):
        m = model(encoding, ape_init_std=0.5)
        same = torch.allclose(m(tokens, start=0), m(tokens, start=40), atol=1e-10)
        assert same == equivariant, encoding


def test_ape_rows_beyond_training_length_never_move():
    cfg = NetworkRunConfig(model=TransformerConfig(vocab=8, dim=16, heads=2, encoding="ape", max_length=40),
                           train_length=12, offset=2, steps=3, batch=4)
    run = train(cfg)
    assert torch.equal(run.model.position[12:], run.initial_state["position"][12:])
    assert not torch.equal(run.model.position[:12], run.initial_state["position"][:12])
    with pytest.raises(ValueError, match="beyond the APE table"):
        run.model(torch.zeros(1, 41, dtype=torch.long))


def test_tasks():
    tokens, targets = shift_batch(3, 10, 7, 2, generator(0, "s"))
    assert (targets[:, :2] == IGNORE).all() and torch.equal(targets[:, 2:], tokens[:, :-2])
    tokens, targets = copy_batch(50, 21, 9, generator(0, "c"), variable=False)
    assert (tokens[:, 10] == 8).all() and torch.equal(tokens[:, 11:21], tokens[:, :10])
    assert torch.equal(targets[:, 10:20], tokens[:, :10]) and (targets[:, :10] == IGNORE).all()
    tokens, targets = copy_batch(200, 21, 9, generator(0, "c"), variable=True)
    n = (tokens == 8).int().argmax(1)
    assert n.min() >= 1 and n.max() <= 10 and len(n.unique()) > 3
    for i in range(5):
        j = int(n[i])
        assert torch.equal(targets[i, j : 2 * j], tokens[i, :j]) and (targets[i, 2 * j :] == IGNORE).all()
    with pytest.raises(ValueError, match="task must be"):
        task_batch("sort", 1, 5, 4, 1, generator(0, "x"))


def test_identifiable_base():
    for dim, T, turns in ((16, 32, 1.0), (32, 64, 2.0)):
        base = identifiable_base(dim, T, turns)
        assert rope_frequencies(dim, base).min().item() * T == pytest.approx(2 * math.pi * turns)


def test_transfer_measurements_on_a_tiny_network():
    params = Parameters.from_values(dict(
        seeds=1, vocab=8, dim=16, layers=2, heads=2, offsets=[2], train_length=12, steps=20, batch=8, lr=3e-3,
        length_factor=4, eval_batch=8, kernel_batch=2, retrieval_mass=0.0, null_draws=100, compare_heads=1,
        fixed_turns=1.0, copy_seeds=1, copy_steps=5, workers=1, device="cpu", seed_start=0))
    cfg = NetworkRunConfig(model=TransformerConfig(vocab=8, dim=16, heads=2, max_length=48), train_length=12,
                           offset=2, steps=20, batch=8)
    run = train(cfg)
    assert shift_deviation(run, 30, torch.float64) < 1e-12
    mass = head_target_mass(run, 12, 4)
    assert mass.shape == (2, 2) and ((mass >= 0) & (mass <= 1)).all()
    kernels = content_averaged_kernels(run, 20, 2)
    tokens, _ = task_batch("shift", 2, 20, 8, 2, generator(cfg.seed, "kernel-20"))
    logits = run.model.attention_logits(tokens)[1][:, 0]
    assert kernels[1, 0, 3] == pytest.approx(float(torch.diagonal(logits, -3, 1, 2).mean()), rel=1e-5)
    [(target, hijacked)] = last_query_masses(run, [(1, 0, kernels[1, 0])], [12, 20], 2)
    assert len(target) == 2 and all(0 <= v <= 1 for v in target + hijacked)
    out = measure_network(run, ("RoPE", params))
    assert {"sweep", "shift_f64", "heads", "kernels"} <= set(out)
    assert len(out["heads"]) == 4  # retrieval_mass = 0 keeps every head
    sweep = length_sweep(run.model, cfg, [12, 24], 4, sequence_chunk=2)
    assert set(sweep.metric) == {"last", "in_range", "out_of_range"}
    assert np.isfinite(sweep.accuracy).all()


def test_collapse_table_explains_collapses_by_hijacking_offsets():
    import pandas as pd

    from lengthgen.chapters.transfer import collapse_table

    heads = pd.DataFrame(dict(label=["A", "A", "B", "C"], offset=5, seed=[0, 0, 0, 0], first_hijack=[49, -1, 100, -1]))
    rows = [("A", 32, 1.0), ("A", 64, 0.1), ("B", 32, 1.0), ("B", 64, 0.2), ("C", 32, 1.0), ("C", 64, 0.9)]
    acc = pd.DataFrame([dict(task="shift", metric="last", label=lab, offset=5, seed=0, length=n, accuracy=a)
                        for lab, n, a in rows])
    table = collapse_table(heads, acc).set_index("label")
    assert table.loc["A", "first_hijack"] == 49 and table.loc["A", "collapse_length"] == 64 and table.loc["A", "explained"]
    assert not table.loc["B", "explained"]  # collapsed at 64 with no hijacking offset below 64
    assert np.isinf(table.loc["C", "first_hijack"]) and table.loc["C", "explained"]  # never collapsed
