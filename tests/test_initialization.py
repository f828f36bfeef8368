"""Chapter 13: the rescaled initialization, the collapse prediction rule and its scoring."""

import numpy as np
import pandas as pd
import pytest
import torch

from lengthgen.book.parameters import ParameterError
from lengthgen.book.paths import REPO_ROOT
from lengthgen.book.rerun import default_parameters
from lengthgen.chapters.initialization import (
    CHAPTER6_SEEDS,
    INIT_SCHEMES,
    Parameters,
    ScaledInitRunConfig,
    balanced_accuracy,
    hijackers_outweigh,
    init_query_std,
    initial_model,
    length_only_rule,
    network_jobs,
    plane_changes,
    scale_initialization,
)
from lengthgen.model.training import TrainedRun, stack_key
from lengthgen.model.transformer import NetworkRunConfig, TransformerConfig

SMALL = TransformerConfig(vocab=16, dim=16, layers=2, heads=2, max_length=64)


def defaults() -> dict:
    return default_parameters(REPO_ROOT / "book" / "13_initialization.ipynb")


def test_scaling_touches_exactly_the_weights_its_scope_names():
    plain = NetworkRunConfig(model=SMALL, seed=3).build_model()
    qk = ScaledInitRunConfig(model=SMALL, seed=3, init_scale=2.5, init_scope="qk").build_model()
    wide = ScaledInitRunConfig(model=SMALL, seed=3, init_scale=2.5, init_scope="all").build_model()
    same = ScaledInitRunConfig(model=SMALL, seed=3, init_scale=1.0, init_scope="all").build_model()
    d = SMALL.dim
    for (name, p), q, w, s in zip(plain.named_parameters(), qk.parameters(), wide.parameters(), same.parameters(),
                                  strict=True):
        assert torch.equal(s, p)  # factor 1: chapter 6's initialization bit for bit
        if name.endswith("qkv.weight"):
            assert torch.equal(q[: 2 * d], p[: 2 * d] * 2.5) and torch.equal(q[2 * d:], p[2 * d:])
        else:
            assert torch.equal(q, p)
        if p.dim() >= 2 and "ln" not in name:
            assert torch.equal(w, p * 2.5)
        else:
            assert torch.equal(w, p)  # LayerNorms (and zero biases) untouched
    with pytest.raises(ValueError, match="init_scope"):
        scale_initialization(plain, 2.0, "mlp")


def test_init_query_std_measures_the_rescaled_weights():
    for scale in (1.0, 3.6):
        model = ScaledInitRunConfig(model=TransformerConfig(), seed=0, init_scale=scale, init_scope="qk").build_model()
        state = {name: p.detach() for name, p in model.named_parameters()}
        assert init_query_std(state, 64) == pytest.approx(0.02 * scale, rel=0.05)


def test_hijackers_outweigh_compares_their_total_softmax_weight_with_the_target():
    T, k = 8, 2
    kernel = np.zeros(32)
    kernel[k] = 1.0
    assert not hijackers_outweigh(kernel, k, T, 32)  # nothing beats the target
    kernel[20] = 1.5
    assert not hijackers_outweigh(kernel, k, T, 20)  # the hijacker is not inside a sequence of 20 tokens
    assert hijackers_outweigh(kernel, k, T, 21)
    kernel[20] = 1.0 + 1e-9  # barely above the target: its weight alone does not exceed it ...
    assert not hijackers_outweigh(kernel, k, T, 32)
    kernel[25] = 1.0 + 1e-9  # ... but two such offsets do
    assert hijackers_outweigh(kernel, k, T, 32)
    kernel[:] = 0.0
    kernel[k], kernel[3] = 1.0, 5.0  # offsets inside the training range never count
    assert not hijackers_outweigh(kernel, k, T, 32)


def test_balanced_accuracy_and_the_best_length_only_rule():
    observed = np.array([True, True, False, False, False, False])
    assert balanced_accuracy(observed, observed) == 1.0
    assert balanced_accuracy(observed, ~observed) == 0.0
    assert balanced_accuracy(observed, np.ones(6, bool)) == 0.5  # a constant rule
    assert balanced_accuracy(observed, np.array([True, False, True, False, False, False])) == pytest.approx(0.625)
    assert np.isnan(balanced_accuracy(np.zeros(3, bool), np.zeros(3, bool)))  # one kind absent: cannot judge
    cells = pd.DataFrame(dict(length=[64, 64, 128, 128, 256, 256], collapsed=[False, False, True, False, True, True]))
    rule = length_only_rule(cells)
    assert list(rule) == [False, False, True, True, True, True]
    assert balanced_accuracy(cells.collapsed, rule) == pytest.approx(0.75)


def test_plane_changes_see_only_the_plane_that_moved():
    cfg = ScaledInitRunConfig(model=SMALL, seed=1)
    model = cfg.build_model()
    initial = {name: p.detach().clone() for name, p in model.named_parameters()}
    run = TrainedRun(cfg, model, [], initial)
    assert np.array_equal(plane_changes(run, 0, 1), np.zeros(SMALL.head_dim // 2))
    with torch.no_grad():
        row = SMALL.dim + 1 * SMALL.head_dim + 2  # key row of plane 2's first coordinate, head 1 (half convention)
        model.blocks[0].attn.qkv.weight[row] += 1.0
    changes = plane_changes(run, 0, 1)
    assert changes[2] > 0 and np.count_nonzero(changes) == 1
    assert np.array_equal(plane_changes(run, 0, 0), np.zeros(SMALL.head_dim // 2))
    start = initial_model(run)
    assert torch.equal(start.model.blocks[0].attn.qkv.weight, initial["blocks.0.attn.qkv.weight"])


def test_parameters_and_jobs():
    good = defaults()
    p = Parameters.from_values(good)
    assert not set(p.seed_list) & CHAPTER6_SEEDS  # the defaults are fresh seeds
    jobs = network_jobs(p)
    assert len(jobs) == len(INIT_SCHEMES) * 2 * 2 * len(p.offsets) * p.seeds
    assert len({stack_key(cfg) for cfg, _ in jobs}) == len(jobs) // p.seeds  # seeds of one cell train together
    with pytest.raises(ParameterError, match="compare_heads"):
        Parameters.from_values({**good, "compare_heads": good["heads"]})
    with pytest.raises(ParameterError, match="heads"):
        Parameters.from_values({**good, "heads": 3})
    with pytest.raises(ParameterError, match="fixed_turns"):
        Parameters.from_values({**good, "fixed_turns": 50.0})
    with pytest.raises(ParameterError, match="length_factor"):
        Parameters.from_values({**good, "length_factor": 2})
    with pytest.raises(ParameterError, match="init_scale"):
        Parameters.from_values({**good, "init_scale": 0.0})
