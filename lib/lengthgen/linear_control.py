"""Chapter 5's control: rotary attention *without* softmax, trained by gradient descent.

The head outputs ``o_t = sum_{D <= t} f(D) e_{x_{t-D}}`` (one-hot values, no
normalization) and is trained with squared loss to ``e_{x_{t-k}}``. The key is
fixed and only ``q`` is trained, so the kernel is linear in the parameters:
``f(D) = phi(D) . q`` with ``phi(D) = R_{-D} key / sqrt(d)``.

Over random tokens the expected training loss is the quadratic
``1/2 (Phi q - y)^T H (Phi q - y)``, with ``Phi`` the features of the training
offsets, ``y = e_k`` and ``H`` a positive definite Gram matrix fixed by the task
(:func:`task_gram`). Gradient descent from ``q = 0`` only ever adds vectors of
the form ``Phi^T v``, so it stays in the row space of ``Phi``; the only
interpolant there is the minimum-norm one, ``Phi^+ y``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .encodings import rotate
from .seeding import generator
from .tasks import sample_tokens


def offset_features(offsets: torch.Tensor, freqs: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """``Phi[D] = R_{-D} key / sqrt(d)``, shape ``(len(offsets), d)``: ``f(D) = Phi[D] . q``."""
    return rotate(key, -offsets, freqs) / math.sqrt(key.shape[0])


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
        filt = -torch.expm1(steps * torch.log1p(-lr * lam_k)) / lam_k
    return u[:, keep] @ (filt * (u[:, keep].T @ b))


def stable_lr(phi: torch.Tensor, gram: torch.Tensor, fraction: float = 0.9) -> float:
    """A step size ``fraction * 2 / lam_max(M)``, inside the region where GD converges."""
    return fraction * 2 / float(torch.linalg.eigvalsh(phi.T @ gram @ phi).max())


def sgd_on_tokens(phi_train: torch.Tensor, train_length: int, offset: int, vocab: int, steps: int, lr: float,
                  batch: int, seed: int, optimizer: str = "sgd", init: torch.Tensor | None = None) -> torch.Tensor:
    """Train ``q`` on sampled token sequences (squared loss to one-hot targets).

    Same model as above, but with real data: each step draws ``batch`` sequences of
    length ``train_length``. ``optimizer`` is ``"sgd"`` (plain, no momentum) or ``"adam"``.
    """
    q = torch.zeros(phi_train.shape[1], dtype=torch.float64) if init is None else init.clone()
    q.requires_grad_(True)
    opt = torch.optim.SGD([q], lr=lr) if optimizer == "sgd" else torch.optim.Adam([q], lr=lr)
    gen = generator(seed, "linear-train-data")
    t_idx = torch.arange(offset, train_length)
    delta = t_idx[:, None] - torch.arange(train_length)[None, :]  # (queries, positions)
    causal = delta >= 0
    for _ in range(steps):
        tokens = sample_tokens(batch, train_length, vocab, gen)
        f = phi_train @ q  # f(D) for D = 0 .. T-1
        weights = torch.where(causal, f[delta.clamp(min=0)], torch.zeros((), dtype=f.dtype))
        onehot = torch.nn.functional.one_hot(tokens, vocab).to(f.dtype)  # (B, T, V)
        out = weights @ onehot  # (B, queries, V)
        target = onehot[:, t_idx - offset]
        loss = ((out - target) ** 2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return q.detach()


@dataclass(frozen=True)
class LinearEval:
    """Last-query accuracy and squared error of a linear-attention kernel at one length."""

    length: int
    accuracy: float
    squared_error: float
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
                    batch: int = 512) -> list[LinearEval]:
    """Last-query accuracy and squared error at each length; ``f_all`` covers offsets up to ``max(lengths)``."""
    rows = []
    for length in lengths:
        tokens = sample_tokens(batch, length, vocab, generator(seed, f"linear-eval-{length}"))
        weights = f_all[:length].flip(0)  # weight of key position s is f(L - 1 - s)
        out = torch.zeros(batch, vocab, dtype=f_all.dtype).scatter_add_(1, tokens, weights.expand(batch, length))
        target = tokens[:, length - 1 - offset]
        err = out.clone()
        err[torch.arange(batch), target] -= 1
        rows.append(LinearEval(length, float((out.argmax(-1) == target).double().mean()),
                               float((err**2).sum(-1).mean()), expected_squared_error(f_all[:length], offset, vocab)))
    return rows
