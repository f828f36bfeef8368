import torch

from lengthgen.chapters.absolute_pinning import pinning, table_movement
from lengthgen.chapters.common import head_run_configs
from lengthgen.chapters.equivariance import Parameters, renormalization_error, toeplitz_deviation
from lengthgen.chapters.stats import binomial_interval, consistent_with
from lengthgen.model.evaluation import doubling_lengths
from lengthgen.model.heads import HeadRunConfig


def test_toeplitz_deviation_zero_for_toeplitz_and_detects_breaks():
    f = torch.randn(10, dtype=torch.float64)
    t = torch.arange(10)
    toeplitz = f[(t[:, None] - t[None, :]).clamp(min=0)]
    assert toeplitz_deviation(toeplitz) == 0.0
    broken = toeplitz.clone()
    broken[7, 2] += 0.5
    assert toeplitz_deviation(broken) > 0.01


def test_renormalization_exact_for_rope():
    head = HeadRunConfig(kind="rope", dim=16, vocab=8).build_model()
    assert renormalization_error(head, 12, 200) < 1e-13


def test_table_movement_and_pinning_on_crafted_head():
    head = HeadRunConfig(kind="ape", dim=8, vocab=4, max_length=40).build_model()
    init = head.table.detach().clone()
    with torch.no_grad():
        head.table[:10] += 1.0
        head.table[3] *= 50  # one very loud in-range key
    move = table_movement(head, init, 10)
    assert move.untrained_bitwise_equal and move.untrained_max_change == 0 and move.trained_mean_change > 0
    pin = pinning(head, 10, 40)
    assert 0 <= pin.pinned_key < 40 and 0 < pin.pinned_fraction <= 1


def test_binomial_interval():
    low, high = binomial_interval(50, 100, 0.95)
    assert low < 0.5 < high and abs(low - 0.398) < 0.01
    assert consistent_with(0.5, 0.52, 1000) and not consistent_with(0.1, 0.52, 1000)


def test_doubling_lengths_and_configs():
    assert doubling_lengths(32, 16) == [32, 64, 128, 256, 512]
    assert doubling_lengths(10, 3) == [10, 20, 30]
    p = Parameters.from_values(dict(seeds=3, dim=8, vocab=4, train_length=10, offsets=[2, 3], steps=5, batch=2, lr=0.1,
                                    length_factor=4, eval_batch=2, rope_base=1e4, rope_convention="half", workers=1,
                                    device="cpu"))
    cfgs = head_run_configs(p, "ape")
    assert [(c.offset, c.seed) for c in cfgs] == [(2, 0), (2, 1), (2, 2), (3, 0), (3, 1), (3, 2)]
    assert cfgs[0].max_length == 40 and cfgs[0].kind == "ape" and cfgs[0].device == "cpu"


def test_glue_converts_numpy_scalars(monkeypatch):
    import numpy as np

    from lengthgen.book import glue

    seen = {}
    monkeypatch.setattr(glue, "_myst_glue", lambda name, value, display: seen.update({name: value}))
    glue.glue("x", np.float64(0.5))
    glue.glue("n", np.int64(3))
    assert type(seen["x"]) is float and type(seen["n"]) is int
