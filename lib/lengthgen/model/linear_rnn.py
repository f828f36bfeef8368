"""Overparameterized linear RNNs trained on an impulse response: the recurrent side of the implicit-bias story.

``h_t = A h_{t-1} + B x_t``, ``y_t = C . h_t`` with a ``d``-dimensional state and scalar input and output. The map
from inputs to outputs is the convolution with the impulse response ``g_i = C A^i B``. With i.i.d. standard normal
inputs and the squared error averaged over the ``T`` positions of a training sequence, the expected loss is

    ``sum_{i < T} (T - i) / T * (g_i - target_i)^2``,

so training sees only the first ``T`` coefficients; what the model does on longer sequences is decided by the
coefficients ``i >= T``, which gradient descent never fits directly (Cohen-Karlik et al. 2022, 2023).

Targets: the book's fixed-offset retrieval rule as an impulse response (``target_i = 1[i = k]``, whose minimal
realization is a shift register of ``k + 1`` states) and a damped oscillation ``rho^i cos(omega i)`` (two states).
Many replicas (targets, init scales, seeds) train together as one batch. Nothing here knows about chapters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .seeding import generator

TARGETS: dict[str, str] = {
    "shift": "1[i = k]: retrieve the input k steps back (minimal state k + 1)",
    "oscillator": "rho^i cos(omega i): a damped oscillation (minimal state 2)",
}


@dataclass(frozen=True)
class RnnTarget:
    """An impulse response target and its minimal state dimension."""

    name: str
    shift: int = 3
    rho: float = 0.8
    omega: float = 0.9

    def __post_init__(self) -> None:
        if self.name not in TARGETS:
            raise ValueError(f"target {self.name!r} is not one of {sorted(TARGETS)}")
        if self.shift < 0 or not 0 < self.rho < 1:
            raise ValueError(f"need shift >= 0 and 0 < rho < 1, got {self.shift}, {self.rho}")

    @property
    def minimal_order(self) -> int:
        """The state dimension of the smallest linear system with this impulse response (its Hankel rank)."""
        return self.shift + 1 if self.name == "shift" else 2

    def response(self, length: int) -> np.ndarray:
        """``target_i`` for ``i < length``."""
        i = np.arange(length)
        if self.name == "shift":
            return (i == self.shift).astype(float)
        return self.rho**i * np.cos(self.omega * i)


def impulse_response(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, length: int) -> torch.Tensor:
    """``g_i = C A^i B`` for ``i < length``, for a batch of systems (``a``: (S, d, d), ``b``, ``c``: (S, d))."""
    out, state = [], b
    for _ in range(length):
        out.append((c * state).sum(-1))
        state = torch.einsum("sij,sj->si", a, state)
    return torch.stack(out, dim=-1)


def position_weights(length: int) -> np.ndarray:
    """``(T - i) / T``: how many positions of a length-``T`` sequence see coefficient ``i``, per position."""
    return (length - np.arange(length)) / length


def init_systems(dim: int, stds: list[float], seeds: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One random system per (std, seed): ``A ~ N(0, std^2 / d)``, ``B, C ~ N(0, std^2)`` entrywise (so ``A``'s
    spectral radius is about ``std``)."""
    a, b, c = [], [], []
    for std, seed in zip(stds, seeds, strict=True):
        gen = generator(seed, "linear-rnn-init")
        a.append(torch.randn(dim, dim, generator=gen, dtype=torch.float64) * std / np.sqrt(dim))
        b.append(torch.randn(dim, generator=gen, dtype=torch.float64) * std)
        c.append(torch.randn(dim, generator=gen, dtype=torch.float64) * std)
    return torch.stack(a), torch.stack(b), torch.stack(c)


def train_systems(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, targets: np.ndarray, train_length: int,
                  steps: int, lr: float, clip: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradient descent on the expected loss of every system at once (``targets``: (S, T)), each system's step
    clipped to gradient norm ``clip`` (large inits start with exploding gradients). Returns the trained systems."""
    a, b, c = (t.clone().requires_grad_() for t in (a, b, c))
    target = torch.tensor(targets[:, :train_length])
    weight = torch.tensor(position_weights(train_length))
    for _ in range(steps):
        loss = ((impulse_response(a, b, c, train_length) - target) ** 2 * weight).sum(-1)
        grads = torch.autograd.grad(loss.sum(), (a, b, c))
        norm = torch.sqrt(sum((g**2).flatten(1).sum(-1) for g in grads))
        factor = torch.clamp(clip / torch.clamp(norm, min=1e-300), max=1.0)
        with torch.no_grad():
            for param, grad in zip((a, b, c), grads, strict=True):
                param -= lr * grad * factor.view(-1, *[1] * (grad.dim() - 1))
    return a.detach(), b.detach(), c.detach()


def relative_error(response: np.ndarray, target: np.ndarray, length: int) -> np.ndarray:
    """Expected relative squared output error on length-``length`` sequences: ``sum (L - i) (g - t)^2 / sum (L - i) t^2``
    over ``i < length`` (``response``: (S, >= length))."""
    weight = position_weights(length)
    return ((response[:, :length] - target[:, :length]) ** 2 * weight).sum(-1) / (target[:, :length] ** 2 * weight).sum(-1)


def hankel_rank(response: np.ndarray, size: int, tol: float = 1e-2) -> np.ndarray:
    """Effective rank of each response's ``size x size`` Hankel matrix ``H_ij = g_{i+j}``: singular values above
    ``tol`` times the largest. For a linear system it is the dimension of its reachable and observable state."""
    ranks = []
    for g in response:
        hankel = np.array([g[i : i + size] for i in range(size)])
        if not np.all(np.isfinite(hankel)):
            ranks.append(size)
            continue
        sv = np.linalg.svd(hankel, compute_uv=False)
        ranks.append(int((sv > tol * sv[0]).sum()) if sv[0] > 0 else 0)
    return np.array(ranks)
