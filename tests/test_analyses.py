import math

import numpy as np
import pytest
import torch

from lengthgen.analysis.kernels import toeplitz_deviation
from lengthgen.analysis.stats import binomial_interval, consistent_with
from lengthgen.book.audit import current_defaults
from lengthgen.chapters.absolute_pinning import CHANCE_CEILING, chance_cells, pinning, table_movement, vanishing_init_key
from lengthgen.chapters.common import head_run_configs
from lengthgen.chapters.equivariance import Parameters, renormalization_error
from lengthgen.claims import claims_of
from lengthgen.claims.paper import PAPER_CLAIMS
from lengthgen.model.evaluation import doubling_lengths
from lengthgen.model.heads import HeadRunConfig
from lengthgen.model.seeding import generator
from lengthgen.model.training import train


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
    p = Parameters.from_values({**current_defaults("01_equivariance"), **dict(
        seeds=3, dim=8, vocab=4, train_length=10, offsets=[2, 3], length_factor=4, workers=1, device="cpu")})
    cfgs = head_run_configs(p, "ape")
    assert [(c.offset, c.seed) for c in cfgs] == [(2, 0), (2, 1), (2, 2), (3, 0), (3, 1), (3, 2)]
    assert cfgs[0].max_length == 40 and cfgs[0].kind == "ape" and cfgs[0].device == "cpu"
    held_out = Parameters.from_values({**current_defaults("01_equivariance"), **dict(seeds=2, seed_start=100)})
    assert sorted({c.seed for c in head_run_configs(held_out, "rope")}) == [100, 101]


def test_glue_converts_numpy_scalars(monkeypatch):
    import numpy as np

    from lengthgen.book import glue

    seen = {}
    monkeypatch.setattr(glue, "_myst_glue", lambda name, value, display: seen.update({name: value}))
    glue.glue("x", np.float64(0.5))
    glue.glue("n", np.int64(3))
    assert type(seen["x"]) is float and type(seen["n"]) is int


def test_vanishing_init_key_reads_only_trained_weights():
    head = HeadRunConfig(kind="ape", dim=8, vocab=4, max_length=40).build_model()
    with torch.no_grad():
        head.table[:10] += 0.1
        head.table[6] += 5 * (head.const @ head.w_q.T) @ head.w_k  # key 6 aligned with the constant query
        before = vanishing_init_key(head, 10, 40)
        head.table[10:] = torch.randn(30, 8) * 100  # whatever the untrained rows hold, the answer is the same
    assert before == 6 and vanishing_init_key(head, 10, 40) == 6


def test_chance_cells_drop_the_pinned_target_query():
    T, k, vocab, batch = 8, 2, 4, 100
    # queries T..15; pinned key 10 makes query 12 the pinned target: perfect there, chance elsewhere
    accuracy = np.full(8, 0.25)
    accuracy[12 - T] = 1.0
    rows, target = chance_cells({16: accuracy}, batch, T, k, pinned_key=10, vocab=vocab)
    assert target == 1.0
    assert rows[0]["n"] == batch * 7 and rows[0]["accuracy"] == pytest.approx(0.25) and rows[0]["chance_inside"]
    # a pinned key whose target query is in range leaves every out-of-range query in, and no target accuracy
    rows, target = chance_cells({16: accuracy}, batch, T, k, pinned_key=3, vocab=vocab)
    assert math.isnan(target) and rows[0]["n"] == batch * 8 and not rows[0]["chance_inside"]


def test_chance_ceiling_separates_a_small_departure_from_a_partly_carried_rule():
    T, k, vocab, batch = 8, 2, 16, 1000
    at_chance = np.full(8, 1 / vocab)
    slightly_above = np.full(8, 1.3 / vocab)  # excluded from exact chance, still under the practical ceiling
    carried = np.full(8, 0.2)  # the rule carried to a fifth of the far queries
    rows = [chance_cells({16: a}, batch, T, k, pinned_key=3, vocab=vocab)[0][0] for a in (at_chance, slightly_above,
                                                                                        carried)]
    assert [r["chance_inside"] for r in rows] == [True, False, False]
    assert [r["below_ceiling"] for r in rows] == [True, True, False]
    assert CHANCE_CEILING / vocab < 0.2


def test_window_training_moves_table_rows_beyond_the_training_length():
    cfg = HeadRunConfig(kind="ape", dim=8, vocab=4, train_length=8, max_length=32, window_starts=16, steps=100, seed=1)
    run = train(cfg)
    init = cfg.build_model().table.detach()
    moved = (run.model.table.detach().cpu() - init).abs().sum(1) > 0
    assert moved[:24].all(), "windows starting anywhere in 0..16 train every row up to 24"
    assert not moved[24:].any(), "rows no window reaches keep their initialization"
    with pytest.raises(ValueError, match="window_starts"):
        HeadRunConfig(kind="ape", train_length=8, max_length=20, window_starts=16).sample_batch(generator(0, "w"))


def test_hijack_law_is_judged_on_hijacked_heads_against_a_constant_from_other_seeds():
    import pandas as pd

    from lengthgen.chapters.equivariance import constant_errors, hijack_bias, law_gain

    hijack = pd.DataFrame(dict(offset=[5, 5, 5, 5, 7], observed=[1000, 10000, 100000, None, 500],
                               predicted=[4000.0, 40000.0, 400000.0, 1e9, 50.0], judged=[True, True, True, False, True]))
    hijack["signed"] = np.log10(hijack.observed / hijack.predicted)
    assert hijack_bias(hijack) == pytest.approx(np.log10(0.25))  # median over judged runs: the law is 4x early
    errors = constant_errors(hijack)
    # each judged run against the geometric mean of the *other* judged runs at its offset; the unjudged run and the
    # lone run at offset 7 (no other seed to fit on) have none
    assert errors.tolist()[:3] == pytest.approx([1.5, 0.0, 1.5]) and errors.iloc[3:].isna().all()
    # law errors 0.602 at k = 5 (median over the three with a constant), constant's median 1.5
    assert law_gain(hijack) == pytest.approx(np.log10(4) - 1.5)
    assert math.isnan(law_gain(hijack.iloc[3:]))  # too few judged runs: not judged
    assert math.isnan(hijack_bias(hijack.iloc[3:4]))


def test_dashboard_rows_rest_on_asserted_checks_and_limits_on_registered_claims():
    """A paper claim's checks must be asserted claims of its chapter (a reported one has no verdict and would make the
    row fail), and every limit must name a registered claim of its chapter."""
    for row in PAPER_CLAIMS:
        registered = claims_of(row.chapter)
        for name in row.checks:
            assert name in registered and registered[name].role != "reported", (row.key, name)
        for limit in row.limits:
            assert limit.name in claims_of(limit.chapter), (row.key, limit.name)
