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

import pandas as pd
import torch
from tqdm import tqdm

from .encodings import full_band_frequencies, rope_frequencies, rotate
from .evaluation import length_sweep
from .seeding import generator
from .studies import doubling_lengths
from .tasks import sample_tokens
from .training import RunConfig, train


def offset_features(offsets: torch.Tensor, freqs: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """``Phi[D] = R_{-D} key / sqrt(d)``, shape ``(len(offsets), d)``: ``f(D) = Phi[D] . q``."""
    return rotate(key, -offsets, freqs) / math.sqrt(key.shape[0])


def unit_key(dim: int, seed: int | None = None) -> torch.Tensor:
    """The fixed key: unit amplitude in every rotary plane (half convention).

    Phases are zero, or uniformly random from the seed's ``"key"`` stream: the seed
    changes the features while keeping every plane's amplitude, hence the conditioning.
    """
    half = dim // 2
    phase = torch.zeros(half, dtype=torch.float64)
    if seed is not None:
        phase = 2 * torch.pi * torch.rand(half, generator=generator(seed, "key"), dtype=torch.float64)
    return torch.cat([torch.cos(phase), torch.sin(phase)])


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


@dataclass
class LinearControlStudy:
    """Chapter 5's tables."""

    selection: pd.DataFrame  # seed, frequencies, method, rel_error_to_pinv, rel_error_to_closed_form, norm, cond
    lengths: pd.DataFrame  # seed, model, length, accuracy, squared_error, expected_squared_error
    spectrum: pd.DataFrame  # seed, frequencies, eigenvalue, filled (fraction of min-norm value reached by GD)
    ablation: pd.DataFrame  # seed, method, rel_error_to_pinv, norm, null_space_norm, accuracy_longest


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def linear_control_study(params: dict, progress: bool = True) -> LinearControlStudy:
    """Min-norm selection, (no) extrapolation and optimizer dependence of linear rotary attention."""
    d, V, T, k = params["dim"], params["vocab"], params["train_length"], params["offset"]
    lengths = doubling_lengths(T, params["length_factor"])
    longest = lengths[-1]
    freq_sets = {
        "full-band": full_band_frequencies(d, params["full_band_base"]),
        "standard": rope_frequencies(d, params["rope_base"]),
    }
    gram = task_gram(T, k, V)
    y = torch.zeros(T, dtype=torch.float64)
    y[k] = 1.0
    selection, length_rows, spectrum, ablation = [], [], [], []
    for seed in tqdm(range(params["seeds"]), disable=not progress, desc="seeds"):
        key = unit_key(d, seed)
        for name, freqs in freq_sets.items():
            phi = offset_features(torch.arange(T), freqs, key)
            lr = stable_lr(phi, gram)
            pinv = min_norm_interpolant(phi, y)
            gd = gradient_descent(phi, gram, y, lr, params["gd_steps"])
            closed = gradient_descent_closed_form(phi, gram, y, lr, params["gd_steps"])
            cond = float(torch.linalg.cond(phi))
            selection.append(dict(seed=seed, frequencies=name, method="GD (full batch)", rel_error_to_pinv=_relative(gd, pinv),
                                  rel_error_to_closed_form=_relative(gd, closed), norm=float(gd.norm()), cond=cond))
            lam, u = torch.linalg.eigh(phi.T @ gram @ phi)
            keep = lam > 1e-12 * lam.max()
            filled = 1 - torch.pow(1 - lr * lam[keep], params["gd_steps"])
            spectrum.append(pd.DataFrame(dict(seed=seed, frequencies=name, eigenvalue=lam[keep].numpy(), filled=filled.numpy())))
            if name != "full-band":
                continue
            sgd = sgd_on_tokens(phi, T, k, V, params["sgd_steps"], 0.5 * lr, params["sgd_batch"], seed)
            selection.append(dict(seed=seed, frequencies=name, method="SGD on tokens", rel_error_to_pinv=_relative(sgd, pinv),
                                  rel_error_to_closed_form=float("nan"), norm=float(sgd.norm()), cond=cond))
            phi_long = offset_features(torch.arange(longest), freqs, key)
            sgd_evals = evaluate_linear(phi_long @ sgd, lengths, k, V, seed, params["eval_batch"])
            for ev in sgd_evals:
                length_rows.append(dict(seed=seed, model="linear (SGD from zero)", **ev.__dict__))
            init = torch.randn(d, generator=generator(seed, "linear-init"), dtype=torch.float64)
            steps, batch = params["sgd_steps"], params["sgd_batch"]
            variants = {
                "SGD from zero": sgd,
                "Adam from zero": sgd_on_tokens(phi, T, k, V, steps, params["adam_lr"], batch, seed, "adam"),
                "SGD from random init": sgd_on_tokens(phi, T, k, V, steps, 0.5 * lr, batch, seed, init=init),
            }
            projector = torch.linalg.pinv(phi) @ phi
            for method, q in variants.items():
                acc_longest = (sgd_evals[-1] if method == "SGD from zero"
                               else evaluate_linear(phi_long @ q, [longest], k, V, seed, params["eval_batch"])[0]).accuracy
                ablation.append(dict(seed=seed, method=method, rel_error_to_pinv=_relative(q, pinv), norm=float(q.norm()),
                                     null_space_norm=float((q - projector @ q).norm()),
                                     predicted_rel_error=_relative(pinv + init - projector @ init, pinv)
                                     if method == "SGD from random init" else float("nan"),
                                     accuracy_longest=acc_longest))
            softmax = train(RunConfig(kind="rope", dim=d, vocab=V, train_length=T, offset=k, steps=params["softmax_steps"],
                                      seed=seed, rope_base=params["full_band_base"], rope_full_band=True))
            sweep = length_sweep(softmax.head, lengths, T, k, V, seed, batch=params["eval_batch"])
            for row in sweep[sweep.metric == "last"].itertuples():
                length_rows.append(dict(seed=seed, model="softmax RoPE (same frequencies)", length=row.length,
                                        accuracy=row.accuracy, squared_error=float("nan"), expected_squared_error=float("nan")))
    return LinearControlStudy(pd.DataFrame(selection), pd.DataFrame(length_rows), pd.concat(spectrum, ignore_index=True),
                              pd.DataFrame(ablation))
