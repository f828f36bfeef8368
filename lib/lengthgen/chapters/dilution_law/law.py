"""Chapter 4's dilution law: the target's softmax mass and the last query's accuracy beyond T, predicted from the
planes and the readout measured at T (in closed form and by Monte Carlo)."""

from __future__ import annotations

import numpy as np
import torch
from scipy.special import i0
from scipy.stats import norm

from ...analysis.planes import Planes, plane_sum


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


def law_masses(planes: Planes, offset: int, train_length: int, lengths: list[int], turns: float | None) -> np.ndarray:
    """``p(L)`` of the last query under a law (see :func:`far_moments`), the in-range logits taken from the planes."""
    near = planes.profile(np.arange(train_length))
    shift = near.max()
    z_t = np.exp(near - shift).sum()
    return np.array([np.exp(near[offset] - shift) / (z_t + far_moments(planes, train_length, n, turns, shift)[0])
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
                 gen: torch.Generator, turns: float | None) -> float:
    """Accuracy predicted by a law: in-range weights from the in-range logits, the far offsets from the law's moments."""
    near = planes.profile(np.arange(min(length, train_length)))
    shift = near.max()
    weights = torch.from_numpy(np.exp(near - shift))
    first, second = far_moments(planes, train_length, length, turns, shift)
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
