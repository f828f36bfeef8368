"""The position-encoding zoo against its formulas, on hand-checkable cases."""

from __future__ import annotations

import math

import pytest
import torch

from lengthgen.analysis.kernels import toeplitz_deviation
from lengthgen.model import position_zoo as zoo
from lengthgen.model.encodings import rope_frequencies, rotate


def test_sinusoidal_conventions():
    positions = torch.arange(5)
    table = zoo.sinusoidal_table(positions, 8, "interleaved")
    for pos in range(5):
        for i in range(4):
            angle = pos / 10_000 ** (2 * i / 8)
            assert table[pos, 2 * i] == pytest.approx(math.sin(angle))
            assert table[pos, 2 * i + 1] == pytest.approx(math.cos(angle))
    concatenated = zoo.sinusoidal_table(positions, 8, "concatenated")
    for i in range(4):  # tensor2tensor: timescales 10000^(i / (d/2 - 1)), sines then cosines
        assert concatenated[3, i] == pytest.approx(math.sin(3 / 10_000 ** (i / 3)))
        assert concatenated[3, 4 + i] == pytest.approx(math.cos(3 / 10_000 ** (i / 3)))
    assert concatenated[:, 3].abs().max() < 5 * 1e-4  # the slowest timescale is exactly 10000
    with pytest.raises(ValueError, match="convention"):
        zoo.sinusoidal_table(positions, 8, "split")
    with pytest.raises(ValueError, match="even"):
        zoo.sinusoidal_table(positions, 7)


def test_randomized_positions_are_sorted_distinct_in_range_and_seeded():
    gen = torch.Generator().manual_seed(0)
    rows = zoo.randomized_positions(16, 10, 64, gen)
    assert rows.shape == (16, 10)
    assert (rows[:, 1:] > rows[:, :-1]).all() and rows.min() >= 0 and rows.max() < 64
    again = zoo.randomized_positions(16, 10, 64, torch.Generator().manual_seed(0))
    assert torch.equal(rows, again)
    assert not torch.equal(rows[0], rows[1])
    with pytest.raises(ValueError, match="max_position"):
        zoo.randomized_positions(1, 65, 64, gen)


def test_t5_buckets_match_the_reference_edges():
    distance = torch.arange(0, 300)
    bucket = zoo.t5_bucket(-distance)  # causal: key - query = -distance
    assert torch.equal(bucket[:16], torch.arange(16))  # distances 0-15 exact
    assert bucket[16] == 16 and (bucket[16:] >= 16).all()
    assert (bucket[1:] >= bucket[:-1]).all()  # monotone
    assert bucket[112] == 30 and bucket[113] == 31  # every distance from 113 on is in the last bucket, not from 128
    assert (bucket[113:] == 31).all()
    assert (zoo.t5_bucket(distance[1:]) == 0).all()  # causal: keys after the query share bucket 0
    both = zoo.t5_bucket(torch.tensor([-1, 1, -20, 20]), bidirectional=True)
    assert both.tolist() == [1, 17, 10, 26]  # 16 buckets a side, 8 exact


def test_t5_bias_is_a_function_of_the_offset():
    bias = zoo.T5Bias(heads=3)
    with torch.no_grad():
        bias.table.normal_(generator=torch.Generator().manual_seed(1))
    positions = torch.arange(40)
    values = bias(positions, positions)
    assert values.shape == (3, 40, 40)
    assert offset_only_deviation(values) == 0.0
    assert values[1, 39, 0] == bias.table[zoo.t5_bucket(torch.tensor(-39)), 1]


def test_alibi_slopes():
    assert zoo.alibi_slopes(8) == pytest.approx([2.0 ** -(h + 1) for h in range(8)])
    assert zoo.alibi_slopes(16) == pytest.approx([2.0 ** -(0.5 * (h + 1)) for h in range(16)])
    twelve = zoo.alibi_slopes(12)
    assert twelve[:8] == pytest.approx([2.0 ** -(h + 1) for h in range(8)])
    assert twelve[8:] == pytest.approx([0.7071, 0.3536, 0.1768, 0.0884], abs=1e-4)  # not monotone overall
    bias = zoo.alibi_bias(torch.arange(6), torch.arange(6), zoo.alibi_slopes(2))
    assert bias[0, 5, 1] == pytest.approx(-2 ** -4 * 4)
    assert offset_only_deviation(bias) == 0.0
    with pytest.raises(ValueError):
        zoo.alibi_slopes(0)


def test_partial_rotary_rotates_a_quarter_and_passes_the_rest_through():
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(7, 16, generator=gen, dtype=torch.float64)
    positions = torch.arange(7)
    y = zoo.partial_rotary(x, positions, 0.25)
    assert torch.equal(y[:, 4:], x[:, 4:])  # 12 of 16 coordinates untouched
    assert torch.allclose(y[:, :4], rotate(x[:, :4], positions, rope_frequencies(4)))  # base^(-2m/4), not /16
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1))
    # the logit between rotated parts depends on the offset only; the pass-through part not at all on position
    q, k = x[0].expand(7, 16), x[1].expand(7, 16)
    logits = zoo.partial_rotary(q, positions, 0.25) @ zoo.partial_rotary(k, positions, 0.25).T
    assert offset_only_deviation(logits) < 1e-12
    with pytest.raises(ValueError, match="even"):
        zoo.partial_rotary(x, positions, 0.1)


def test_fire_normalizer_and_where_it_stops_being_relative():
    torch.manual_seed(0)
    fire = zoo.FireBias(heads=2, c_init=0.5, threshold_init=8.0).double()
    positions = torch.arange(20)
    z = fire.normalized_offset(positions, positions).detach()
    assert z[5, 2] == pytest.approx(math.log(1 + 0.5 * 3) / math.log(1 + 0.5 * 8))  # i <= L: psi(L)
    assert z[15, 2] == pytest.approx(math.log(1 + 0.5 * 13) / math.log(1 + 0.5 * 15))  # i > L: psi(i)
    assert (z.diagonal() == 0).all() and z[15, :16].max() <= 1
    bias = fire(positions, positions)
    assert bias.shape == (2, 20, 20)
    assert offset_only_deviation(bias[:, :9, :9]) < 1e-12  # relative while i <= L
    assert offset_only_deviation(bias) > 1e-6  # not beyond
    bias.sum().backward()
    assert fire.log_c.grad is not None and fire.threshold.grad is not None  # c and L are learned


def test_offset_only_deviation_sees_an_absolute_term():
    sinusoid = zoo.sinusoidal_table(torch.arange(12), 8)
    logits = (sinusoid + 1.0) @ (sinusoid + 1.0).T  # a content vector added to the position: not relative
    assert offset_only_deviation(logits) > 0.1
    assert offset_only_deviation(sinusoid @ sinusoid.T) < 1e-12  # pure sinusoid dot products are relative


def offset_only_deviation(bias: torch.Tensor) -> float:
    """Chapter 1's Toeplitz test on every head of ``(heads, N, N)`` biases (or one ``(N, N)`` matrix)."""
    bias = bias.detach().double()
    return max(toeplitz_deviation(b) for b in (bias if bias.dim() == 3 else bias[None]))


def test_partial_rotary_frequencies():
    freqs = zoo.partial_rotary_frequencies(64, 0.25, 10_000.0)
    assert freqs.shape == (32,)
    assert torch.allclose(freqs[:8], 10_000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16))
    assert (freqs[8:] == 0).all()  # 24 pass-through planes never turn
    assert torch.allclose(zoo.partial_rotary_frequencies(64, 1.0), rope_frequencies(64))
