"""Chapter 5's unnormalized family: the task's Gram matrix, the minimum-norm interpolant, gradient descent on it
(iterated and in closed form), and the evaluation of a map at every length."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ...model.heads import WeightMap, kernel_weights
from ...model.seeding import generator
from ...model.tasks import sample_tokens


def task_gram(train_length: int, offset: int, vocab: int, n_offsets: int | None = None) -> torch.Tensor:
    """``H`` with ``E[loss] = (f - e_k)^T H (f - e_k)`` over the training queries ``t`` in ``[k, T)``.

    For a query ``t``, ``E <e_{x_a}, e_{x_b}> = 1`` if ``a = b`` and ``1/V`` otherwise, so
    ``E ||o_t - e_{x_{t-k}}||^2 = (f - y)^T G_t (f - y)`` with ``G_t = (1 - 1/V) I + 1/V 11^T``
    restricted to the offsets ``D <= t``. ``H`` averages ``G_t`` over the training queries.
    """
    n = n_offsets or train_length
    gram = torch.zeros(n, n, dtype=torch.float64)
    queries = range(offset, train_length)
    for t in queries:
        m = min(t + 1, n)
        gram[:m, :m] += (1 - 1 / vocab) * torch.eye(m, dtype=torch.float64) + 1 / vocab
    return gram / len(queries)


def min_norm_interpolant(phi: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``Phi^+ y``: the smallest ``q`` with ``Phi q = y`` (least squares if none exists)."""
    return torch.linalg.pinv(phi) @ y


def gradient_descent(phi: torch.Tensor, gram: torch.Tensor, y: torch.Tensor, lr: float, steps: int,
                     init: torch.Tensor | None = None) -> torch.Tensor:
    """Full-batch gradient descent on ``1/2 (Phi q - y)^T H (Phi q - y)`` from ``init`` (default zero)."""
    q = torch.zeros(phi.shape[1], dtype=phi.dtype) if init is None else init.clone()
    for _ in range(steps):
        q = q - lr * phi.T @ (gram @ (phi @ q - y))
    return q


def gradient_descent_closed_form(phi: torch.Tensor, gram: torch.Tensor, y: torch.Tensor, lr: float, steps: float,
                                 rtol: float = 1e-12) -> torch.Tensor:
    """GD from zero after ``steps`` steps, exactly: ``(I - (I - lr M)^steps) M^+ b``.

    ``M = Phi^T H Phi`` and ``b = Phi^T H y``. In the eigenbasis of ``M`` each
    direction with eigenvalue ``lam`` is filled to the fraction ``1 - (1 - lr lam)^steps``
    of its min-norm value: GD is a spectral filter, and directions with
    ``lr lam * steps << 1`` are still essentially empty. ``steps = inf`` gives ``Phi^+ y``
    when an interpolant exists.
    """
    m = phi.T @ gram @ phi
    b = phi.T @ gram @ y
    lam, u = torch.linalg.eigh(m)
    keep = lam > rtol * lam.max()
    lam_k = lam[keep]
    if math.isinf(steps):
        filt = 1 / lam_k
    else:
        filt = (1 - torch.pow(1 - lr * lam_k, steps)) / lam_k
    return u[:, keep] @ (filt * (u[:, keep].T @ b))


def stable_lr(phi: torch.Tensor, gram: torch.Tensor, fraction: float = 0.9) -> float:
    """A step size ``fraction * 2 / lam_max(M)``, inside the region where GD converges."""
    return fraction * 2 / float(torch.linalg.eigvalsh(phi.T @ gram @ phi).max())


@dataclass(frozen=True)
class LinearEval:
    """Last-query accuracy (and, for the unnormalized map, squared error with its standard error) at one length."""

    length: int
    accuracy: float
    squared_error: float
    squared_error_se: float
    expected_squared_error: float


def expected_squared_error(f: torch.Tensor, offset: int, vocab: int) -> float:
    """Exact ``E ||o - e_target||^2`` of the last query when the kernel ``f`` covers offsets ``0 .. L-1``.

    ``= (1 - 1/V) sum_D (f - y)_D^2 + (1/V) (sum_D (f - y)_D)^2`` with ``y = e_k``. Every
    offset beyond training adds its ``f(D)^2``: the error grows with ``L`` unless ``f`` vanishes there.
    """
    r = f.clone()
    r[offset] -= 1
    return float((1 - 1 / vocab) * (r**2).sum() + (r.sum() ** 2) / vocab)


@torch.no_grad()
def evaluate_linear(f_all: torch.Tensor, lengths: list[int], offset: int, vocab: int, seed: int,
                    batch: int = 512, weight_map: WeightMap = "linear", stream: str = "linear-eval") -> list[LinearEval]:
    """Last-query accuracy at each length of the head with kernel ``f_all`` (offsets up to ``max(lengths)``).

    The weights are ``g(f)`` for the map; the normalized maps divide by their sum, which leaves
    the argmax unchanged, so accuracy needs no normalization. The squared error (and its
    expectation) is computed for the unnormalized map only.
    """
    rows = []
    for length in lengths:
        tokens = sample_tokens(batch, length, vocab, generator(seed, f"{stream}-{length}"))
        weights = kernel_weights(f_all[:length], weight_map).flip(0)  # weight of key position s is g(f(L - 1 - s))
        out = torch.zeros(batch, vocab, dtype=f_all.dtype).scatter_add_(1, tokens, weights.expand(batch, length))
        target = tokens[:, length - 1 - offset]
        accuracy = float((out.argmax(-1) == target).double().mean())
        if weight_map != "linear":
            rows.append(LinearEval(length, accuracy, math.nan, math.nan, math.nan))
            continue
        err = out.clone()
        err[torch.arange(batch), target] -= 1
        per_sequence = (err**2).sum(-1)
        rows.append(LinearEval(length, accuracy, float(per_sequence.mean()),
                               float(per_sequence.std() / math.sqrt(batch)),
                               expected_squared_error(f_all[:length], offset, vocab)))
    return rows
