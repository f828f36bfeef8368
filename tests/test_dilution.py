import subprocess
import sys

import numpy as np
import pytest
import torch

from lengthgen.analysis.kernels import offset_profile
from lengthgen.analysis.planes import Planes, planes_of
from lengthgen.chapters.dilution_law import (
    delays,
    half_length,
    judged_log2_error,
    log2_error,
    observed_last_accuracy,
    target_mass,
    toeplitz_attention,
)
from lengthgen.chapters.dilution_law.law import (
    in_range_moments,
    law_masses,
    logit_scale,
    mass_per_token,
    monte_carlo_accuracy,
    multinomial_counts,
    quenched_log_sum,
    scaled,
    snr_accuracy,
)
from lengthgen.chapters.equivariance import offset_attention
from lengthgen.model.heads import HeadRunConfig
from lengthgen.model.seeding import generator


def sharp_head(dim=16, vocab=8):
    return HeadRunConfig(kind="rope", dim=dim, vocab=vocab, qk_init_std=1.5).build_model()


def test_toeplitz_attention_equals_direct_attention_for_every_query():
    head = sharp_head()
    length = 150
    row = offset_profile(head, length)
    queries = torch.arange(length)
    direct = head.double().attention(length, queries)
    assert torch.allclose(toeplitz_attention(row, length, queries), direct, atol=1e-12)


def test_observed_last_accuracy_equals_the_heads_forward_pass():
    head = sharp_head()
    length, batch, k = 300, 200, 3
    row = offset_profile(head, length)
    readout = head.readout_matrix().detach().double()
    got = observed_last_accuracy(row, readout, k, length, batch, generator(0, "t"))
    tokens = torch.randint(0, head.vocab, (batch, length), generator=generator(0, "t"))
    with torch.no_grad():
        pred = head.double().query_logits(tokens, torch.tensor([length - 1]))[:, 0].argmax(-1)
    assert got == (pred == tokens[:, length - 1 - k]).double().mean().item()
    # chunking does not change the draws' outcome distribution, only memory; a small chunk still works
    assert 0 <= observed_last_accuracy(row, readout, k, length, batch, generator(0, "t"), chunk_tokens=1000) <= 1


def test_target_mass_matches_attention_and_laws_limits():
    head = sharp_head()
    row = offset_profile(head, 4000)
    lengths = [32, 100, 1000, 4000]
    mass = target_mass(row, 3, lengths)
    for n, p in zip(lengths, mass, strict=True):
        assert p == pytest.approx(float(offset_attention(head, n)[3]), rel=1e-10)
    # with every plane kept exact (no plane turns 1e12 circles) the two-scale law is the exact sum
    exact = law_masses(planes_of(head), 3, 32, lengths, turns=1e12)
    assert np.allclose(exact, mass, rtol=1e-9)
    # the pure dilution law differs from the exact sum: it replaces the far logits by their Weyl average
    weyl = law_masses(planes_of(head), 3, 32, lengths, turns=None)
    assert weyl[0] == pytest.approx(mass[0], rel=1e-9)  # nothing beyond T at L = T
    assert not np.allclose(weyl, mass, rtol=1e-3)


def test_two_scale_law_averages_fast_planes_with_bessel_factor():
    # one fast plane with amplitude a: far mean of e^{a cos} -> I0(a)
    from lengthgen.analysis.planes import Planes

    planes = Planes(np.array([1.0]), np.array([1.5]), np.array([0.2]))
    row = torch.tensor(planes.profile(np.arange(200_000)))
    law = law_masses(planes, 0, 32, [200_000], turns=1.0)
    assert law[0] == pytest.approx(target_mass(row, 0, [200_000])[0], rel=1e-3)
    # a single plane with no in-range structure: p(L) = e^{f(0)} / (Z_T + (L - T) I0(a)) by hand
    from scipy.special import i0

    near = planes.profile(np.arange(32))
    by_hand = np.exp(near[0]) / (np.exp(near).sum() + (200_000 - 32) * i0(1.5))
    assert law[0] == pytest.approx(by_hand, rel=1e-12)


def test_half_length_interpolates_on_log_length_and_is_censored():
    lengths = [64, 128, 256, 512]
    assert half_length(lengths, np.array([1.0, 0.9, 0.8, 0.7])) == np.inf
    assert half_length(lengths, np.array([0.4, 0.3, 0.2, 0.1])) == 64
    # 0.75 at 128, 0.25 at 256: the half point is half way in log2 length
    assert half_length(lengths, np.array([1.0, 0.75, 0.25, 0.0])) == pytest.approx(2**7.5)


def test_log2_error_with_censoring():
    assert log2_error(200.0, 100.0, 1000) == pytest.approx(1.0)
    assert log2_error(50.0, 100.0, 1000) == pytest.approx(1.0)
    # never observed within the horizon: a prediction beyond the horizon is right, one inside it is off by the gap
    assert log2_error(5000.0, np.inf, 1000) == 0.0
    assert log2_error(250.0, np.inf, 1000) == pytest.approx(2.0)
    # predicted never, observed at 250 of a 1000 horizon: at least two octaves off
    assert log2_error(np.inf, 250.0, 1000) == pytest.approx(2.0)


def test_multinomial_counts():
    counts = multinomial_counts(500, 7, 4000, generator(0, "m"))
    assert torch.all(counts.sum(1) == 500)
    assert torch.allclose(counts.mean(0), torch.full((7,), 500 / 7, dtype=torch.float64), rtol=0.02)


def test_mass_per_token():
    tokens = torch.tensor([[0, 1, 1], [2, 2, 2]])
    mass = mass_per_token(torch.tensor([0.5, 0.3, 0.2]), tokens, 3)
    assert torch.allclose(mass, torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]))


def test_predictions_in_the_extremes_and_in_the_middle():
    vocab, k, length = 8, 2, 400
    readout = torch.eye(vocab, dtype=torch.float64)
    certain = torch.zeros(length, dtype=torch.float64)
    certain[k] = 60.0
    assert monte_carlo_accuracy(certain, readout, k, length, 2000, generator(0, "a"), 16) == 1.0
    assert snr_accuracy(certain, readout, k, length) == pytest.approx(1.0)
    # a partly diluted target: Monte Carlo (heavy weights exact, light tail by two moments) vs observed
    middle = torch.zeros(length, dtype=torch.float64)
    middle[k] = np.log(4.0)
    middle[:40] += torch.linspace(1.0, 0.0, 40, dtype=torch.float64)
    observed = observed_last_accuracy(middle, readout, k, length, 20_000, generator(1, "o"))
    predicted = monte_carlo_accuracy(middle, readout, k, length, 20_000, generator(2, "p"), 32)
    assert 0.2 < observed < 0.95
    assert abs(observed - predicted) < 0.02  # ~4 standard errors of the difference
    assert 0 < snr_accuracy(middle, readout, k, length) < 1


def test_long_length_evaluation_is_memory_frugal():
    """Observed accuracy at L = 131072 (the chapter's longest length) stays far below 2 GB."""
    code = """
import resource, torch
from lengthgen.chapters.dilution_law import observed_last_accuracy
from lengthgen.model.seeding import generator
row = torch.zeros(131072, dtype=torch.float64)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
observed_last_accuracy(row, torch.eye(64, dtype=torch.float64), 5, 131072, 256, generator(0, "m"))
print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    before_kb, peak_kb = map(int, out)
    assert peak_kb < 2 * 1024 * 1024, f"peak RSS {peak_kb / 1024:.0f} MB"
    assert peak_kb - before_kb < 512 * 1024, f"evaluation added {(peak_kb - before_kb) / 1024:.0f} MB"


def test_decay_onsets_find_the_last_saturated_length_before_the_collapse():
    import pandas as pd

    from lengthgen.chapters.dilution_law import decay_onsets

    curves = pd.DataFrame(dict(base=1e4, offset=3, seed=0, length=[32, 64, 128, 256, 512],
                               observed=[1.0, 1.0, 0.995, 0.6, 0.1], mass=[0.5, 0.4, 0.2, 0.05, 0.01]))
    per_run = pd.DataFrame(dict(base=[1e4, 1e4], offset=[3, 3], seed=[0, 1], half_observed=[300.0, np.inf]))
    onsets = decay_onsets(curves, per_run)
    assert len(onsets) == 1  # the run that never collapses has no onset
    assert onsets.onset.iloc[0] == 128 and onsets.mass_at_onset.iloc[0] == 0.2
    assert onsets.width.iloc[0] == pytest.approx(300 / 128)


def test_the_typical_far_sum_is_the_random_energy_models():
    """Annealed while the draws reach the dominant energies, carried by the largest draw beyond; never above the mean.

    The formula is leading-order (no Bahadur-Rao prefactor): it may overestimate the typical sum a little, never by a
    large share, and does not underestimate it."""
    rng = np.random.default_rng(0)
    a = np.full(8, 1.5)
    for count, beta in ((200, 1.0), (200, 2.0), (20_000, 1.0)):
        typical = quenched_log_sum(a, count, beta)
        annealed = np.log(count) + np.log(np.i0(beta * a)).sum()
        assert typical <= annealed + 1e-9
        draws = (a * np.cos(rng.uniform(0, 2 * np.pi, (400, count, len(a))))).sum(-1)
        simulated = np.median(np.log(np.exp(beta * draws).sum(1)))
        assert simulated - 0.5 <= typical <= simulated + 0.15 * abs(simulated) + 0.5
    assert quenched_log_sum(np.full(4, 0.01), 10**6, 1.0) == pytest.approx(np.log(10**6) + 4 * np.log(np.i0(0.01)))
    assert quenched_log_sum(np.array([]), 7, 2.0) == pytest.approx(np.log(7))
    assert quenched_log_sum(a, 0, 1.0) == -np.inf


def test_the_in_range_law_reads_no_logit_beyond_the_training_length():
    """Two kernels whose slow plane agrees at T - 1 and nowhere else beyond T get the same far moments."""
    T, theta = 32, 1e-4
    freqs = np.array([theta, 2.0])
    edge = lambda a, phi: a * np.cos(theta * (T - 1) + phi)  # noqa: E731
    a2, phi1 = 2.0, 0.3
    phi2 = np.arccos(edge(1.0, phi1) / a2) - theta * (T - 1)
    one = Planes(freqs, np.array([1.0, 0.7]), np.array([phi1, 0.1]))
    two = Planes(freqs, np.array([a2, 0.7]), np.array([phi2, 0.1]))
    assert edge(a2, phi2) == pytest.approx(edge(1.0, phi1))
    assert not np.allclose(one.profile(np.arange(T, 4000)), two.profile(np.arange(T, 4000)))
    for length in (64, 1024, 4096):
        shift = 0.5
        assert in_range_moments(one, T, length, 2.0, shift) == pytest.approx(in_range_moments(two, T, length, 2.0, shift))
    assert in_range_moments(one, T, T, 2.0, 0.0) == (0.0, 0.0)


def test_logit_scaling_and_the_delays_it_is_judged_by():
    assert logit_scale(16, 32) == 1.0 and logit_scale(32, 32) == 1.0
    assert logit_scale(1024, 32) == pytest.approx(2.0)
    assert scaled(Planes(np.ones(2), np.array([1.0, 2.0]), np.zeros(2)), 3.0).amplitude.tolist() == [3.0, 6.0]
    horizon = 4096
    d = delays(True, 100.0, 400.0, 50.0, 200.0, horizon)  # observed two doublings, predicted two
    assert d["delay_observed"] == pytest.approx(2.0) and d["delay_in_range"] == pytest.approx(2.0)
    assert d["delay_error"] == pytest.approx(0.0) and d["delay_censored"] == 0.0
    assert d["delay_zero_error"] == pytest.approx(2.0)  # "no delay" misses by two doublings
    d = delays(True, 100.0, np.inf, 50.0, 100.0, horizon)  # censored: at least 5.36 doublings observed, one predicted
    assert d["delay_error"] == pytest.approx(np.log2(horizon / 200.0)) and d["delay_censored"] == 1.0
    assert np.isnan(delays(True, 100.0, np.inf, 50.0, np.inf, horizon)["delay_error"])  # both beyond: undetermined
    assert np.isnan(delays(True, 3000.0, np.inf, 50.0, 60.0, horizon)["delay_error"])  # bound under a doubling
    assert np.isnan(delays(True, np.inf, np.inf, 50.0, 80.0, horizon)["delay_error"])  # no collapse: nothing to delay
    assert np.isnan(delays(False, 100.0, 400.0, 50.0, 200.0, horizon)["delay_error"])  # not learned: not judged
    assert delays(True, 100.0, 300.0, np.inf, np.inf, horizon)["delay_error"] == np.inf  # law has no collapse: a miss


def test_an_error_beyond_the_horizon_is_judged_only_where_its_bound_decides():
    horizon = 1024
    assert judged_log2_error(100.0, 400.0, horizon) == pytest.approx(2.0)
    assert np.isnan(judged_log2_error(np.inf, np.inf, horizon))
    assert np.isnan(judged_log2_error(np.inf, 800.0, horizon))  # at least 0.36 doublings: undetermined
    assert judged_log2_error(np.inf, 100.0, horizon) == pytest.approx(np.log2(10.24))  # at least 3.4: a miss
    assert judged_log2_error(100.0, np.inf, horizon) == pytest.approx(np.log2(10.24))
