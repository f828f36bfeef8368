"""Chapter 6's carrier test: is each retrieval head's kernel closer to its aligned carrier than random kernels that
solve the task as efficiently (a rank test per head, pooled over heads and networks), and the test's power."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy.stats import chi2

from ...analysis.carrier import (
    FEASIBLE_QUANTILE,
    carrier_phases,
    carrier_r2,
    explained_variance,
)
from ...analysis.planes import (
    MIN_NORM_RCOND,
    Planes,
    coefficients,
    margin_rows,
    plane_features,
    planes_of,
    projected_kernel,
)
from ...model.heads import HeadRunConfig
from ...model.seeding import derive_seed
from ...model.training import TrainedRun
from ..common import map_stacked
from .registered import (
    CARRIER_DRAWS,
    CARRIER_LEVEL,
    CHAPTER3_HEAD,
    CONTROL_HEADS,
    IDENTIFIABLE,
    KERNEL_RCOND,
    MAX_FALSI_STEPS,
    POWER_MIXES,
    POWER_REPLICATES,
)

if TYPE_CHECKING:  # the chapter's parameters, for the annotations only
    from . import Parameters


def centred_coefficients(kernel: np.ndarray, freqs: np.ndarray, rcond: float) -> tuple[np.ndarray, np.ndarray]:
    """The minimum-norm coefficients ``c`` whose kernel ``psi . c`` equals ``kernel`` on the offsets
    ``0 .. len(kernel) - 1`` up to a constant (features centred: softmax ignores constants), keeping only the
    coefficient directions those offsets show with singular value at least ``rcond`` of the largest; and the projector
    onto those directions."""
    features = plane_features(freqs, np.arange(len(kernel)))
    centred = features - features.mean(axis=0)
    inverse = np.linalg.pinv(centred, rcond=rcond)
    kernel = np.asarray(kernel, dtype=np.float64)
    return inverse @ (kernel - kernel.mean()), inverse @ centred


def rotary_fit_r2(kernel: np.ndarray, freqs: np.ndarray) -> float:
    """Variance share of a head's measured kernel, over every measured offset, explained by planes fitted to it (least
    squares on the rotary features plus a constant): how close the network's kernel is to the rotary form ``psi . c``
    that a single head has exactly."""
    c, _ = centred_coefficients(kernel, freqs, MIN_NORM_RCOND)
    return explained_variance(np.asarray(kernel, dtype=np.float64), plane_features(freqs, np.arange(len(kernel))) @ c)


def visible_coefficients(kernel: np.ndarray, freqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What the training offsets ``0 .. len(kernel) - 1`` show of a kernel (:func:`centred_coefficients` at
    ``KERNEL_RCOND``). Nothing beyond the training range enters, so noise or drift there cannot inflate the
    coefficients. A measured kernel is noisy (content-averaged over a few sequences), and a direction seen with singular
    value ``s`` (relative to the largest) multiplies its noise by ``1 / s``, so only the directions with
    ``s >= KERNEL_RCOND`` count as seen; below that a kernel's amplitudes would be its noise."""
    return centred_coefficients(kernel, freqs, KERNEL_RCOND)


def seen_directions(freqs: np.ndarray, train_length: int) -> int:
    """How many coefficient directions the training offsets show above ``KERNEL_RCOND`` (what a kernel's reading keeps)."""
    return int(round(np.trace(visible_coefficients(np.zeros(train_length), freqs)[1])))


def efficiency_matched_kernel(g: np.ndarray, direction: np.ndarray, margin: float, norm: float,
                              visible: np.ndarray, tolerance: float = 1e-4) -> np.ndarray:
    """A random kernel as margin-efficient as the head: the projection (onto ``g c >= margin``) of ``s * direction``,
    restricted to the visible directions, with the start's length ``s`` chosen so that the result has ``norm`` (to a
    relative ``tolerance``). The kernel nearest a start grows with the start's length, from the hard-margin kernel at
    ``s = 0``; the length is found by regula falsi (Illinois), a handful of projections per kernel."""
    def excess(scale: float) -> tuple[float, np.ndarray]:
        c = visible @ projected_kernel(g, scale * direction, margin)
        return float(np.linalg.norm(c)) - norm, c

    low, (f_low, c) = 0.0, excess(0.0)
    if f_low >= 0:  # the head is as efficient as the hard-margin kernel: nothing else is
        return c
    high, (f_high, c) = norm, excess(norm)
    while f_high < 0:
        low, f_low = high, f_high
        high *= 2
        f_high, c = excess(high)
    side = 0
    for _ in range(MAX_FALSI_STEPS):  # the projections are solved numerically: the norm can jump where they switch
        if abs(f_high) <= tolerance * norm or high - low <= 1e-12 * high:
            break
        middle = (low * f_high - high * f_low) / (f_high - f_low)
        f_middle, c_middle = excess(middle)
        if abs(f_middle) <= tolerance * norm:
            return c_middle
        if f_middle < 0:
            low, f_low = middle, f_middle
            f_high = f_high / 2 if side == -1 else f_high
            side = -1
        else:
            high, f_high, c = middle, f_middle, c_middle
            f_low = f_low / 2 if side == 1 else f_low
            side = 1
    return c


def carrier_rank_test(kernel: np.ndarray, freqs: np.ndarray, offset: int, rng: np.random.Generator,
                      draws: int = CARRIER_DRAWS) -> dict:
    """Is a head's kernel on the training offsets (``kernel``, ``len(kernel) = T``) closer to its aligned carrier than
    kernels that solve the task just as efficiently?

    Both the head and its null are read through what the training offsets show (:func:`visible_coefficients`). The
    null: random directions among the visible ones, each projected onto the kernels that separate the target on every
    training offset by the head's own margin and scaled so that the result has the head's norm
    (:func:`efficiency_matched_kernel`): as efficient as the head (margin per unit norm), otherwise random. A head
    selected for attending to ``k`` has such a margin, so the null already contains everything the selection and the
    head's efficiency force; what it does not contain is a preference for the carrier. The statistic is chapter 3's
    carrier R^2 on the training offsets; ``p = (1 + #{null >= learned}) / (draws + 1)``. For the power, ``mixed[j, i]``
    is the carrier R^2 of ``w_j carrier + (1 - w_j) null_i`` (``w_j`` in ``POWER_MIXES``; the carrier with the head's
    own amplitudes). A head whose kernel does not separate the target on the training offsets is not tested (NaN)."""
    train_length = len(kernel)
    c, visible = visible_coefficients(kernel, freqs)
    g = margin_rows(freqs, offset, train_length)
    margin = float((g @ c).min())
    out = dict(carrier_margin=margin, carrier_r2=np.nan, carrier_p=np.nan, carrier_null_q95=np.nan,
               carrier_null=[], carrier_mixed=[])
    if margin <= 0:
        return out
    learned = carrier_r2(c, freqs, offset, train_length)
    c = c / np.linalg.norm(c)  # the statistic is scale-free; at unit norm the projections converge fast
    directions = rng.standard_normal((draws, len(c))) @ visible.T
    null_kernels = [efficiency_matched_kernel(g, d / np.linalg.norm(d), float((g @ c).min()), 1.0, visible)
                    for d in directions]
    null = np.array([carrier_r2(f, freqs, offset, train_length) for f in null_kernels])
    half = len(freqs)
    aligned = coefficients(Planes(freqs, np.hypot(c[:half], c[half:]), carrier_phases(freqs, offset)))
    mixed = [[carrier_r2(w * aligned + (1 - w) * f, freqs, offset, train_length) for f in null_kernels]
             for w in POWER_MIXES]
    out.update(carrier_r2=learned, carrier_p=float((1 + (null >= learned).sum()) / (draws + 1)),
               carrier_null_q95=float(np.quantile(null, FEASIBLE_QUANTILE)), carrier_null=null.tolist(), carrier_mixed=mixed)
    return out


def pooled_log_p(log_p: np.ndarray, networks: list) -> np.ndarray:
    """The pooled carrier p-value from the heads' log p-values (first axis: heads; any further axes are pooled
    alike): within a network, the smallest of its heads' p-values times their number (Bonferroni: valid however its
    heads depend on each other); across networks, trained independently, Fisher's method."""
    log_p = np.asarray(log_p, dtype=np.float64)
    groups = pd.Series(networks).astype(str)
    per_network = [np.minimum(0.0, np.log(len(index)) + log_p[np.asarray(index)].min(axis=0))  # log min(1, n min p)
                   for index in groups.groupby(groups).groups.values()]
    return chi2.sf(-2 * np.sum(per_network, axis=0), 2 * len(per_network))


def network_pooled(p_values: np.ndarray, networks: list) -> float:
    """:func:`pooled_log_p` of the heads' p-values (NaN without any)."""
    if not len(p_values):
        return float("nan")
    return float(pooled_log_p(np.log(np.asarray(p_values, dtype=np.float64)), list(networks)))


def fisher_pooled(p_values: np.ndarray) -> float:
    """Fisher's method over independent p-values (each its own network in :func:`pooled_log_p`; NaN without any)."""
    return network_pooled(p_values, list(range(len(p_values))))


def pooled_power(nulls: list[np.ndarray], mixed: list[np.ndarray], networks: list, level: float, replicates: int,
                 rng: np.random.Generator) -> np.ndarray:
    """Rejection rate of the pooled carrier test (:func:`pooled_log_p`) at ``level`` against each alternative of
    ``POWER_MIXES``: every head's kernel replaced by one of its mixtures (a draw ``i`` at random), its p-value taken
    against its other ``draws - 1`` null kernels (leaving ``i`` out). At weight 0 this checks the p-values' arithmetic
    (ranks and pooling) under the test's own null; it does not exercise the fit. The mixtures are scored against the
    head's null, not one matched to each mixture's own efficiency, so the power at intermediate weights is an upper
    estimate."""
    if not nulls:
        return np.full(len(POWER_MIXES), np.nan)
    log_p = []
    for null, mix in zip(nulls, mixed, strict=True):
        null, mix = np.asarray(null), np.asarray(mix)
        at_least = (null[None, None, :] >= mix[:, :, None]).sum(-1) - (null[None, :] >= mix)  # leave draw i out
        log_p.append(np.log((1 + at_least) / len(null)))  # (mixes, draws)
    picked = np.stack([lp[:, rng.integers(0, lp.shape[1], replicates)] for lp in log_p])  # (heads, mixes, replicates)
    return (pooled_log_p(picked, networks) <= level).mean(axis=1)


def carrier_power_curve(heads: pd.DataFrame, seed: int, labels: list[str]) -> pd.Series:
    """Power of the pooled carrier test over the retrieval heads labelled ``labels``, indexed by the carrier's weight in
    the alternative (``POWER_MIXES``; weight 0 is the size)."""
    tested = heads[heads.label.isin(labels) & heads.carrier_p.notna()]
    power = pooled_power([np.array(n) for n in tested.carrier_null], [np.array(m) for m in tested.carrier_mixed],
                         network_ids(tested), CARRIER_LEVEL, POWER_REPLICATES,
                         np.random.default_rng(derive_seed(seed, "carrier-power")))
    return pd.Series(power, index=pd.Index(POWER_MIXES, name="carrier weight"), name="power")


def network_ids(heads: pd.DataFrame) -> list[str]:
    """One identifier per trained network (label, offset, seed) for every row of a heads table."""
    return [f"{label}|{offset}|{seed}" for label, offset, seed in zip(heads.label, heads.offset, heads.seed, strict=True)]


def single_head_carrier(run: TrainedRun, _: object) -> dict:
    """In the worker: the carrier test on a trained single head's exact kernel over the training offsets."""
    cfg = run.config
    planes = planes_of(run.model)
    rng = np.random.default_rng(derive_seed(cfg.seed, f"single-head-carrier-k{cfg.offset}"))
    test = carrier_rank_test(planes.profile(np.arange(cfg.train_length)), planes.freqs, cfg.offset, rng)
    return dict(offset=cfg.offset, seed=cfg.seed, **test)


def single_head_control(p: Parameters, progress: bool = True) -> pd.DataFrame:
    """The carrier test's positive control: ``CONTROL_HEADS`` single rotary heads as chapter 3 trains them, at this
    chapter's first offset and training length, each tested like a retrieval head (one row per head)."""
    configs = [HeadRunConfig(kind="rope", offset=p.offsets[0], seed=seed, vocab=p.vocab, train_length=p.train_length,
                             device=p.device, **CHAPTER3_HEAD)
               for seed in range(p.seed_start, p.seed_start + CONTROL_HEADS)]
    return pd.DataFrame(map_stacked(single_head_carrier, [(cfg, None) for cfg in configs], p.workers, progress,
                                    desc="single heads"))


def beats_share(tested: pd.DataFrame) -> float:
    """Share of tested heads whose carrier R^2 beats their own null's 95 % quantile (NaN without heads)."""
    return float((tested.carrier_r2 > tested.carrier_null_q95).mean()) if len(tested) else float("nan")


def carrier_values(heads: pd.DataFrame, labels: list[str], power: pd.Series) -> dict[str, float]:
    """The pooled carrier test over the retrieval heads of the networks labelled ``labels``: its p-value, the heads it
    judges, the share that beat their own null's quantile (in all, at base 10^4, at the identifiable base), its size
    and power (from ``power``, its :func:`carrier_power_curve` over the same heads), and the smallest variance share the
    rotary fit explains."""
    pool = heads[heads.label.isin(labels)]
    tested = pool[pool.carrier_p.notna()]
    return dict(carrier_pooled=network_pooled(tested.carrier_p.to_numpy(), network_ids(tested)),
                carrier_heads=float(len(tested)), carrier_networks=float(len(set(network_ids(tested)))),
                carrier_untested=float(len(pool) - len(tested)),
                carrier_beats_q95=beats_share(tested),
                carrier_fit_r2_min=float(pool.fit_r2.min()) if len(pool) else np.nan,
                carrier_share_standard=beats_share(tested[tested.label == "RoPE"]),
                carrier_share_identifiable=beats_share(tested[tested.label == IDENTIFIABLE]),
                carrier_test_size=float(power.loc[0.0]), carrier_power_half=float(power.loc[0.5]),
                carrier_test_power=float(power.loc[1.0]))


POOLED = "all, pooled"  # the power curve's column for every tested head together


