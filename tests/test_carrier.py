import numpy as np
import pytest
import torch

from lengthgen.analysis.carrier import carrier_phases, coherence, explained_variance, null_coherence
from lengthgen.analysis.planes import Planes, plane_sum, planes_of, wrap
from lengthgen.chapters.carrier import (
    matched_filter_phases,
    offset_logit_matrix,
    position_features,
    rank_for_energy,
    singular_values,
    training_contrast,
    weighted_circular_error,
)
from lengthgen.model.encodings import rope_frequencies
from lengthgen.model.heads import HeadRunConfig


@pytest.mark.parametrize("convention", ["half", "interleaved"])
def test_planes_reproduce_the_heads_offset_logits(convention):
    head = HeadRunConfig(kind="rope", dim=16, vocab=4, rope_convention=convention, qk_init_std=1.0).build_model()
    planes = planes_of(head)
    offsets = torch.arange(-40, 300)
    with torch.no_grad():
        direct = head.double().offset_logits(offsets).numpy()
    assert np.allclose(planes.profile(offsets.numpy()), direct, atol=1e-12)
    assert (planes.amplitude >= 0).all() and (np.abs(planes.phase) <= np.pi).all()


def test_carrier_peaks_at_target_and_matches_its_phases():
    freqs = rope_frequencies(64).numpy()
    amplitude = np.ones(32)
    for k in (1, 3, 9, 20):
        f = plane_sum(amplitude, carrier_phases(freqs, k), freqs, np.arange(32))
        assert f.argmax() == k
        assert np.isclose(f[k], amplitude.sum())


def test_phase_statistics():
    w = np.array([1.0, 2.0, 3.0])
    assert coherence(w, np.zeros(3)) == pytest.approx(1.0)
    assert coherence(w, np.array([0.0, np.pi, 0.0])) == pytest.approx(2 / 6)
    assert weighted_circular_error(w, np.array([0.1, -0.2, 2 * np.pi])) == pytest.approx((0.1 + 0.4 + 0) / 6, abs=1e-12)
    null = null_coherence(np.ones(50), 2000, np.random.default_rng(0))
    assert 0.05 < null.mean() < 0.2  # ~ sqrt(pi / (4 n)) for n equal weights
    assert np.allclose(wrap(np.array([3 * np.pi, -3 * np.pi / 2])), [np.pi, np.pi / 2])


def test_explained_variance_ignores_constants():
    f = np.sin(np.arange(20.0))
    assert explained_variance(f, f + 7.0) == pytest.approx(1.0)
    assert explained_variance(f, np.zeros(20)) == pytest.approx(0.0)
    assert explained_variance(f, -f) == pytest.approx(-3.0)


def test_training_contrast_is_balanced_and_matched_filter_limits():
    c = training_contrast(3, 32)
    assert c.sum() == pytest.approx(0.0, abs=1e-12)
    assert c.argmax() == 3
    # a plane that is exactly one DFT bin sees no uniform part: the filter is the carrier
    freqs = np.array([2 * np.pi * 4 / 32])
    # a very slow plane sees a ramp: phase turned by +pi/2 from the carrier (most distractors beyond k=3)
    slow = np.array([1e-5])
    assert wrap(matched_filter_phases(slow, 3, 32) - carrier_phases(slow, 3))[0] == pytest.approx(np.pi / 2, abs=1e-3)
    assert np.isfinite(matched_filter_phases(freqs, 3, 32)).all()


def test_spectra_and_rank():
    assert rank_for_energy(np.array([1.0, 0.1, 0.01]), 0.99) == 1
    assert rank_for_energy(np.array([1.0, 1.0, 1.0, 1.0]), 0.99) == 4
    freqs = rope_frequencies(64).numpy()
    features = position_features(freqs, 32)
    assert features.shape == (32, 64)
    sv = singular_values(features)
    assert sv[0] == 1.0 and (np.diff(sv) <= 1e-12).all()
    planes = Planes(freqs, np.ones(32), np.zeros(32))
    matrix = offset_logit_matrix(planes, 32)
    assert np.allclose(matrix, matrix.T)  # zero phases: f is even
    assert np.linalg.matrix_rank(matrix, tol=1e-8) <= np.linalg.matrix_rank(features, tol=1e-8)
