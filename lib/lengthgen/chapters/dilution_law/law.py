"""Chapter 4's dilution law: the target's softmax mass and the last query's accuracy beyond T, predicted from the
planes and the readout measured at T (in closed form and by Monte Carlo)."""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.optimize import brentq
from scipy.special import i0, i0e, i1e
from scipy.stats import norm

from ...analysis.planes import Planes, plane_sum

MAX_LOG = 700.0  # largest log weight exponentiated (float64 overflows past about 709)


def far_moments(planes: Planes, train_length: int, length: int, turns: float | None, shift: float) -> tuple[float, float]:
    """``M1 = sum_{T<=D<L} e^{f(D) - shift}`` and ``M2 = sum e^{2 (f(D) - shift)}`` under a law, from the planes alone.

    Planes that turn at least ``turns`` full circles over ``[T, L)`` are equidistributed there: their factor averages
    to ``I_0(a)`` in ``M1`` and ``I_0(2 a)`` in ``M2``. The others (slow planes) are carried by their phase and
    frequency. ``turns=None`` treats every plane as equidistributed: the pure dilution (Weyl) law.
    """
    count = max(length - train_length, 0)
    if count == 0:
        return 0.0, 0.0
    a = planes.amplitude
    fast = np.ones_like(a, dtype=bool) if turns is None else planes.freqs * count >= 2 * np.pi * turns
    far = np.arange(train_length, length)
    slow = plane_sum(a[~fast], planes.phase[~fast], planes.freqs[~fast], far) if (~fast).any() else np.zeros(count)
    first = float(np.exp(slow - shift).sum() * np.prod(i0(a[fast])))
    second = float(np.exp(2 * (slow - shift)).sum() * np.prod(i0(2 * a[fast])))
    return first, second


def quenched_log_sum(amplitude: np.ndarray, count: int, beta: float) -> float:
    """Typical ``log sum_{D<count} e^{beta X_D}`` for ``X_D = sum_m a_m cos(U_{D,m})``, the ``U`` independent and uniform.

    The random-energy model's answer: ``log count + Lambda(beta)`` (``Lambda(t) = sum_m log I_0(t a_m)``, the annealed
    average that :func:`far_moments` uses) while ``count`` draws reach the energies that dominate that average, and
    otherwise ``beta x``, with ``x`` the largest of ``count`` draws (the rate function of ``X`` equal to ``log count``):
    the sum is then carried by a few offsets, not by their average.
    """
    if count <= 0:
        return -math.inf
    a = np.asarray(amplitude, dtype=np.float64)
    log_n = math.log(count)
    if not len(a):
        return log_n
    cumulant = lambda t: float(np.sum(np.log(i0e(t * a)) + t * a))  # noqa: E731 - Lambda(t), overflow-free
    slope = lambda t: float(np.sum(a * i1e(t * a) / i0e(t * a)))  # noqa: E731 - Lambda'(t)
    rate_gap = lambda t: t * slope(t) - cumulant(t) - log_n  # noqa: E731 - rate function at Lambda'(t), minus log count
    if rate_gap(beta) <= 0:
        return log_n + cumulant(beta)
    return beta * slope(brentq(rate_gap, 0.0, beta))


def in_range_moments(planes: Planes, train_length: int, length: int, turns: float, shift: float) -> tuple[float, float]:
    """``M1`` and ``M2`` of the far offsets under the in-range law: no logit beyond ``T`` is evaluated.

    Planes that turn at least ``turns`` full circles over ``[T, L)`` are random energies
    (:func:`quenched_log_sum`); the others are frozen at their value at the last trained offset ``T - 1``.
    """
    count = max(length - train_length, 0)
    if count == 0:
        return 0.0, 0.0
    a = planes.amplitude
    fast = planes.freqs * count >= 2 * np.pi * turns
    edge = float(plane_sum(a[~fast], planes.phase[~fast], planes.freqs[~fast], np.array([train_length - 1]))[0]
                 if (~fast).any() else 0.0)
    first = quenched_log_sum(a[fast], count, 1.0) + edge - shift
    second = quenched_log_sum(a[fast], count, 2.0) + 2 * (edge - shift)
    return math.exp(min(first, MAX_LOG)), math.exp(min(second, MAX_LOG))  # the cap only keeps a hopeless run finite


def logit_scale(length: int, train_length: int) -> float:
    """The inference-time logit multiplier ``max(1, log L / log T)`` (Chiang & Cholak 2022; scalable softmax)."""
    return max(1.0, math.log(length) / math.log(train_length))


def scaled(planes: Planes, scale: float) -> Planes:
    """The planes of the kernel ``scale * f``: every amplitude times ``scale``."""
    return Planes(planes.freqs, planes.amplitude * scale, planes.phase)


def far_mass(planes: Planes, train_length: int, length: int, turns: float | None, shift: float,
             in_range: bool) -> tuple[float, float]:
    """The far tail's two moments under the two-scale or pure law (:func:`far_moments`) or the in-range law."""
    if in_range:
        return in_range_moments(planes, train_length, length, turns if turns is not None else 0.0, shift)
    return far_moments(planes, train_length, length, turns, shift)


def law_masses(planes: Planes, offset: int, train_length: int, lengths: list[int], turns: float | None,
               in_range: bool = False) -> np.ndarray:
    """``p(L)`` of the last query under a law (see :func:`far_mass`), the in-range logits taken from the planes."""
    near = planes.profile(np.arange(train_length))
    shift = near.max()
    z_t = np.exp(near - shift).sum()
    return np.array([np.exp(near[offset] - shift) / (z_t + far_mass(planes, train_length, n, turns, shift, in_range)[0])
                     for n in lengths])


# -- accuracy predictions --------------------------------------------------------------------
def multinomial_counts(draws: int, vocab: int, samples: int, gen: torch.Generator) -> torch.Tensor:
    """``(samples, vocab)`` counts of ``draws`` uniform tokens, by sequential conditional binomials."""
    counts = torch.zeros(samples, vocab, dtype=torch.float64)
    remaining = torch.full((samples,), float(draws), dtype=torch.float64)
    for v in range(vocab - 1):
        counts[:, v] = torch.binomial(remaining, torch.full_like(remaining, 1.0 / (vocab - v)), generator=gen)
        remaining -= counts[:, v]
    counts[:, -1] = remaining
    return counts


@torch.no_grad()
def weights_accuracy(target: float, distractors: torch.Tensor, far_first: float, far_second: float,
                     readout: torch.Tensor, samples: int, gen: torch.Generator) -> float:
    """Accuracy of the last query from its attention weights: the target's, the distractors' drawn token by token,
    and a far tail known only by its total ``far_first`` and sum of squares ``far_second``.

    The tail is replaced by ``n = far_first^2 / far_second`` (its effective number) equal-weight distractors on uniform
    tokens, matching both moments. Weights need not be normalized: only their ratios matter.
    """
    vocab = readout.shape[0]
    near = torch.cat([torch.tensor([target], dtype=torch.float64), distractors.double()])
    tokens = torch.randint(0, vocab, (samples, len(near)), generator=gen)
    mass = mass_per_token(near, tokens, vocab)
    if far_first > 0:
        draws = max(1, round(far_first * far_first / far_second))
        mass += multinomial_counts(draws, vocab, samples, gen) * (far_first / draws)
    logits = mass @ readout.to(mass.dtype)
    return float((logits.argmax(1) == tokens[:, 0]).to(torch.float64).mean())


def monte_carlo_accuracy(row: torch.Tensor, readout: torch.Tensor, offset: int, length: int, samples: int,
                         gen: torch.Generator, exact_offsets: int) -> float:
    """Accuracy from the exact logit row: the ``exact_offsets`` heaviest distractors drawn token by token, the rest
    as a moment-matched tail. It reads the row at every offset, so it checks the accuracy model, not a law."""
    weights = torch.softmax(row[:length].double(), dim=0)
    others = torch.cat([weights[:offset], weights[offset + 1 :]]).sort(descending=True).values
    n_exact = min(len(others), exact_offsets)
    far = others[n_exact:]
    return weights_accuracy(float(weights[offset]), others[:n_exact], float(far.sum()), float((far**2).sum()),
                            readout, samples, gen)


def law_accuracy(planes: Planes, readout: torch.Tensor, offset: int, train_length: int, length: int, samples: int,
                 gen: torch.Generator, turns: float | None, in_range: bool = False) -> float:
    """Accuracy predicted by a law: in-range weights from the in-range logits, the far offsets from the law's moments."""
    near = planes.profile(np.arange(min(length, train_length)))
    shift = near.max()
    weights = torch.from_numpy(np.exp(near - shift))
    first, second = far_mass(planes, train_length, length, turns, shift, in_range)
    others = torch.cat([weights[:offset], weights[offset + 1 :]])
    return weights_accuracy(float(weights[offset]), others, first, second, readout, samples, gen)


def snr_accuracy(row: torch.Tensor, readout: torch.Tensor, offset: int, length: int) -> float:
    """Closed form: every margin ``z_y - z_u`` Gaussian and the margins treated as independent.

    ``mean = p (W_yy - W_yu) + (1 - p)(wbar_y - wbar_u)`` (``wbar``: column means of ``W``, since a
    distractor's token is uniform), ``var = S2 * var_v(W_vy - W_vu)`` with ``S2`` the sum of the
    squared distractor weights; accuracy ``= mean_y prod_{u != y} Phi(mean / sd)``.
    """
    W = readout.double().numpy()
    weights = torch.softmax(row[:length], dim=0).numpy()
    p = weights[offset]
    s2 = (weights**2).sum() - p**2
    col_mean = W.mean(0)
    cov = np.cov(W, rowvar=False, bias=True)  # covariance of columns over the distractor token v
    var_diff = np.diag(cov)[:, None] + np.diag(cov)[None, :] - 2 * cov  # var_v(W_vy - W_vu)
    mean = p * (np.diag(W)[:, None] - W) + (1 - p) * (col_mean[:, None] - col_mean[None, :])
    sd = np.sqrt(s2 * np.clip(var_diff, 0, None)) + 1e-300
    log_phi = norm.logcdf(mean / sd)
    np.fill_diagonal(log_phi, 0.0)
    return float(np.exp(log_phi.sum(1)).mean())


def mass_per_token(attention: torch.Tensor, tokens: torch.Tensor, vocab: int) -> torch.Tensor:
    """Attention mass per vocabulary entry ``(batch, vocab)`` for one attention row over ``tokens`` ``(batch, L)``."""
    mass = torch.zeros(tokens.shape[0], vocab, dtype=attention.dtype, device=attention.device)
    return mass.scatter_add_(1, tokens, attention[None].expand(tokens.shape[0], -1))
