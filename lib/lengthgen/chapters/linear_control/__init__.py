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

from ...book.parallel import map_runs
from ...book.parameters import parameter
from ...model.evaluation import doubling_lengths
from ...model.heads import LinearRunConfig, WeightMap, unit_key
from ...model.seeding import generator
from ...model.training import train
from ..common import GB, Execution, Head, LengthSweep, Seeds, Task, power_of_two_at_least
from .interpolants import (
    LinearEval,
    evaluate_linear,
    expected_squared_error,
    gradient_descent,
    gradient_descent_closed_form,
    min_norm_interpolant,
    stable_lr,
    task_gram,
)
from .law import (
    COLLAPSE_ACCURACY,
    LawSetting,
    argmax_accuracy,
    collapse_law,
    crossing_length,
    law_and_measurement,
    least_bad_interpolant,
    plane_amplitudes,
)

MAPS: dict[WeightMap, str] = {"linear": "linear f (unnormalized)", "squared": "normalized f²", "exp": "softmax exp f"}
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


def claim_values(study: LinearControlStudy, p: Parameters) -> dict[str, object]:
    """Every claim's value from the study (a per-run claim's: one row per run, with ``value``)."""
    T, longest, runs = p.train_length, p.longest, len(p.offsets) * p.seeds
    sel, lengths, laws, abl = study.selection, study.lengths, study.laws, study.ablation
    sgd_full = sel[(sel.frequencies == "full-band") & (sel.method == "SGD on tokens")]
    gd_std = sel[(sel.frequencies == "standard") & (sel.method == "GD (full batch)")]
    linear = lengths[lengths.model == "linear (SGD from zero)"]
    error_z = (linear.squared_error - linear.expected_squared_error).abs() / linear.squared_error_se
    lin_long = linear[linear.length == longest].sort_values(["offset", "seed"])
    quarter = linear[linear.length == longest // 4].sort_values(["offset", "seed"])
    slopes = np.log(lin_long.expected_squared_error.values / quarter.expected_squared_error.values) / np.log(4)
    controls = study.controls.groupby("map").value.max()
    least_bad = laws[laws.model == "least-bad linear interpolant"].set_index(["offset", "seed"])
    collapse = laws.pivot_table(index=["offset", "seed"], columns="model", values="collapse_length")
    gaussian = lengths.assign(dev=(lengths.accuracy - lengths.gaussian).abs()).groupby("model").dev.max()
    softmax = lengths[lengths.model == "softmax exp f (Adam)"]
    return dict(
        sgd_to_pinv=sgd_full.rel_error_to_pinv.max(), gd_closed_form=gd_std.rel_error_to_closed_form.max(),
        gd_far_from_pinv=gd_std.rel_error_to_pinv.min(),
        replicates_differ=replicate_distance(study.kernels, T) if len(sgd_full) > 1 else np.inf,
        linear_fits_T=lengths[lengths.length == T].accuracy.min(),
        ablation_fits_T=abl[abl.method != "SGD from zero"].fit_residual.max(),
        family_bound=family_bound(T, longest, p.dim, p.vocab), error_law=error_z.max(),
        law_linear=per_run(law_deviation(lengths, "linear (SGD from zero)"), runs),
        linear_longest=per_run(at_length(lengths, "linear (SGD from zero)", longest), runs),
        softmax_beats_linear=per_run(softmax_margin_where_linear_collapsed(lengths), runs),
        no_interpolant_extrapolates=per_run(at_length(lengths, "least-bad linear interpolant", longest), runs),
        squared_longest=per_run(at_length(lengths, "normalized f² (Adam)", longest), runs),
        error_slope=slopes.min(), law_squared=law_deviation(lengths, "normalized f² (Adam)").value.max(),
        law_random_q=controls["linear"], law_squared_random_q=controls["squared"],
        min_norm_vs_least_bad=(least_bad.min_norm_error_longest / least_bad.expected_error_longest).mean(),
        collapse_linear=collapse["linear (SGD from zero)"].median(),
        collapse_squared=collapse["normalized f² (Adam)"].median(),
        softmax_longest=softmax[softmax.length == longest].accuracy.mean(),
        law_softmax=law_deviation(lengths, "softmax exp f (Adam)").value.max(),
        gaussian_law_linear=gaussian["linear (SGD from zero)"], gaussian_law_squared=gaussian["normalized f² (Adam)"],
        adam_distance=abl[abl.method == "Adam from zero"].rel_error_to_pinv.mean(),
        random_init_distance=abl[abl.method == "SGD from random init"].rel_error_to_pinv.mean())
