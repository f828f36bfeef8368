"""Linear RNNs on impulse responses: realizations, Hankel rank, training, and chapter 9's parameters."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lengthgen.book.parameters import ParameterError
from lengthgen.chapters import connections
from lengthgen.model import linear_rnn


def shift_register(k: int, dim: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The minimal realization of ``1[i = k]`` padded to ``dim`` states."""
    a = torch.zeros(1, dim, dim, dtype=torch.float64)
    for j in range(k):
        a[0, j + 1, j] = 1.0
    b = torch.zeros(1, dim, dtype=torch.float64)
    b[0, 0] = 1.0
    c = torch.zeros(1, dim, dtype=torch.float64)
    c[0, k] = 1.0
    return a, b, c


def test_impulse_response_of_a_shift_register():
    g = linear_rnn.impulse_response(*shift_register(3, 8), 10).numpy()[0]
    assert np.array_equal(g, linear_rnn.RnnTarget("shift", 3).response(10))


def test_targets_and_their_minimal_order():
    assert linear_rnn.RnnTarget("shift", 3).minimal_order == 4
    osc = linear_rnn.RnnTarget("oscillator", rho=0.5, omega=1.0)
    assert osc.minimal_order == 2 and np.isclose(osc.response(3)[2], 0.25 * np.cos(2.0))
    responses = np.stack([linear_rnn.RnnTarget("shift", 3).response(40), osc.response(40)])
    assert list(linear_rnn.hankel_rank(responses, 16)) == [4, 2]
    with pytest.raises(ValueError, match="is not one of"):
        linear_rnn.RnnTarget("parity")
    with pytest.raises(ValueError, match="0 < rho < 1"):
        linear_rnn.RnnTarget("oscillator", rho=1.5)


def test_relative_error_weights_positions():
    target = np.array([[1.0, 0.0, 0.0]])
    assert linear_rnn.relative_error(target, target, 3)[0] == 0.0
    off = np.array([[1.0, 0.0, 1.0]])  # error at lag 2, seen by 1 of 3 positions; target energy 3 (lag 0, all 3)
    assert np.isclose(linear_rnn.relative_error(off, target, 3)[0], 1 / 3)


def test_training_fits_and_is_deterministic():
    target = linear_rnn.RnnTarget("oscillator")
    responses = np.stack([target.response(32)] * 2)
    systems = linear_rnn.init_systems(6, [0.3, 0.3], [0, 1])
    again = linear_rnn.init_systems(6, [0.3, 0.3], [0, 1])
    assert all(torch.equal(x, y) for x, y in zip(systems, again, strict=True))
    a, b, c = linear_rnn.train_systems(*systems, responses, 8, steps=1500, lr=0.05, clip=1.0)
    learned = linear_rnn.impulse_response(a, b, c, 32).numpy()
    assert linear_rnn.relative_error(learned, responses, 8).max() < 1e-3


def test_chapter_parameters_are_checked():
    base = dict(seeds=1, seed_start=0, train_length=8, length_factor=2, state_dim=8, shift=3, init_stds=(0.1, 1.0),
                steps=10, lr=0.05, clip=1.0)
    connections.Parameters.from_values(base)
    with pytest.raises(ParameterError, match="'shift' = 8 is out of range: must be < train_length"):
        connections.Parameters.from_values({**base, "shift": 8})
    with pytest.raises(ParameterError, match="'init_stds' = \\[0.1\\] is out of range: needs at least two"):
        connections.Parameters.from_values({**base, "init_stds": (0.1,)})
    with pytest.raises(ParameterError, match="'state_dim' = 4 is out of range: must exceed the minimal"):
        connections.Parameters.from_values({**base, "state_dim": 4})
    assert connections.minimal_order_mismatches(connections.Parameters.from_values(base)) == 0


def test_rasp_l_table_uses_the_exact_tabular_verdicts():
    table = connections.rasp_l_table()
    assert list(table.index) == list(connections.RASP_L_STUDY)
    pola_column = table.columns[1]
    assert table.loc["copy", pola_column] == "IPE" and "ROPE" not in " ".join(table[pola_column])
