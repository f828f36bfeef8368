"""The plane decomposition of a rotary kernel, and what it predicts: shared by chapters 1, 3, 4 and 6.

A rotary head's logit at offset ``D`` is a sum of one cosine per rotary plane ``m``:

    f(D) = <q, R_{-D} k> / sqrt(d) = sum_m a_m cos(theta_m D + phi_m),

with amplitude ``a_m = |q_m| |k_m| / sqrt(d)`` and phase ``phi_m = arg q_m - arg k_m`` (``q_m``,
``k_m``: the plane's two coordinates read as a complex number). Equivalently ``f(D) = psi(D) . c``
with the features ``psi(D) = [cos(theta D), sin(theta D)]`` and coefficients
``c = [a cos(phi), -a sin(phi)]``. On these features the module also solves the alternatives a
trained head could have selected (:func:`hard_margin_kernel`, :func:`group_margin_kernel`,
:func:`min_norm_interpolant`, :func:`projected_kernel`) and predicts, from amplitudes alone, how far beyond the training
range an offset first out-scores the target (:func:`random_phase_tail`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import minimize

from ..model.encodings import plane_index
from ..model.heads import RopeHead


@dataclass(frozen=True)
class Planes:
    """A rotary head's kernel in plane coordinates: ``f(D) = sum_m amplitude_m cos(freq_m D + phase_m)``."""

    freqs: np.ndarray
    amplitude: np.ndarray
    phase: np.ndarray

    def profile(self, offsets: np.ndarray) -> np.ndarray:
        """``f`` at the given offsets (float64)."""
        return plane_sum(self.amplitude, self.phase, self.freqs, offsets)


def plane_sum(amplitude: np.ndarray, phase: np.ndarray, freqs: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``sum_m amplitude_m cos(freqs_m D + phase_m)`` for every ``D`` in ``offsets``."""
    offsets = np.asarray(offsets, dtype=np.float64)
    return (amplitude[:, None] * np.cos(freqs[:, None] * offsets[None, :] + phase[:, None])).sum(0)


def planes_from_vectors(q: torch.Tensor, k: torch.Tensor, freqs: torch.Tensor, convention: str = "half") -> Planes:
    """Planes of the kernel ``<q, R_{-D} k> / sqrt(d)`` of a query vector and a key vector (float64)."""
    first, second = plane_index(q.shape[-1], convention)
    q, k = q.detach().double(), k.detach().double()
    zq, zk = torch.complex(q[first], q[second]), torch.complex(k[first], k[second])
    amplitude = (zq.abs() * zk.abs() / math.sqrt(q.shape[-1])).numpy()
    phase = (torch.angle(zq) - torch.angle(zk)).numpy()
    return Planes(freqs.double().numpy(), amplitude, wrap(phase))


def planes_of(head: RopeHead) -> Planes:
    """Amplitude and phase of every rotary plane of a trained single head (float64)."""
    return planes_from_vectors(head.q.cpu(), head.k.cpu(), head.freqs.cpu(), head.convention)


def wrap(angle: np.ndarray) -> np.ndarray:
    """Angles wrapped to ``(-pi, pi]``."""
    return np.angle(np.exp(1j * np.asarray(angle)))


def plane_features(freqs: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``psi(D) = [cos(theta_m D), sin(theta_m D)]`` for every offset, shape ``(len(offsets), 2 * planes)``."""
    angles = np.asarray(offsets, dtype=np.float64)[:, None] * np.asarray(freqs)[None, :]
    return np.concatenate([np.cos(angles), np.sin(angles)], axis=1)


def coefficients(planes: Planes) -> np.ndarray:
    """``c`` with ``f(D) = psi(D) . c``: ``[a cos(phi), -a sin(phi)]``."""
    return np.concatenate([planes.amplitude * np.cos(planes.phase), -planes.amplitude * np.sin(planes.phase)])


def planes_from_coefficients(freqs: np.ndarray, c: np.ndarray) -> Planes:
    """The planes of the kernel ``psi(D) . c``."""
    half = len(freqs)
    a, b = c[:half], c[half:]
    return Planes(np.asarray(freqs, dtype=np.float64), np.hypot(a, b), wrap(np.arctan2(-b, a)))


def margin_rows(freqs: np.ndarray, offset: int, train_length: int) -> np.ndarray:
    """``g_D = psi(k) - psi(D)`` for every training offset ``D != k``: a kernel separates the target by ``g_D . c``."""
    psi = plane_features(freqs, np.arange(train_length))
    return psi[offset][None, :] - np.delete(psi, offset, axis=0)


def projected_kernel(g: np.ndarray, start: np.ndarray, margin: float = 1.0) -> np.ndarray:
    """``argmin |c - start|^2`` subject to ``g c >= margin``: the kernel nearest to ``start`` that separates the target
    by ``margin`` on every training offset, through the dual (box-constrained, smooth): ``c = start + g^T alpha``."""
    gram = g @ g.T
    slack = margin - g @ start
    result = minimize(lambda a: 0.5 * a @ gram @ a - a @ slack, np.full(len(gram), 1e-3), jac=lambda a: gram @ a - slack,
                      bounds=[(0, None)] * len(gram), method="L-BFGS-B",
                      options=dict(ftol=1e-15, gtol=1e-12, maxiter=100_000))
    return start + g.T @ result.x


def hard_margin_kernel(g: np.ndarray) -> np.ndarray:
    """``argmin |c|^2`` subject to ``g c >= 1``: the l2 max-margin kernel (the projection of zero)."""
    return projected_kernel(g, np.zeros(g.shape[1]))


def group_margin_kernel(g: np.ndarray, smoothing: float = 1e-12) -> np.ndarray:
    """``argmin sum_m |(A_m, B_m)|`` subject to ``g c >= 1``: the max-margin kernel in the l1 norm of plane amplitudes.

    A head parametrized by ``q`` and ``k`` pays ``|q_m|^2 + |k_m|^2 >= 2 sqrt(d) a_m`` for amplitude ``a_m``, so its
    balanced parameter norm is this sum of amplitudes; gradient descent on the bilinear head is biased towards it,
    as on an l2 norm of ``c`` for a head linear in ``c``.
    """
    half = g.shape[1] // 2

    def objective(c: np.ndarray) -> float:
        return float(np.sqrt(c[:half] ** 2 + c[half:] ** 2 + smoothing).sum())

    def gradient(c: np.ndarray) -> np.ndarray:
        r = np.sqrt(c[:half] ** 2 + c[half:] ** 2 + smoothing)
        return np.concatenate([c[:half] / r, c[half:] / r])

    result = minimize(objective, hard_margin_kernel(g), jac=gradient, method="SLSQP",
                      constraints=[dict(type="ineq", fun=lambda c: g @ c - 1, jac=lambda c: g)],
                      options=dict(maxiter=5000, ftol=1e-13))
    return result.x


MIN_NORM_RCOND = 1e-6  # feature directions the training offsets see less than this (relative) count as invisible


def min_norm_interpolant(freqs: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The smallest ``c`` whose kernel takes ``values`` on the offsets ``0 .. len(values) - 1`` (least squares if none).

    Directions of the features that the offsets see with a singular value below ``MIN_NORM_RCOND`` of the largest are
    treated as invisible: the data barely constrain them, and copying them would pass off unconstrained behaviour
    beyond the training range as extrapolation.
    """
    return np.linalg.pinv(plane_features(freqs, np.arange(len(values))), rcond=MIN_NORM_RCOND) @ values


def amplitude_norm(c: np.ndarray) -> float:
    """``sum_m |(A_m, B_m)|``: the sum of plane amplitudes of the kernel ``psi . c``."""
    half = len(c) // 2
    return float(np.hypot(c[:half], c[half:]).sum())


def random_phase_tail(amplitudes: np.ndarray, level: float, bins: int = 8192) -> float:
    """``P(sum_m a_m cos U_m > level)`` for independent uniform phases ``U_m``.

    The density of ``a cos U`` is the arcsine law on ``[-a, a]``; each plane's exact mass per bin is convolved in turn
    (directly, all terms positive, so tiny tail probabilities keep their relative precision).
    """
    total = float(np.sum(amplitudes))
    if level >= total:
        return 0.0
    step = 2 * total / bins
    distribution = np.array([1.0])  # mass of the sum so far, on bins of width ``step`` starting at ``low``
    low = 0.0
    for a in np.asarray(amplitudes, dtype=np.float64):
        n = max(1, math.ceil(2 * a / step))
        edges = np.clip(-a + step * np.arange(n + 1), -a, a)
        mass = np.diff(np.arcsin(edges / a) if a > 0 else np.r_[0.0, np.pi]) / np.pi
        distribution = np.convolve(distribution, mass)
        low -= a
    centres = low + step * (np.arange(len(distribution)) + 0.5)
    return float(distribution[centres > level].sum())


def predicted_first_hijack(planes: Planes, target_logit: float, train_length: int) -> float:
    """The length at which, if every plane's phase beyond the training range were a fresh uniform draw (Weyl:
    incommensurate frequencies equidistribute), one far offset is expected to out-score the target:
    ``T + 1 / P(sum_m a_m cos U_m > f(k))``. Infinite when no phase configuration can."""
    tail = random_phase_tail(planes.amplitude, target_logit)
    return math.inf if tail <= 0 else train_length + 1 / tail
