"""Chapter 5's collapse law: where an unnormalized rotary map collapses, predicted from what is measured at the
training length."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ...analysis.planes import plane_sum, planes_from_vectors
from ...model.heads import WeightMap, kernel_weights
from ...model.seeding import generator
from .interpolants import LinearEval, evaluate_linear, min_norm_interpolant

COLLAPSE_ACCURACY = 0.5  # the accuracy that defines a map's collapse length


def plane_amplitudes(q: torch.Tensor, key: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """The plane amplitudes ``a_m`` of the kernel ``f(D) = phi(D) . q`` (the book's plane decomposition)."""
    return torch.as_tensor(planes_from_vectors(q, key, freqs).amplitude)


def far_moment(amplitudes: torch.Tensor, weight_map: WeightMap) -> float:
    """``E g(f)^2`` over offsets far beyond ``T``, treating the planes' phases as independent and uniform.

    ``f = sum_m a_m cos(phi_m)``: ``E f^2 = sum a^2 / 2``; ``E f^4 = 3 (sum a^2 / 2)^2 - 3/8 sum a^4``;
    ``E exp(2 f) = prod_m I_0(2 a_m)``. These hold exactly for incommensurate frequencies averaged
    over long stretches of offsets; they need only ``q``, i.e. what training at ``T`` produced.
    """
    a = amplitudes.double()
    energy = float((a**2).sum() / 2)
    if weight_map == "linear":
        return energy
    if weight_map == "squared":
        return 3 * energy**2 - 0.375 * float((a**4).sum())
    if weight_map == "exp":
        return float(torch.prod(torch.special.i0(2 * a)))
    raise ValueError(f"unknown weight map {weight_map!r}")


def argmax_accuracy(target_weight: float, noise_energy: float, vocab: int) -> float:
    """``P(m + s Z_0 > max_{v < V-1} s Z_v)``: the target's bin beats ``V - 1`` others under Gaussian bin noise.

    Each bin sums the weights of the offsets whose token fell in it; over random tokens its variance
    is ``(1/V)(1 - 1/V)`` times the sum of the squared weights (``noise_energy``), the same in every
    bin, and the common mean cancels in the argmax. The target's bin also holds ``m = g(f(k))``.
    """
    if noise_energy <= 0:
        return 1.0 if target_weight > 0 else 1.0 / vocab
    s = math.sqrt(noise_energy * (1 / vocab) * (1 - 1 / vocab))
    z = torch.linspace(-10, 10, 4001, dtype=torch.float64)
    density = torch.exp(-z**2 / 2) / math.sqrt(2 * math.pi)
    inner = torch.special.ndtr(target_weight / s + z) ** (vocab - 1)
    return float(torch.trapezoid(density * inner, z))


@dataclass(frozen=True)
class CollapseLaw:
    """What the argmax law needs, all measured at the training length, for one head and one weight map."""

    target_weight: float  # g(f(k))
    in_range_noise: float  # sum over training offsets D != k of g(f(D))^2
    far_moment: float  # E g(f)^2 per offset beyond T
    train_length: int
    vocab: int

    def noise_energy(self, length: float) -> float:
        """Summed squared weight of the non-target offsets of the last query at ``length``."""
        return self.in_range_noise + max(length - self.train_length, 0) * self.far_moment

    def accuracy(self, length: float) -> float:
        """Predicted last-query accuracy at ``length``."""
        return argmax_accuracy(self.target_weight, self.noise_energy(length), self.vocab)

    def collapse_length(self, level: float = COLLAPSE_ACCURACY) -> float:
        """The length at which the predicted accuracy falls to ``level`` (bisection; the noise grows linearly in L)."""
        lo, hi = float(self.train_length), float(self.train_length)
        if self.accuracy(lo) < level:
            return lo
        while self.accuracy(hi) >= level:
            hi *= 2
            if hi > 1e12:
                return math.inf
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self.accuracy(mid) >= level else (lo, mid)
        return hi


def collapse_law(f_train: torch.Tensor, amplitudes: torch.Tensor, offset: int, vocab: int,
                 weight_map: WeightMap) -> CollapseLaw:
    """The Gaussian law's inputs from the kernel on the training offsets ``f_train`` and the plane amplitudes."""
    g = kernel_weights(f_train, weight_map)
    others = torch.cat([g[:offset], g[offset + 1:]])
    return CollapseLaw(float(g[offset]), float((others**2).sum()), far_moment(amplitudes, weight_map),
                       f_train.shape[0], vocab)


def surrogate_kernel(f_train: torch.Tensor, amplitudes: torch.Tensor, freqs: torch.Tensor, length: int,
                     gen: torch.Generator) -> torch.Tensor:
    """The kernel on the training offsets, continued beyond ``T`` by planes of the same amplitudes and frequencies
    with random phases: what a kernel with this energy spectrum does far out when its phases carry no structure."""
    phases = 2 * torch.pi * torch.rand(len(amplitudes), generator=gen, dtype=torch.float64)
    continued = plane_sum(np.asarray(amplitudes, dtype=np.float64), phases.numpy(), np.asarray(freqs, dtype=np.float64),
                          np.arange(f_train.shape[0], length))
    return torch.cat([f_train, torch.from_numpy(continued)])


def surrogate_accuracy(f_train: torch.Tensor, amplitudes: torch.Tensor, freqs: torch.Tensor, lengths: list[int],
                       offset: int, vocab: int, seed: int, batch: int, draws: int, weight_map: WeightMap) -> list[float]:
    """The collapse law: predicted last-query accuracy at each length, from the training offsets' kernel and the plane
    amplitudes of ``q`` only (mean over ``draws`` random-phase continuations, each on its own token sample)."""
    totals = [0.0] * len(lengths)
    for draw in range(draws):
        kernel = surrogate_kernel(f_train, amplitudes, freqs, max(lengths), generator(seed, f"surrogate-phases-{draw}"))
        evals = evaluate_linear(kernel, lengths, offset, vocab, seed, batch, weight_map, stream=f"surrogate-{draw}")
        totals = [t + ev.accuracy for t, ev in zip(totals, evals, strict=True)]
    return [t / draws for t in totals]


@dataclass(frozen=True)
class LawSetting:
    """What the collapse law and its measurement share within one run: features, key, frequencies, lengths, task."""

    phi_long: torch.Tensor  # features of the offsets 0 .. longest - 1
    key: torch.Tensor
    freqs: torch.Tensor
    lengths: list[int]
    offset: int
    vocab: int
    train_length: int
    seed: int
    batch: int
    draws: int


def law_and_measurement(s: LawSetting, q: torch.Tensor, weight_map: WeightMap) -> tuple[list[float], list[LinearEval]]:
    """The collapse law's accuracy at each length from training-length quantities, and the head's measured accuracy."""
    f = s.phi_long @ q
    predicted = surrogate_accuracy(f[:s.train_length], plane_amplitudes(q, s.key, s.freqs), s.freqs, s.lengths,
                                   s.offset, s.vocab, s.seed, s.batch, s.draws, weight_map)
    return predicted, evaluate_linear(f, s.lengths, s.offset, s.vocab, s.seed, s.batch, weight_map)


def crossing_length(lengths: list[int], accuracy: list[float], level: float = COLLAPSE_ACCURACY) -> float:
    """Where an accuracy curve first falls below ``level``, interpolated linearly in log length (inf if it never does,
    the first length if it starts below)."""
    if accuracy[0] < level:
        return float(lengths[0])
    for (l0, a0), (l1, a1) in zip(zip(lengths, accuracy, strict=True), zip(lengths[1:], accuracy[1:], strict=True),
                                  strict=False):
        if a1 < level:
            w = (a0 - level) / (a0 - a1)
            return float(math.exp(math.log(l0) + w * (math.log(l1) - math.log(l0))))
    return math.inf


def least_bad_interpolant(phi_train: torch.Tensor, phi_long: torch.Tensor, offset: int, vocab: int) -> torch.Tensor:
    """The interpolant ``Phi q = e_k`` with the lowest exact expected squared error at the length of ``phi_long``.

    Interpolants are ``q = Phi^+ y + N z`` with ``N`` a basis of the null space of ``Phi``; the
    expected error at length ``L`` is ``r^T G r`` with ``r = Phi_L q - y_L`` and
    ``G = (1 - 1/V) I + 11^T / V`` (:func:`expected_squared_error`), a quadratic in ``z``.
    """
    y = torch.zeros(phi_train.shape[0], dtype=phi_train.dtype)
    y[offset] = 1
    q0 = min_norm_interpolant(phi_train, y)
    _, sing, vh = torch.linalg.svd(phi_train)
    rank = int((sing > 1e-10 * sing.max()).sum())
    null = vh[rank:].T
    if null.shape[1] == 0:
        return q0
    y_long = torch.zeros(phi_long.shape[0], dtype=phi_long.dtype)
    y_long[offset] = 1
    b = phi_long @ null
    c = phi_long @ q0 - y_long
    ones_b, ones_c = b.sum(0), c.sum()
    gram = (1 - 1 / vocab) * b.T @ b + torch.outer(ones_b, ones_b) / vocab
    rhs = (1 - 1 / vocab) * b.T @ c + ones_b * ones_c / vocab
    z = -torch.linalg.lstsq(gram, rhs[:, None]).solution[:, 0]
    return q0 + null @ z
