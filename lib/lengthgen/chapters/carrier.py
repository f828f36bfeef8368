"""Chapter 3 (``03_carrier``): the learned rotary rule, read plane by plane.

A rotary head's offset kernel is a sum of one cosine per rotary plane ``m``:

    f(D) = <q, R_{-D} k> / sqrt(d) = sum_m a_m cos(theta_m D + phi_m),

with amplitude ``a_m = |q_m| |k_m| / sqrt(d)`` and phase ``phi_m = arg q_m - arg k_m``
(``q_m``, ``k_m``: the plane's two coordinates read as a complex number). The
*carrier* for target offset ``k`` is the same sum with every plane in phase at
``D = k``: ``sum_m a_m cos(theta_m (D - k))``, i.e. ``phi_m = -theta_m k``.

Which phases can training see at all? Over the training offsets ``D < T`` a
plane turns by ``theta_m T`` radians. A slow plane (``theta_m T << 1``) is
``a_m cos(phi_m) - a_m sin(phi_m) theta_m D + O((theta_m T)^2)`` there: a
constant, which softmax ignores, plus a ramp. Its phase is only visible through
the ramp, so it is compared with the *matched filter*, the phase of the training
signal projected onto the plane (:func:`matched_filter_phases`), not with the
carrier.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..analysis.carrier import FEASIBLE_QUANTILE, carrier_phases, carrier_r2, coherence, explained_variance, null_coherence
from ..analysis.planes import (
    Planes,
    amplitude_norm,
    coefficients,
    group_margin_kernel,
    hard_margin_kernel,
    margin_rows,
    min_norm_interpolant,
    plane_features,
    plane_sum,
    planes_from_vectors,
    planes_of,
    projected_kernel,
    wrap,
)
from ..book.parameters import parameter
from ..model.heads import HeadRunConfig
from ..model.seeding import derive_seed
from ..model.training import TrainedRun
from .common import Execution, HeadTraining, head_run_configs, map_stacked

FEASIBLE_DRAWS = 50  # random kernels per run that fit the training offsets as well as the head does
NULL_QUANTILE = 0.999  # the quantile of the random-phase coherence null a run must clear


@dataclass(frozen=True)
class Parameters(HeadTraining, Execution):
    """Chapter 3's parameters."""

    chapter = "03_carrier"
    rope_base: float = parameter("RoPE base b of the frequencies b^(-2m/d)", 2.0, 1e9)
    min_turn: float = parameter("radians a plane must turn across the training range to count as identifiable", 0.0, 1e3)
    null_draws: int = parameter("random-phase kernels drawn for the null distribution", 100, 1_000_000)
    energy: float = parameter("share of squared singular values that defines the effective rank", 0.5, 0.999999)
    far_factor: int = parameter("offsets beyond T on which the alternatives are scored, up to far_factor x T", 2, 4096)


def training_contrast(offset: int, train_length: int) -> np.ndarray:
    """Gradient signal on ``f(D)`` at uniform attention, summed over training queries.

    For every query ``t`` in ``[k, T)`` the cross-entropy gradient pushes ``f(k)`` up by
    one and every visible offset ``D <= t`` down by its attention ``1/(t+1)``.
    """
    contrast = np.zeros(train_length)
    for t in range(offset, train_length):
        contrast[offset] += 1.0
        contrast[: t + 1] -= 1.0 / (t + 1)
    return contrast


def matched_filter_phases(freqs: np.ndarray, offset: int, train_length: int) -> np.ndarray:
    """Phase of the training contrast projected onto each plane: ``arg sum_D c(D) e^{-i theta_m D}``.

    Gradient descent on a plane's complex coefficient ``a e^{i phi}`` moves it along this
    projection, so it is the phase a plane acquires early in training. For fast planes the
    uniform part averages out and it equals the carrier phase ``-theta_m k``; for slow planes
    it is the carrier phase turned by about +-pi/2: a ramp across the training range.
    """
    offsets = np.arange(train_length)
    contrast = training_contrast(offset, train_length)
    projection = (contrast[None, :] * np.exp(-1j * freqs[:, None] * offsets[None, :])).sum(1)
    return np.angle(projection)


def weighted_circular_error(weights: np.ndarray, errors: np.ndarray) -> float:
    """Weighted mean absolute phase error (radians), errors wrapped to ``(-pi, pi]``."""
    return float((weights * np.abs(wrap(errors))).sum() / weights.sum())


def offset_logit_matrix(planes: Planes, length: int, phases: np.ndarray | None = None) -> np.ndarray:
    """The full ``length x length`` logit matrix ``f(t - s)`` (both signs of offset), optionally with other phases."""
    phase = planes.phase if phases is None else phases
    grid = np.arange(length)
    offsets = (grid[:, None] - grid[None, :]).ravel()
    return plane_sum(planes.amplitude, phase, planes.freqs, offsets).reshape(length, length)


def position_features(freqs: np.ndarray, length: int) -> np.ndarray:
    """RoPE features ``[cos(theta_m t), sin(theta_m t)]`` of positions ``t < length``: every logit matrix's column space."""
    angles = np.arange(length)[:, None] * freqs[None, :]
    return np.concatenate([np.cos(angles), np.sin(angles)], axis=1)


def singular_values(matrix: np.ndarray) -> np.ndarray:
    """Singular values normalized by the largest."""
    s = np.linalg.svd(matrix, compute_uv=False)
    return s / s[0]


def rank_for_energy(normalized_sv: np.ndarray, energy: float) -> int:
    """Fewest singular values holding ``energy`` of the squared Frobenius norm."""
    cumulative = np.cumsum(normalized_sv**2) / np.sum(normalized_sv**2)
    return int(np.searchsorted(cumulative, energy) + 1)


def snapshot_steps(steps: int) -> tuple[int, ...]:
    """Training steps at which the direction towards the max-margin kernel is read: 10, 30, 100, ... and the last."""
    marks = [m for m in (10, 30, 100, 300, 1000, 3000, 10_000, 30_000) if m < steps]
    return (*marks, steps)


def fitted(model: np.ndarray, target: np.ndarray, train_length: int) -> np.ndarray:
    """``alpha * model + beta`` with ``alpha, beta`` fitted to ``target`` on the training offsets only."""
    design = np.stack([model[:train_length], np.ones(train_length)], axis=1)
    alpha, beta = np.linalg.lstsq(design, target[:train_length], rcond=None)[0]
    return alpha * model + beta


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def feasible_kernels(g: np.ndarray, c_learned: np.ndarray, draws: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Kernels that fit the training offsets as well as the learned one and are otherwise random: each is the kernel
    nearest to a random start of the learned norm that separates the target by the learned margin everywhere."""
    margin = float((g @ c_learned).min())
    starts = rng.standard_normal((draws, len(c_learned)))
    starts *= np.linalg.norm(c_learned) / np.linalg.norm(starts, axis=1, keepdims=True)
    return [projected_kernel(g, start, margin) for start in starts]


def selection(run: TrainedRun, p: Parameters, rng: np.random.Generator) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """Which of the kernels that fit the training offsets the head selected, and what each does beyond ``T``.

    Alternatives on the head's own features: the l2 and the amplitude-l1 (group) max-margin kernels, the minimum-norm
    kernel equal to the learned one on ``[0, T)``, the carrier (learned amplitudes, phases aligned at ``k``), and random
    kernels that fit the training offsets with the head's margin (:func:`feasible_kernels`). The first four are scaled
    to the learned kernel on the training offsets only, then scored on ``[T, far_factor T)``.
    """
    cfg, head = run.config, run.model
    T, k = cfg.train_length, cfg.offset
    planes = planes_of(head)
    freqs = planes.freqs
    far = np.arange(p.far_factor * T)
    psi = plane_features(freqs, far)
    c_learned = coefficients(planes)
    learned = psi @ c_learned
    g = margin_rows(freqs, k, T)
    c_l2, c_group = hard_margin_kernel(g), group_margin_kernel(g)
    c_min_norm = min_norm_interpolant(freqs, learned[:T])
    carrier = plane_sum(planes.amplitude, carrier_phases(freqs, k), freqs, far)
    kernels = {"group max-margin": psi @ c_group, "l2 max-margin": psi @ c_l2, "min-norm interpolant": psi @ c_min_norm,
               "carrier": carrier}
    beyond = slice(T, None)
    scores = {name: explained_variance(learned[beyond], fitted(kernel, learned, T)[beyond]) for name, kernel in kernels.items()}
    feasible = feasible_kernels(g, c_learned, FEASIBLE_DRAWS, rng)
    feasible_r2 = np.array([carrier_r2(c, freqs, k, T) for c in feasible])
    feasible_cos = np.array([cosine(c, c_group) for c in feasible])
    feasible_cos_l2 = np.array([cosine(c, c_l2) for c in feasible])
    learned_margin = float((g @ c_learned).min())
    row = dict(offset=k, seed=cfg.seed, cos_group=cosine(c_learned, c_group), cos_l2=cosine(c_learned, c_l2),
               cos_min_norm=cosine(c_learned, c_min_norm),
               null_share=float(np.linalg.norm(c_learned - c_min_norm) / np.linalg.norm(c_learned)),
               margin_ratio_l2=learned_margin / np.linalg.norm(c_learned) * np.linalg.norm(c_l2),
               margin_ratio_group=learned_margin / amplitude_norm(c_learned) * amplitude_norm(c_group),
               carrier_r2=carrier_r2(c_learned, freqs, k, T), feasible_r2_mean=float(feasible_r2.mean()),
               feasible_r2_q=float(np.quantile(feasible_r2, FEASIBLE_QUANTILE)), feasible_cos_mean=float(feasible_cos.mean()),
               feasible_cos_q=float(np.quantile(feasible_cos, FEASIBLE_QUANTILE)),
               feasible_cos_l2_q=float(np.quantile(feasible_cos_l2, FEASIBLE_QUANTILE)),
               **{f"r2_beyond_{name.split()[0].replace('-', '_')}": value for name, value in scores.items()})
    direction = []
    for step, state in sorted(run.snapshots.items()):
        c_t = coefficients(planes_from_vectors(state["q"], state["k"], head.freqs.cpu(), head.convention))
        direction.append(dict(offset=k, seed=cfg.seed, step=step, cos_group=cosine(c_t, c_group), cos_l2=cosine(c_t, c_l2)))
    profiles = pd.DataFrame(dict(offset_k=k, seed=cfg.seed, delta=far, learned=learned,
                                 **{name: fitted(kernel, learned, T) for name, kernel in kernels.items()}))
    return row, pd.DataFrame(direction), profiles


@dataclass
class CarrierStudy:
    """Chapter 3's tables: one row per run, per (run, plane) and per (run, singular value)."""

    configs: list[HeadRunConfig]
    per_run: pd.DataFrame
    per_plane: pd.DataFrame
    spectra: pd.DataFrame
    profiles: pd.DataFrame  # offset, seed, offset_k, learned, carrier
    selection: pd.DataFrame  # one row per run: cosines to the alternatives, null share, scores beyond T
    direction: pd.DataFrame  # offset, seed, step, cos_group, cos_l2: the head's direction during training
    far_profiles: pd.DataFrame  # offset_k, seed, delta, learned and every alternative (scaled) out to far_factor T


def measure_run(
    run: TrainedRun, p: Parameters, rng: np.random.Generator,
) -> tuple[dict, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every carrier measurement of one trained head."""
    T, k = run.config.train_length, run.config.offset
    planes = planes_of(run.model)
    freqs, amp = planes.freqs, planes.amplitude
    offsets = np.arange(T)
    learned = planes.profile(offsets)
    carrier = plane_sum(amp, carrier_phases(freqs, k), freqs, offsets)
    identifiable = freqs * T > p.min_turn
    err_carrier = wrap(planes.phase - carrier_phases(freqs, k))
    err_filter = wrap(planes.phase - matched_filter_phases(freqs, k, T))
    w = amp[identifiable]
    observed = coherence(w, err_carrier[identifiable])
    null = null_coherence(w, p.null_draws, rng)
    null_phases = rng.uniform(-np.pi, np.pi, size=(p.null_draws // 100 or 1, len(freqs)))
    null_r2 = [explained_variance(plane_sum(amp, ph, freqs, offsets), carrier) for ph in null_phases]
    slow = ~identifiable
    learned_sv = singular_values(offset_logit_matrix(planes, T))
    null_spectra = [singular_values(offset_logit_matrix(planes, T, ph)) for ph in null_phases]
    null_sv = np.mean(null_spectra, axis=0)
    encoding_sv = singular_values(position_features(freqs, T))
    energy = p.energy
    seed = run.config.seed
    row = dict(
        offset=k,
        seed=seed,
        argmax_offset=int(learned.argmax()),
        n_identifiable=int(identifiable.sum()),
        coherence=observed,
        null_mean=float(null.mean()),
        null_q999=float(np.quantile(null, NULL_QUANTILE)),
        p_value=float((1 + (null >= observed).sum()) / (1 + len(null))),
        circular_error=weighted_circular_error(w, err_carrier[identifiable]),
        slow_error_carrier=weighted_circular_error(amp[slow], err_carrier[slow]) if slow.any() else np.nan,
        slow_error_filter=weighted_circular_error(amp[slow], err_filter[slow]) if slow.any() else np.nan,
        r2_carrier=explained_variance(learned, carrier),
        r2_null_mean=float(np.mean(null_r2)),
        rank_learned=rank_for_energy(learned_sv, energy),
        rank_null=float(np.mean([rank_for_energy(sv, energy) for sv in null_spectra])),
        rank_encoding=rank_for_energy(encoding_sv, energy),
    )
    per_plane = pd.DataFrame(dict(offset=k, seed=seed, plane=np.arange(len(freqs)), freq=freqs, turn=freqs * T,
                                  amplitude=amp, identifiable=identifiable, error_carrier=err_carrier,
                                  error_filter=err_filter))
    spectra = pd.concat([pd.DataFrame(dict(offset=k, seed=seed, kind=kind, index=np.arange(1, len(sv) + 1), value=sv))
                         for kind, sv in (("learned", learned_sv), ("random phases", null_sv), ("RoPE features", encoding_sv))])
    profiles = pd.DataFrame(dict(offset_k=k, seed=seed, offset=offsets, learned=learned - learned.mean(),
                                 carrier=carrier - carrier.mean()))
    return row, per_plane, spectra, profiles


def measure_trained(run: TrainedRun, p: Parameters) -> tuple:
    """In the worker, after training: the head's carrier (null draws seeded by the run), and what it selected."""
    rng = np.random.default_rng(derive_seed(run.config.seed, f"carrier-null-{run.config.offset}"))
    feasible_rng = np.random.default_rng(derive_seed(run.config.seed, f"carrier-feasible-{run.config.offset}"))
    return (*measure_run(run, p, rng), *selection(run, p, feasible_rng))


def carrier_study(p: Parameters, progress: bool = True) -> CarrierStudy:
    """Train RoPE heads over offsets x seeds and measure each one's carrier, in ``p.workers`` processes."""
    configs = head_run_configs(p, "rope", rope_base=p.rope_base)
    measured = map_stacked(measure_trained, [(cfg, p) for cfg in configs], p.workers, progress,
                           snapshots=snapshot_steps(p.steps))
    rows, planes, spectra, profiles, chosen, direction, far = zip(*measured, strict=True)
    return CarrierStudy(configs, pd.DataFrame(list(rows)), pd.concat(planes, ignore_index=True),
                        pd.concat(spectra, ignore_index=True), pd.concat(profiles, ignore_index=True),
                        pd.DataFrame(list(chosen)), pd.concat(direction, ignore_index=True), pd.concat(far, ignore_index=True))


def claim_values(study: CarrierStudy) -> dict[str, object]:
    """Every claim's value from the study (a per-run claim's: one row per run, with ``value``)."""
    runs, chosen, direction = study.per_run, study.selection, study.direction
    rises = direction.sort_values("step").groupby(["offset", "seed"]).cos_group.agg(lambda s: s.iloc[-1] - s.iloc[0])
    return dict(peak_at_k=runs.assign(value=(runs.argmax_offset - runs.offset).abs()),
                carrier_r2=runs.assign(value=runs.r2_carrier),
                carrier_specific=chosen.assign(value=chosen.carrier_r2 - chosen.feasible_r2_q),
                mm_direction_excess=(chosen.cos_group - chosen.feasible_cos_q).max(),
                l2_direction_excess=(chosen.cos_l2 - chosen.feasible_cos_l2_q).max(),
                direction_rise_min=rises.min(),
                group_over_l2_runs=int((chosen.cos_group > chosen.cos_l2).sum()),
                rank_above_encoding=int((runs.rank_learned > runs.rank_encoding).sum()),
                carrier_r2_feasible=chosen.feasible_r2_mean.mean(),
                mm_beyond_T=(chosen.r2_beyond_group - chosen.r2_beyond_min_norm).mean(),
                r2_beyond_min_norm=chosen.r2_beyond_min_norm.mean(), r2_beyond_carrier=chosen.r2_beyond_carrier.mean(),
                null_share=chosen.null_share.mean(), cos_l2_mean=chosen.cos_l2.mean(),
                coherence_mean=runs.coherence.mean(), coherence_over_null=int((runs.coherence > runs.null_q999).sum()),
                rank_gap_max=(runs.rank_learned - runs.rank_null).abs().max(),
                slow_error_filter=runs.slow_error_filter.mean())
