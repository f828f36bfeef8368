"""The carrier: one cosine per rotary plane, all in phase at the target offset (chapters 3 and 6 measure how close a
learned kernel is to it, and how coherent its planes' phases are)."""

from __future__ import annotations

import numpy as np

from .planes import plane_sum, planes_from_coefficients, wrap

FEASIBLE_QUANTILE = 0.95  # the learned head must beat this quantile of them


def carrier_phases(freqs: np.ndarray, offset: int) -> np.ndarray:
    """The carrier's phases ``-theta_m k``: every plane's cosine peaks at ``D = k``."""
    return wrap(-freqs * offset)


def coherence(weights: np.ndarray, errors: np.ndarray) -> float:
    """Weighted resultant length ``|sum w e^{i err}| / sum w``: 1 when every error is zero, ~0 when random."""
    return float(np.abs((weights * np.exp(1j * errors)).sum()) / weights.sum())


def null_coherence(weights: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """Coherence of ``draws`` random-phase kernels with the same amplitudes: the null distribution."""
    phases = rng.uniform(-np.pi, np.pi, size=(draws, len(weights)))
    return np.abs((weights[None, :] * np.exp(1j * phases)).sum(1)) / weights.sum()


def explained_variance(f: np.ndarray, model: np.ndarray) -> float:
    """Share of the variance of ``f`` explained by ``model`` up to an additive constant (softmax ignores it)."""
    residual = (f - model) - (f - model).mean()
    centred = f - f.mean()
    return float(1.0 - residual @ residual / (centred @ centred))


def carrier_r2(c: np.ndarray, freqs: np.ndarray, offset: int, train_length: int) -> float:
    """Variance share of the kernel ``psi . c`` on the training offsets explained by its own aligned carrier."""
    planes = planes_from_coefficients(freqs, c)
    offsets = np.arange(train_length)
    carrier = plane_sum(planes.amplitude, carrier_phases(freqs, offset), freqs, offsets)
    return explained_variance(planes.profile(offsets), carrier)
