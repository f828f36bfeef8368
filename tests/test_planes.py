"""The plane decomposition and the alternatives and predictions built on it (chapters 1, 3, 4)."""

import math

import numpy as np
import pytest
import torch

from lengthgen.analysis.planes import (
    Planes,
    coefficients,
    group_margin_kernel,
    hard_margin_kernel,
    margin_rows,
    min_norm_interpolant,
    plane_features,
    planes_from_coefficients,
    planes_of,
    predicted_first_hijack,
    random_phase_tail,
)
from lengthgen.model.heads import HeadRunConfig


def test_coefficients_and_planes_are_two_views_of_one_kernel():
    head = HeadRunConfig(kind="rope", dim=16, vocab=8, qk_init_std=1.0).build_model()
    planes = planes_of(head)
    offsets = np.arange(50)
    c = coefficients(planes)
    assert np.allclose(plane_features(planes.freqs, offsets) @ c, planes.profile(offsets), atol=1e-12)
    back = planes_from_coefficients(planes.freqs, c)
    assert np.allclose(back.profile(offsets), planes.profile(offsets), atol=1e-12)


def test_hard_margin_kernel_on_a_hand_solvable_problem():
    # two constraints g1 = (1, 0), g2 = (0, 2): min |c|^2 s.t. c1 >= 1, 2 c2 >= 1 -> c = (1, 1/2)
    g = np.array([[1.0, 0.0], [0.0, 2.0]])
    assert np.allclose(hard_margin_kernel(g), [1.0, 0.5], atol=1e-6)
    # a redundant constraint (3, 0) is inactive and changes nothing
    assert np.allclose(hard_margin_kernel(np.vstack([g, [3.0, 0.0]])), [1.0, 0.5], atol=1e-6)


def test_margin_kernels_separate_the_target_on_real_rows():
    freqs = 10000.0 ** (-np.arange(4) / 4)
    g = margin_rows(freqs, offset=3, train_length=12)
    assert g.shape == (11, 8)
    for c in (hard_margin_kernel(g), group_margin_kernel(g)):
        assert (g @ c).min() >= 1 - 1e-5
    # the group-norm solution has no larger summed amplitude than the l2 solution, and vice versa for |c|
    l2, group = hard_margin_kernel(g), group_margin_kernel(g)
    amplitude = lambda c: np.hypot(c[:4], c[4:]).sum()  # noqa: E731
    assert amplitude(group) <= amplitude(l2) + 1e-6
    assert np.linalg.norm(l2) <= np.linalg.norm(group) + 1e-6


def test_min_norm_interpolant_interpolates_when_it_can():
    freqs = np.linspace(0.3, 3.0, 8)  # well-separated frequencies: 15 independent features on 10 offsets
    values = np.sin(np.arange(10) * 0.3)
    c = min_norm_interpolant(freqs, values)
    assert np.allclose(plane_features(freqs, np.arange(10)) @ c, values, atol=1e-8)
    # and it is the smallest such: adding any null-space direction only grows the norm
    null = np.linalg.svd(plane_features(freqs, np.arange(10)))[2][-1]
    assert np.linalg.norm(c) < np.linalg.norm(c + 0.1 * null)


def test_random_phase_tail_single_plane_is_the_arcsine_law():
    # P(a cos U > x) = arccos(x / a) / pi
    for level in (-1.2, 0.0, 0.7, 1.9):
        assert random_phase_tail(np.array([2.0]), level, bins=1 << 14) == pytest.approx(
            math.acos(level / 2.0) / math.pi, abs=2e-4)
    assert random_phase_tail(np.array([2.0]), 2.0) == 0.0


def test_random_phase_tail_matches_sampling_for_several_planes():
    rng = np.random.default_rng(0)
    a = np.array([1.0, 0.6, 0.3, 0.3, 0.1])
    samples = (a[None, :] * np.cos(rng.uniform(0, 2 * np.pi, (400_000, len(a))))).sum(1)
    for level in (0.5, 1.2, 1.8):
        expected = (samples > level).mean()
        assert random_phase_tail(a, level) == pytest.approx(expected, abs=4 * math.sqrt(expected / 400_000) + 1e-4)


def test_predicted_first_hijack():
    planes = Planes(np.array([1.0, 0.1]), np.array([1.0, 1.0]), np.zeros(2))
    assert predicted_first_hijack(planes, 2.5, 64) == math.inf  # no phases can reach 2.5 > a1 + a2
    tail = random_phase_tail(planes.amplitude, 1.5)
    assert predicted_first_hijack(planes, 1.5, 64) == pytest.approx(64 + 1 / tail)
    assert torch.is_tensor(torch.tensor(tail))


def test_projected_kernel_is_the_nearest_feasible_point():
    from lengthgen.analysis.planes import projected_kernel

    g = np.array([[1.0, 0.0], [0.0, 1.0]])
    # from (3, -2) with margin 1: the first constraint is slack, the second binds -> (3, 1)
    assert np.allclose(projected_kernel(g, np.array([3.0, -2.0]), 1.0), [3.0, 1.0], atol=1e-6)
    # a feasible start is its own projection
    assert np.allclose(projected_kernel(g, np.array([2.0, 5.0]), 1.0), [2.0, 5.0], atol=1e-9)


def test_feasible_kernels_fit_the_task_with_the_heads_margin():
    from lengthgen.analysis.carrier import carrier_r2
    from lengthgen.chapters.carrier import feasible_kernels

    freqs = 10000.0 ** (-np.arange(8) / 8)
    g = margin_rows(freqs, offset=3, train_length=16)
    c_head = hard_margin_kernel(g) * 2.0  # margin 2
    kernels = feasible_kernels(g, c_head, 5, np.random.default_rng(0))
    for c in kernels:
        assert (g @ c).min() >= 2.0 - 1e-5
    # the l2 max-margin kernel of a short window is the carrier of its own amplitudes, up to the slow planes
    assert carrier_r2(c_head, freqs, 3, 16) > np.mean([carrier_r2(c, freqs, 3, 16) for c in kernels])
