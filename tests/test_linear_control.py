import math

import torch

from lengthgen.chapters.linear_control.interpolants import (
    evaluate_linear,
    expected_squared_error,
    gradient_descent,
    gradient_descent_closed_form,
    min_norm_interpolant,
    stable_lr,
    task_gram,
)
from lengthgen.model.encodings import full_band_frequencies
from lengthgen.model.heads import LinearRunConfig, offset_features, unit_key
from lengthgen.model.seeding import generator
from lengthgen.model.tasks import sample_tokens
from lengthgen.model.training import train

D64 = torch.float64


def test_hand_computed_min_norm_and_gd_trajectory():
    phi = torch.tensor([[1.0, 1.0]], dtype=D64)
    gram = torch.tensor([[1.0]], dtype=D64)
    y = torch.tensor([1.0], dtype=D64)
    assert torch.allclose(min_norm_interpolant(phi, y), torch.tensor([0.5, 0.5], dtype=D64))
    # one GD step at lr 1/4 from zero: q1 = 1/4 * Phi^T (y - 0) = [1/4, 1/4]; closed form (1 - (1 - 2/4)^1) * [1/2, 1/2]
    assert torch.allclose(gradient_descent(phi, gram, y, 0.25, 1), torch.tensor([0.25, 0.25], dtype=D64))
    assert torch.allclose(gradient_descent_closed_form(phi, gram, y, 0.25, 1), torch.tensor([0.25, 0.25], dtype=D64))
    assert torch.allclose(gradient_descent_closed_form(phi, gram, y, 0.25, 3), (1 - 0.5**3) * torch.tensor([0.5, 0.5], dtype=D64))
    assert torch.allclose(gradient_descent_closed_form(phi, gram, y, 0.25, float("inf")), torch.tensor([0.5, 0.5], dtype=D64))


def test_hand_computed_task_gram():
    expected = torch.tensor([[1.0, 0.5, 0.25], [0.5, 1.0, 0.25], [0.25, 0.25, 0.5]], dtype=D64)
    assert torch.allclose(task_gram(3, 1, 2), expected)


def test_task_gram_matches_sampled_loss():
    T, k, V = 6, 2, 5
    f = torch.randn(T, generator=generator(0, "f"), dtype=D64)
    y = torch.zeros(T, dtype=D64)
    y[k] = 1
    tokens = sample_tokens(40_000, T, V, generator(0, "tok"))
    onehot = torch.nn.functional.one_hot(tokens, V).to(D64)
    losses = []
    for t in range(k, T):
        out = sum(f[d] * onehot[:, t - d] for d in range(t + 1))
        losses.append(((out - onehot[:, t - k]) ** 2).sum(-1).mean())
    sampled = torch.stack(losses).mean()
    exact = (f - y) @ task_gram(T, k, V) @ (f - y)
    assert abs(float(sampled - exact)) < 0.03 * float(exact)


def test_gd_matches_closed_form_on_rotary_features():
    d, T, k, V = 16, 6, 2, 8
    phi = offset_features(torch.arange(T), full_band_frequencies(d, 16.0), unit_key(d, 0))
    gram, y = task_gram(T, k, V), torch.eye(T, dtype=D64)[k]
    lr = stable_lr(phi, gram)
    for steps in (1, 7, 200):
        a, b = gradient_descent(phi, gram, y, lr, steps), gradient_descent_closed_form(phi, gram, y, lr, steps)
        assert torch.allclose(a, b, atol=1e-10)


def test_sgd_from_zero_stays_in_row_space_and_reaches_pinv():
    d, T, k, V = 16, 6, 2, 8
    cfg = LinearRunConfig(dim=d, vocab=V, train_length=T, offset=k, rope_base=16.0, seed=1, steps=400, batch=32)
    phi = cfg.features(torch.arange(T))
    assert torch.equal(phi, offset_features(torch.arange(T), full_band_frequencies(d, 16.0), unit_key(d, 1)))
    q = train(cfg.with_(lr=0.5 * stable_lr(phi, task_gram(T, k, V)))).model.q.detach()
    proj = torch.linalg.pinv(phi) @ phi
    assert (q - proj @ q).norm() < 1e-10
    pinv = min_norm_interpolant(phi, torch.eye(T, dtype=D64)[k])
    assert (q - pinv).norm() / pinv.norm() < 1e-3


def test_unit_key_amplitudes_and_expected_error():
    key = unit_key(8, 3)
    assert torch.allclose(key[:4] ** 2 + key[4:] ** 2, torch.ones(4, dtype=D64))
    f = torch.zeros(5, dtype=D64)
    f[2] = 1.0
    assert expected_squared_error(f, 2, 10) == 0.0
    ev = evaluate_linear(f, [5], 2, 10, seed=0, batch=64)[0]
    assert ev.accuracy == 1.0 and ev.squared_error == 0.0


def test_far_moments_match_hand_values_and_long_run_averages():
    from lengthgen.chapters.linear_control.law import far_moment

    a = torch.tensor([0.3], dtype=D64)
    assert abs(far_moment(a, "linear") - 0.3**2 / 2) < 1e-15
    assert abs(far_moment(a, "squared") - 3 * 0.3**4 / 8) < 1e-15  # E cos^4 = 3/8
    assert abs(far_moment(a, "exp") - float(torch.special.i0(torch.tensor(0.6, dtype=D64)))) < 1e-15
    # several incommensurate planes: the moments are the long-run averages over offsets
    amplitudes = torch.tensor([0.4, 0.25, 0.3, 0.1], dtype=D64)
    freqs = torch.tensor([1.0, 2 ** 0.5, 3 ** 0.5, 5 ** 0.5], dtype=D64)
    offsets = torch.arange(2_000_000, dtype=D64)
    f = (amplitudes[:, None] * torch.cos(freqs[:, None] * offsets[None, :] + 0.7)).sum(0)
    for weight_map, g in (("linear", f), ("squared", f**2), ("exp", torch.exp(f))):
        assert abs(float((g**2).mean()) / far_moment(amplitudes, weight_map) - 1) < 2e-3, weight_map


def test_plane_amplitudes_of_a_unit_key():
    from lengthgen.chapters.linear_control.law import plane_amplitudes

    q = torch.tensor([3.0, 0.0, 4.0, 1.0], dtype=D64)  # planes (q0, q2) and (q1, q3) in the half convention
    freqs = full_band_frequencies(4, 16.0)
    assert torch.allclose(plane_amplitudes(q, unit_key(4, 5), freqs), torch.tensor([5.0, 1.0], dtype=D64) / 2)


def test_argmax_accuracy_hand_cases():
    from lengthgen.chapters.linear_control.law import argmax_accuracy

    assert argmax_accuracy(1.0, 0.0, 10) == 1.0
    # V = 2: P(m + s Z0 > s Z1) = Phi(m / (s sqrt 2)), s^2 = noise / 4
    m, noise = 0.7, 2.0
    expected = float(torch.special.ndtr(torch.tensor(m / (math.sqrt(noise / 4) * math.sqrt(2)), dtype=D64)))
    assert abs(argmax_accuracy(m, noise, 2) - expected) < 1e-6
    # no signal: chance
    assert abs(argmax_accuracy(0.0, 5.0, 8) - 1 / 8) < 1e-6


def test_collapse_law_matches_sampled_accuracy_of_a_random_kernel():
    from lengthgen.chapters.linear_control.law import CollapseLaw

    V, L, k = 16, 400, 3
    f = 0.15 * torch.randn(L, generator=generator(0, "kernel"), dtype=D64)
    f[k] = 1.0
    law = CollapseLaw(1.0, float((f**2).sum() - 1), 0.0, L, V)
    measured = evaluate_linear(f, [L], k, V, seed=1, batch=4000)[0].accuracy
    assert abs(law.accuracy(L) - measured) < 0.04
    half = law.collapse_length(0.5)
    assert law.accuracy(int(half) + 1) <= 0.5 + 1e-9 or half == L


def test_least_bad_interpolant_interpolates_and_beats_min_norm():
    from lengthgen.chapters.linear_control.law import least_bad_interpolant

    d, T, k, V, L = 16, 6, 2, 8, 96
    cfg = LinearRunConfig(dim=d, vocab=V, train_length=T, offset=k, rope_base=16.0, seed=2, frequency_jitter=0.5)
    phi, phi_long = cfg.features(torch.arange(T)), cfg.features(torch.arange(L))
    y = torch.eye(T, dtype=D64)[k]
    best = least_bad_interpolant(phi, phi_long, k, V)
    assert torch.allclose(phi @ best, y, atol=1e-9)
    pinv = min_norm_interpolant(phi, y)
    assert expected_squared_error(phi_long @ best, k, V) <= expected_squared_error(phi_long @ pinv, k, V) + 1e-12


def test_jittered_frequencies_stay_in_their_cells_and_differ_by_seed():
    cfg = LinearRunConfig(dim=16, rope_base=100.0, frequency_jitter=0.5)
    plain = cfg.with_(frequency_jitter=0.0).frequency_set()
    a, b = cfg.with_(seed=0).frequency_set(), cfg.with_(seed=1).frequency_set()
    step = 100.0 ** (-2 * 0.5 / 16)
    assert torch.all(a <= plain) and torch.all(a > plain * step)
    assert not torch.allclose(a, b)
    assert torch.equal(a, cfg.with_(seed=0).frequency_set())


def test_normalized_heads_output_distributions():
    import pytest

    from lengthgen.model.heads import kernel_weights

    for weight_map in ("squared", "exp"):
        cfg = LinearRunConfig(dim=8, vocab=5, train_length=10, offset=2, weight_map=weight_map, random_init=True,
                              init_std=0.5)
        model = cfg.build_model()
        out = model(sample_tokens(3, 10, 5, generator(0, "x")))
        assert torch.allclose(out.sum(-1), torch.ones(3, 8, dtype=D64))
    with pytest.raises(ValueError, match="weight_map"):
        kernel_weights(torch.zeros(2), "cube")


def test_crossing_length_interpolates_in_log_length():
    from lengthgen.chapters.linear_control.law import crossing_length

    assert crossing_length([16, 32, 64], [1.0, 0.9, 0.8]) == math.inf
    assert crossing_length([16, 32, 64], [0.4, 0.3, 0.2]) == 16.0
    # halfway between 0.6 and 0.4 in accuracy is halfway between 32 and 64 in log length
    assert abs(crossing_length([16, 32, 64], [1.0, 0.6, 0.4]) - 32 * math.sqrt(2)) < 1e-9


def test_surrogate_kernel_keeps_the_training_offsets_and_the_far_energy():
    from lengthgen.chapters.linear_control.law import far_moment, surrogate_kernel

    f_train = torch.tensor([0.0, 0.0, 1.0, 0.0], dtype=D64)
    amplitudes = torch.tensor([0.3, 0.2, 0.1], dtype=D64)
    freqs = torch.tensor([0.9, 0.37, 0.051], dtype=D64)
    kernel = surrogate_kernel(f_train, amplitudes, freqs, 200_004, generator(0, "phases"))
    assert torch.equal(kernel[:4], f_train)
    assert abs(float((kernel[4:] ** 2).mean()) / far_moment(amplitudes, "linear") - 1) < 0.01


def test_family_bound_caps_every_kernel_of_the_family():
    """f(k)^2 <= d x (far energy per offset) for any q with the unit key, so no kernel beats the bound's noise."""
    from lengthgen.chapters.linear_control import family_bound
    from lengthgen.chapters.linear_control.law import far_moment, plane_amplitudes

    d, k = 16, 3
    key = unit_key(d, 4)
    freqs = full_band_frequencies(d, 16.0)
    phi_k = offset_features(torch.tensor([k]), freqs, key)[0]
    for seed in range(20):
        q = torch.randn(d, generator=generator(seed, "q"), dtype=D64)
        assert float(phi_k @ q) ** 2 <= d * far_moment(plane_amplitudes(q, key, freqs), "linear") + 1e-12
    assert family_bound(16, 16, d, 8) == 1.0  # no far offsets, no noise
    assert family_bound(16, 1024, 64, 64) < family_bound(16, 256, 64, 64) < 1.0


def test_per_run_refuses_missing_or_repeated_runs():
    import pandas as pd
    import pytest

    from lengthgen.chapters.linear_control import per_run

    frame = pd.DataFrame(dict(offset=[5, 5], seed=[0, 1], value=[0.1, 0.2]))
    assert per_run(frame, 2) is frame
    with pytest.raises(AssertionError, match="expected one row for each of 3 runs"):
        per_run(frame, 3)
    with pytest.raises(AssertionError):
        per_run(pd.DataFrame(dict(offset=[5, 5], seed=[0, 0], value=[0.1, 0.2])), 2)


def test_replicate_distance_compares_kernels_beyond_T():
    import pandas as pd

    from lengthgen.chapters.linear_control import replicate_distance

    rows = []
    for seed, far in ((0, [1.0, 1.0]), (1, [1.0, 2.0])):
        for D, f in enumerate([0.0, 1.0, *far]):
            rows.append(dict(offset=1, seed=seed, model="linear (SGD from zero)", offset_D=D, f=f))
    kernels = pd.DataFrame(rows)
    assert abs(replicate_distance(kernels, 2) - 1 / math.sqrt(5)) < 1e-12
    assert replicate_distance(kernels[kernels.seed == 0], 2) == math.inf
