"""Chapter 5 (``05_linear_control``): rotary attention *without* softmax, trained by gradient descent.

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

Two normalized members of the same family (weights ``f^2`` or ``exp f`` over their sum)
separate "normalization" from "exponential". One law predicts where each collapses
(:func:`predicted_accuracy`): the last query's target token wins the argmax while its
weight ``g(f(k))`` stands above the noise of the other offsets' weights in ``V`` vocabulary
bins, whose energy beyond ``T`` grows by a moment of ``g(f)`` fixed by the plane amplitudes
of ``q`` (:func:`far_moment`), quantities known at the training length.

The model itself is :class:`lengthgen.model.heads.LinearRotaryHead`, trained on sampled
tokens by the book's one training loop (:func:`lengthgen.model.training.train`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..book.parallel import map_runs
from ..book.parameters import parameter
from ..model.evaluation import doubling_lengths
from ..model.heads import LinearRunConfig, WeightMap, kernel_weights, unit_key
from ..model.seeding import generator
from ..model.tasks import sample_tokens
from ..model.training import train
from .common import GB, Execution, Head, LengthSweep, Seeds, Task, power_of_two_at_least
from .planes import plane_sum, planes_from_vectors

MAPS: dict[WeightMap, str] = {"linear": "linear f (unnormalized)", "squared": "normalized f²", "exp": "softmax exp f"}
COLLAPSE_ACCURACY = 0.5  # the accuracy that defines a map's collapse length
LAW_TOLERANCE = 0.1  # largest |measured - predicted| accuracy at any length (see the claim's reason)


@dataclass(frozen=True)
class Parameters(Seeds, Task, Head, LengthSweep, Execution):
    """Chapter 5's parameters."""

    chapter = "05_linear_control"
    full_band_base: float = parameter("base b of the well-conditioned set pi * b^(-2m/d)", 2.0, 1e9)
    rope_base: float = parameter("base of the standard RoPE frequencies b^(-2m/d)", 2.0, 1e9)
    gd_steps: int = parameter("full-batch gradient-descent steps", 1, 10_000_000)
    sgd_steps: int = parameter("SGD / Adam steps on sampled tokens", 1, 1_000_000)
    sgd_batch: int = parameter("sequences per SGD step", 1, 4096)
    adam_lr: float = parameter("Adam learning rate of the ablation and of the normalized heads", 1e-6, 1.0)
    frequency_jitter: float = parameter("fraction of its ladder cell over which each seed moves each frequency (> 0: "
                                        "it makes seeds replicates and moves the top frequency off Nyquist, where a "
                                        "plane has no sine part)", 0.01, 1.0)
    surrogate_draws: int = parameter("random-phase draws of the far kernel per length in the collapse law", 1, 1000)
    squared_init_std: float = parameter("std of the normal init of q for the normalized f² head (f² is 0/0 at q = 0)",
                                        1e-4, 10.0)

    def check(self) -> None:
        super().check()
        power_of_two_at_least("length_factor", self.length_factor, 4,
                              "the error's growth is measured over the last two doublings of length")

    def memory_gb(self) -> float:
        return self.workers * (32 * self.longest * self.dim + 16 * self.eval_batch * (self.longest + self.vocab)) / GB

    def memory_rule(self) -> str:
        return "per worker: 32 bytes x longest length x dim for the features, plus the evaluation batch"


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


@dataclass
class LinearControlStudy:
    """Chapter 5's tables (one row per run and method, or per run, head and length)."""

    selection: pd.DataFrame  # offset, seed, frequencies, method, rel_error_to_pinv, rel_error_to_closed_form, norm, cond
    lengths: pd.DataFrame  # offset, seed, model, length, accuracy, predicted, squared_error(+_se), expected_squared_error
    spectrum: pd.DataFrame  # offset, seed, frequencies, eigenvalue, filled (fraction of min-norm value reached by GD)
    ablation: pd.DataFrame  # offset, seed, method, rel_error_to_pinv, norm, null_space_norm, accuracy_longest
    kernels: pd.DataFrame  # offset, seed, model, offset_D, f: each head's kernel over offsets up to the longest length
    laws: pd.DataFrame  # offset, seed, model, target_weight, in_range_noise, far_moment, collapse_length (in T)
    pinv: dict[tuple[int, int], torch.Tensor]  # each run's min-norm interpolant (full band)
    controls: pd.DataFrame  # offset, seed, map, value: the law's largest deviation for an untrained random interpolant


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


HEADS: dict[str, WeightMap] = {
    "linear (SGD from zero)": "linear",
    "least-bad linear interpolant": "linear",
    "normalized f² (Adam)": "squared",
    "softmax exp f (Adam)": "exp",
}


def seed_study(job: tuple[Parameters, int, int]) -> dict[str, list]:
    """One worker's job: every measurement of chapter 5 for one offset and one seed."""
    p, k, seed = job
    d, V, T = p.dim, p.vocab, p.train_length
    lengths = doubling_lengths(T, p.length_factor)
    longest = lengths[-1]
    gram = task_gram(T, k, V)
    y = torch.zeros(T, dtype=torch.float64)
    y[k] = 1.0
    label = dict(offset=k, seed=seed)
    out: dict[str, list] = dict(selection=[], lengths=[], spectrum=[], ablation=[], kernels=[], laws=[], pinv=[],
                                controls=[])
    for name, base in (("full-band", p.full_band_base), ("standard", p.rope_base)):
        linear = LinearRunConfig(seed=seed, offset=k, train_length=T, dim=d, vocab=V, frequencies=name, rope_base=base,
                                 frequency_jitter=p.frequency_jitter, steps=p.sgd_steps, batch=p.sgd_batch, device=p.device)
        phi = linear.features(torch.arange(T))
        lr = stable_lr(phi, gram)
        pinv = min_norm_interpolant(phi, y)
        gd = gradient_descent(phi, gram, y, lr, p.gd_steps)
        closed = gradient_descent_closed_form(phi, gram, y, lr, p.gd_steps)
        cond = float(torch.linalg.cond(phi))
        out["selection"].append(dict(**label, frequencies=name, method="GD (full batch)",
                                     rel_error_to_pinv=_relative(gd, pinv),
                                     rel_error_to_closed_form=_relative(gd, closed), norm=float(gd.norm()), cond=cond))
        lam, _ = torch.linalg.eigh(phi.T @ gram @ phi)
        keep = lam > 1e-12 * lam.max()
        filled = 1 - torch.pow(1 - lr * lam[keep], p.gd_steps)
        out["spectrum"].append(pd.DataFrame(dict(**label, frequencies=name, eigenvalue=lam[keep].numpy(),
                                                 filled=filled.numpy())))
        if name != "full-band":
            continue
        out["pinv"].append(((k, seed), pinv))
        key = unit_key(d, seed)
        variants = {
            "SGD from zero": linear.with_(lr=0.5 * lr),
            "Adam from zero": linear.with_(lr=p.adam_lr, optimizer="adam"),
            "SGD from random init": linear.with_(lr=0.5 * lr, random_init=True),
        }
        trained = {method: train(cfg).model.q.detach().cpu() for method, cfg in variants.items()}
        sgd = trained["SGD from zero"]
        out["selection"].append(dict(**label, frequencies=name, method="SGD on tokens",
                                     rel_error_to_pinv=_relative(sgd, pinv), rel_error_to_closed_form=math.nan,
                                     norm=float(sgd.norm()), cond=cond))
        phi_long = linear.features(torch.arange(longest))
        normalized = {
            "normalized f² (Adam)": linear.with_(weight_map="squared", optimizer="adam", lr=p.adam_lr, random_init=True,
                                                 init_std=p.squared_init_std),
            "softmax exp f (Adam)": linear.with_(weight_map="exp", optimizer="adam", lr=p.adam_lr),
        }
        queries = {
            "linear (SGD from zero)": sgd,
            "least-bad linear interpolant": least_bad_interpolant(phi, phi_long, k, V),
            **{head: train(cfg).model.q.detach().cpu() for head, cfg in normalized.items()},
        }
        freqs = linear.frequency_set()
        setting = LawSetting(phi_long, key, freqs, lengths, k, V, T, seed, p.eval_batch, p.surrogate_draws)
        measured: dict[str, list[LinearEval]] = {}
        for head, q in queries.items():
            weight_map = HEADS[head]
            f_long = phi_long @ q
            gaussian = collapse_law(f_long[:T], plane_amplitudes(q, key, freqs), k, V, weight_map)
            predicted, evals = law_and_measurement(setting, q, weight_map)
            measured[head] = evals
            out["laws"].append(dict(**label, model=head, target_weight=gaussian.target_weight,
                                    far_moment=gaussian.far_moment, norm=float(q.norm()),
                                    collapse_length=crossing_length(lengths, predicted) / T,
                                    measured_collapse_length=crossing_length(lengths, [ev.accuracy for ev in evals]) / T,
                                    gaussian_collapse_length=gaussian.collapse_length() / T,
                                    min_norm_error_longest=expected_squared_error(phi_long @ pinv, k, V),
                                    expected_error_longest=expected_squared_error(f_long, k, V)
                                    if weight_map == "linear" else math.nan))
            for ev, pred in zip(evals, predicted, strict=True):
                out["lengths"].append(dict(**label, model=head, map=weight_map, predicted=pred,
                                           gaussian=gaussian.accuracy(ev.length), **ev.__dict__))
            out["kernels"].append(pd.DataFrame(dict(**label, model=head, offset_D=range(longest), f=f_long.numpy())))
        init = variants["SGD from random init"].build_model().q.detach()
        projector = torch.linalg.pinv(phi) @ phi
        for method, q in trained.items():
            accuracy_longest = (measured["linear (SGD from zero)"][-1] if method == "SGD from zero" else
                                evaluate_linear(phi_long @ q, [longest], k, V, seed, p.eval_batch)[0]).accuracy
            out["ablation"].append(dict(**label, method=method, rel_error_to_pinv=_relative(q, pinv), norm=float(q.norm()),
                                        null_space_norm=float((q - projector @ q).norm()),
                                        predicted_rel_error=_relative(pinv + init - projector @ init, pinv)
                                        if method == "SGD from random init" else math.nan,
                                        accuracy_longest=accuracy_longest,
                                        fit_residual=float((phi @ q - y).abs().max())))
        # an untrained interpolant: the min-norm one plus a random null-space component (fits T exactly, random beyond)
        random_q = pinv + (torch.eye(d, dtype=torch.float64) - projector) @ torch.randn(
            d, generator=generator(seed, "random-query"), dtype=torch.float64)
        for weight_map in ("linear", "squared"):
            predicted, evals = law_and_measurement(setting, random_q, weight_map)
            out["controls"].append(dict(**label, map=weight_map, value=max(
                abs(ev.accuracy - pr) for ev, pr in zip(evals, predicted, strict=True))))
    return out


def linear_control_study(p: Parameters, progress: bool = True) -> LinearControlStudy:
    """Min-norm selection, the collapse law of three weight maps, the least-bad interpolant and the optimizer ablation,
    per offset and seed."""
    jobs = [(p, k, seed) for k in p.offsets for seed in p.seed_list]
    results = map_runs(seed_study, jobs, workers=p.workers, progress=progress, desc="offsets x seeds")

    def rows(name: str) -> list:
        return [row for result in results for row in result[name]]

    return LinearControlStudy(
        selection=pd.DataFrame(rows("selection")), lengths=pd.DataFrame(rows("lengths")),
        spectrum=pd.concat(rows("spectrum"), ignore_index=True), ablation=pd.DataFrame(rows("ablation")),
        kernels=pd.concat(rows("kernels"), ignore_index=True), laws=pd.DataFrame(rows("laws")),
        pinv=dict(rows("pinv")), controls=pd.DataFrame(rows("controls")))


def replicate_distance(kernels: pd.DataFrame, train_length: int, model: str = "linear (SGD from zero)") -> float:
    """Smallest relative distance between two runs' kernels beyond the training offsets, at the same offset ``k``
    (inf with one run): inside ``T`` every interpolant is ``e_k``, so replicates can differ only out there."""
    far = kernels[(kernels.model == model) & (kernels.offset_D >= train_length)]
    runs = {key: torch.tensor(rows.f.values) for key, rows in far.groupby(["offset", "seed"])}
    keys = sorted(runs)
    distances = [_relative(runs[a], runs[b]) for i, a in enumerate(keys) for b in keys[i + 1:] if a[0] == b[0]]
    return min(distances, default=math.inf)


def per_run(frame: pd.DataFrame, runs: int) -> pd.DataFrame:
    """``frame`` (one row per run: ``offset, seed, value``) after checking it has every run once: a per-run check on a
    frame that lost runs would count no failures for them."""
    if len(frame) != runs or frame.duplicated(["offset", "seed"]).any():
        raise AssertionError(f"expected one row for each of {runs} runs, got {len(frame)}")
    return frame


def family_bound(train_length: int, length: int, dim: int, vocab: int) -> float:
    """Gaussian-bin accuracy bound at ``length`` for every kernel ``f = Phi q`` of the unnormalized family (unit key).

    ``f(k) = phi(k) . q <= |q| / sqrt 2`` (``|phi| = 1/sqrt 2``) while each offset beyond ``T`` adds on average
    ``|q|^2 / 2d`` to the squared weights, so ``f(k)^2`` is at most ``d`` times the far energy per offset, for any
    ``q``. The best case puts nothing in range but the target.
    """
    return argmax_accuracy(1.0, (length - train_length) / dim, vocab)


def law_deviation(lengths: pd.DataFrame, head: str) -> pd.DataFrame:
    """Per run: the largest |measured - predicted| accuracy over lengths for one head (``offset, seed, value``)."""
    rows = lengths[lengths.model == head]
    deviation = rows.assign(value=(rows.accuracy - rows.predicted).abs())
    return deviation.groupby(["offset", "seed"], as_index=False).value.agg(lambda v: v.max(skipna=False))


def softmax_margin_where_linear_collapsed(lengths: pd.DataFrame) -> pd.DataFrame:
    """Per run: softmax minus linear accuracy, smallest over the lengths where the law puts the linear head below
    the collapse accuracy (NaN when the law puts it below at no evaluated length)."""
    lin = lengths[lengths.model == "linear (SGD from zero)"].set_index(["offset", "seed", "length"])
    soft = lengths[lengths.model == "softmax exp f (Adam)"].set_index(["offset", "seed", "length"])
    judged = lin[lin.predicted < COLLAPSE_ACCURACY]
    margin = (soft.accuracy.reindex(judged.index) - judged.accuracy).rename("value").reset_index()
    runs = lin.reset_index()[["offset", "seed"]].drop_duplicates()
    smallest = margin.groupby(["offset", "seed"], as_index=False).value.agg(lambda v: v.min(skipna=False))
    return runs.merge(smallest, how="left")


def at_length(lengths: pd.DataFrame, head: str, length: int) -> pd.DataFrame:
    """Per run: one head's measured accuracy at one length (``offset, seed, value``)."""
    rows = lengths[(lengths.model == head) & (lengths.length == length)]
    return rows[["offset", "seed"]].assign(value=rows.accuracy.values)
