"""Chapter 6 (``06_transfer``): the single-head phenomena inside a small transformer.

For every trained network this module measures

* accuracy against length (:func:`lengthgen.model.evaluation.length_sweep`);
* **equivariance**: the same token window fed at position 0 and at position ``P``
  gives the same attention logits in every layer and head (RoPE, NoPE) or not (APE);
* **APE rows**: table rows at positions ``>= T`` compared bitwise with their initialization;
* **retrieval heads**: the heads that put most of their mass on offset ``k`` in range;
* **the kernel** of each head: its logit averaged over content at every offset
  (``kappa(D)``), and the plane decomposition of its mean query and key vectors, read
  as in chapter 3 (peak, phase coherence against a random-phase null);
* **hijacking**: the first offset beyond ``T`` whose kernel exceeds the kernel at the
  target. Once a sequence is long enough to contain it, the retrieval head's softmax
  mass moves there and the prediction fails;
* **the masking test** of that account: at the length where a network's last position collapses,
  offsets are taken out of its retrieval heads' view (logit ``-inf``) and the accuracy measured
  again: the hijacking offsets read from the measured kernel, the offsets where the kernel of the
  mean query and key (training-length quantities only) beats the target, and controls.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from scipy.stats import chi2

from ..book.parameters import ParameterError, parameter
from ..book.paths import BOOK_DIR, SWEEPS_DIR
from ..book.rerun import default_parameters
from ..model.encodings import identifiable_base, rope_frequencies
from ..model.evaluation import doubling_lengths, length_sweep
from ..model.heads import HeadRunConfig
from ..model.seeding import derive_seed, generator
from ..model.sequence_tasks import sequence_length
from ..model.tasks import task_batch
from ..model.training import TrainedRun
from ..model.transformer import NetworkRunConfig, Transformer, TransformerConfig
from .carrier import FEASIBLE_QUANTILE, carrier_phases, carrier_r2, coherence, explained_variance, null_coherence
from .common import GB, Execution, LengthSweep, Seeds, Task, map_stacked, power_of_two_at_least
from .held_out import HeldOutRuns
from .network_probes import (
    COLLAPSE_ACCURACY,
    EVAL_SEQUENCE_CHUNK,
    content_averaged_kernels,
    head_target_mass,
    mean_query_key,
)
from .planes import (
    MIN_NORM_RCOND,
    Planes,
    coefficients,
    margin_rows,
    plane_features,
    planes_from_vectors,
    planes_of,
    projected_kernel,
    wrap,
)
from .zoo_networks import PREDICTED_VERDICTS, NetworkZooStudy, cell_numbers, cell_table, committed_runs
from .zoo_networks import Parameters as ZooParameters

HELD_OUT_SEEDS = tuple(range(300, 320))  # the committed sweep's runs draw here, reserved before any of them ran
RESTORE_MARGIN_SE = 3.0  # a restored answer also gains this many worst-case standard errors (0.5 / sqrt(mask_batch))
MASKING_CHECKS = ("masking_restores", "predicted_mask_restores")  # the masking test's evidence checks
MASK_CONDITIONS = ("unmasked", "hijackers", "predicted", "control", "runners_up", "complement", "all_far")
IDENTIFIABLE_TURNS = 1.0  # a plane is identifiable when it turns at least this many full circles within T
COHERENCE_QUANTILE = 0.999  # the quantile of the random-phase null that a head's coherence is compared with (reported)
MEASURABLE_RADIANS = 1.0  # a plane's phase is measurable within T when it turns at least this far (the coherence test)
IDENTIFIABLE = "RoPE, all planes identifiable"  # RoPE at the identifiable base
TURNING_ONLY = "RoPE, turning planes only"  # the ablation: only the identifiable planes rotate (rope_planes)
MAX_FALSI_STEPS = 60  # regula falsi steps for a null kernel's length (it stops sooner once the bracket is exhausted)
KERNEL_RCOND = 1e-3  # directions the training offsets show below this (relative) singular value are lost in kappa's noise
CARRIER_DRAWS = 60  # task-solving random kernels per retrieval head: the carrier test's null, conditional on the task
CARRIER_LEVEL = 1e-3  # level of the pooled carrier test (the threshold of carrier_pooled)
POWER_MIXES = (0.0, 0.25, 0.5, 0.75, 1.0)  # weight of the aligned carrier in the alternatives the power is computed for
POWER_REPLICATES = 4000  # draws of one alternative kernel per head when computing the pooled test's power
CONTROL_HEADS = 5  # single rotary heads (chapter 3's, at this chapter's offset and length) that the carrier test is run on
FULL_SEQUENCE_SWEEP = "zoo_networks"  # chapter 11's committed sweep: copy and reversal in this decoder, read, not retrained
FULL_SEQUENCE_ENCODINGS = ("rope", "ape", "nope")  # the encodings of this chapter, in chapter 11's names
CHAPTER3_HEAD = dict(dim=64, steps=1000, batch=64, lr=0.01, rope_base=10_000.0)  # chapter 3's defaults (a test keeps them)


def identifiable_planes(freqs: np.ndarray, train_length: int) -> np.ndarray:
    """Which planes are identifiable, the book's one definition: a plane is identifiable when it turns at least
    ``IDENTIFIABLE_TURNS`` full circle within the training length, ``theta_m T >= 2 pi`` (up to rounding): training then
    shows it every phase it will ever take. The identifiable base makes every plane so. A weaker notion, a phase that
    is *measurable* within ``T`` (``theta_m T > MEASURABLE_RADIANS``), is what the coherence test needs."""
    return np.asarray(freqs) * train_length >= 2 * math.pi * IDENTIFIABLE_TURNS * (1 - 1e-9)


@dataclass(frozen=True)
class Parameters(Seeds, Task, LengthSweep, Execution):
    """Chapter 6's parameters."""

    chapter = "06_transfer"
    dim: int = parameter("model width d (divisible by heads, even head size)", 8, 1024)
    layers: int = parameter("transformer blocks", 1, 24)
    heads: int = parameter("attention heads per block", 1, 64)
    steps: int = parameter("Adam steps per shift run", 1, 100_000)
    batch: int = parameter("training sequences per step", 1, 4096)
    lr: float = parameter("Adam learning rate", 1e-6, 1.0)
    kernel_batch: int = parameter("sequences for the kernels and the per-head target mass", 1, 256)
    retrieval_mass: float = parameter("in-range mass on offset k that marks a retrieval head", 0.0, 1.0)
    null_draws: int = parameter("random-phase kernels drawn for the coherence null", 100, 1_000_000)
    compare_heads: int = parameter("heads of the second RoPE variant (more rotary planes per head)", 1, 64)
    fixed_turns: float = parameter("full turns of the slowest plane within T, identifiable-base variant", 0.1, 100.0)
    mask_batch: int = parameter("sequences per condition (unmasked, hijackers masked, controls) in the masking test",
                                16, 65_536)
    committed_sweep: str = parameter("committed sweep of this chapter (a folder of data/sweeps) whose runs on held-out "
                                     "seeds are read beside this run's; '' for none (what the sweep's own runs use)")

    def check(self) -> None:
        super().check()
        for name in ("heads", "compare_heads"):
            n = getattr(self, name)
            if self.dim % n or (self.dim // n) % 2 or self.dim // n < 4:
                valid = [h for h in range(1, self.dim + 1)
                         if self.dim % h == 0 and (self.dim // h) % 2 == 0 and self.dim // h >= 4]
                raise ParameterError(f"parameter {name!r} = {n} must split dim = {self.dim} into heads of even size >= 4: "
                                     f"valid values are {valid}")
        power_of_two_at_least("length_factor", self.length_factor, 4, "the chapter compares networks at 2T and 4T")
        if self.train_length < 2 * math.pi * IDENTIFIABLE_TURNS:
            raise ParameterError(f"parameter 'train_length' = {self.train_length} is out of range: even the fastest rotary "
                                 f"plane (one radian per token) must turn a full circle within T for the turning-planes "
                                 f"network; must be in [{math.ceil(2 * math.pi * IDENTIFIABLE_TURNS)}, 1024]")
        if self.committed_sweep and not (SWEEPS_DIR / self.committed_sweep / "spec.yaml").exists():
            known = sorted(p.parent.name for p in SWEEPS_DIR.glob("*/spec.yaml"))
            raise ParameterError(f"parameter 'committed_sweep' = {self.committed_sweep!r} is out of range: no "
                                 f"data/sweeps/{self.committed_sweep}/spec.yaml; committed sweeps: {known} (or '')")
        if self.committed_sweep and set(self.seed_list) & set(HELD_OUT_SEEDS):
            raise ParameterError(f"parameter 'seed_start' = {self.seed_start} is out of range: with a committed sweep, "
                                 f"this page's seeds must avoid the sweep's held-out seeds {HELD_OUT_SEEDS[0]} .. "
                                 f"{HELD_OUT_SEEDS[-1]}")
        base_floor = 2.0
        head_dim = self.dim // self.heads
        most = self.train_length / (2 * math.pi * base_floor ** ((head_dim - 2) / head_dim))
        if self.fixed_turns > most:
            raise ParameterError(f"parameter 'fixed_turns' = {self.fixed_turns} is out of range: with train_length = "
                                 f"{self.train_length} and head size {head_dim} the identifiable base would fall below "
                                 f"{base_floor:g}; must be in [0.1, {most:.3g}]")

    def memory_gb(self) -> float:
        attention = 12 * self.layers * self.heads * self.longest**2  # logits, softmax and a diagonal copy, float32
        return self.workers * max(self.kernel_batch, EVAL_SEQUENCE_CHUNK, 4) * attention / GB

    def memory_rule(self) -> str:
        return ("per worker: 12 bytes x layers x heads x longest length^2 for every sequence whose attention "
                "logits are read at once (kernel_batch, or 16 when scoring)")


@torch.no_grad()
def shift_deviation(run: TrainedRun, start: int, dtype: torch.dtype, batch: int = 4) -> float:
    """Largest |logit(window at ``start``) - logit(window at 0)| over layers and heads, relative to the largest logit."""
    model = copy.deepcopy(run.model).to(dtype)
    cfg = run.config
    tokens, _ = task_batch(cfg.task, batch, cfg.train_length, cfg.vocab, cfg.offset, generator(cfg.seed, "shift-test"))
    tokens = tokens.to(model.device)
    base = model.attention_logits(tokens, 0)
    moved = model.attention_logits(tokens, start)
    worst, scale = 0.0, 0.0
    for a, b in zip(base, moved, strict=True):
        a, b = a.cpu(), b.cpu()
        finite = torch.isfinite(a)
        worst = max(worst, float((a[finite] - b[finite]).abs().max()))
        scale = max(scale, float(a[finite].abs().max()))
    return worst / scale


def ape_rows_untouched(run: TrainedRun) -> bool:
    """Whether every APE row at a position ``>= T`` is bitwise equal to its initial value."""
    T = run.config.train_length
    return bool(torch.equal(run.model.position[T:].detach().cpu(), run.initial_state["position"][T:].cpu()))


def analyse_rope_run(run: TrainedRun, p: Parameters, rng: np.random.Generator) -> tuple[list[dict], pd.DataFrame]:
    """Per retrieval head: kernel peak, plane coherence, carrier bound, and the first hijacking offset."""
    cfg = run.config
    T, k = cfg.train_length, cfg.offset
    longest = p.length_factor * T
    mass = head_target_mass(run, T, p.eval_batch)
    kernels = content_averaged_kernels(run, longest, p.kernel_batch)
    freqs = run.model.blocks[0].attn.freqs.cpu()
    rows, profiles = [], []
    for layer, head in zip(*np.nonzero(mass >= p.retrieval_mass), strict=True):
        kappa = kernels[layer, head]
        q, kv = mean_query_key(run, layer, head, p.eval_batch)
        planes = planes_from_vectors(q, kv, freqs)
        measurable = planes.freqs * T > MEASURABLE_RADIANS
        err = wrap(planes.phase + planes.freqs * k)
        w = planes.amplitude[measurable]
        null = null_coherence(w, p.null_draws, rng)
        above = np.nonzero(kappa[T:] > kappa[k])[0]
        fit_r2 = rotary_fit_r2(kappa, planes.freqs)
        carrier = (carrier_rank_test(kappa[:T], planes.freqs, k, rng) if run.config.model.rope_planes is None
                   else {})  # the turning-planes ablation has no rotation in most planes: no carrier to test
        rows.append(dict(fit_r2=fit_r2, **carrier,
            layer=int(layer), head=int(head), mass_in_range=float(mass[layer, head]),
            kernel_argmax=int(kappa[:T].argmax()), mean_kernel_argmax=int(planes.profile(np.arange(T)).argmax()),
            coherence=coherence(w, err[measurable]), null_q999=float(np.quantile(null, COHERENCE_QUANTILE)),
            n_measurable=int(measurable.sum()),
            kernel_at_k=float(kappa[k]), far_max=float(kappa[T:].max()), far_argmax=int(T + kappa[T:].argmax()),
            first_hijack=int(T + above[0]) if len(above) else -1,
            amplitude_sum=float(planes.amplitude.sum()), mean_kernel_at_k=float(planes.profile(np.array([k]))[0]),
        ))
        profiles.append(pd.DataFrame(dict(layer=int(layer), head=int(head), delta=np.arange(longest), kernel=kappa,
                                          predicted=planes.profile(np.arange(longest)))))
    return rows, pd.concat(profiles, ignore_index=True) if profiles else pd.DataFrame()


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


@dataclass
class CarrierSummary:
    """The carrier test over a chapter run's rotary networks."""

    values: dict[str, float]  # the registered numbers (:func:`carrier_values`)
    table: pd.DataFrame  # one row per variant: planes, seen directions, heads, R^2 against the null, pooled p, power
    power: pd.DataFrame  # power by carrier weight: one column per variant, and POOLED


def carrier_summary(heads: pd.DataFrame, p: Parameters, labels: list[str], seed: int) -> CarrierSummary:
    """The carrier test's numbers, its table by variant and its power curves (each computed once)."""
    power = pd.DataFrame({label: carrier_power_curve(heads, seed, [label]) for label in labels})
    power[POOLED] = carrier_power_curve(heads, seed, labels)
    models = dict(transfer_variants(p))
    rows = []
    for label in labels:
        model = models[label]
        tested = heads[(heads.label == label) & heads.carrier_p.notna()]
        freqs = rope_frequencies(model.head_dim, base=model.rope_base).double().numpy()
        rows.append({"label": label, "planes per head": model.head_dim // 2,
                     "seen directions": seen_directions(freqs, p.train_length), "heads": len(tested),
                     "networks": len(set(network_ids(tested))), "fit_r2": tested.fit_r2.median(),
                     "carrier_r2": tested.carrier_r2.mean(), "null_q95": tested.carrier_null_q95.mean(),
                     "beats_q95": int((tested.carrier_r2 > tested.carrier_null_q95).sum()),
                     "pooled_p": network_pooled(tested.carrier_p.to_numpy(), network_ids(tested)),
                     "power at weight 0.5": power.loc[0.5, label]})
    return CarrierSummary(carrier_values(heads, labels, power[POOLED]), pd.DataFrame(rows).set_index("label"), power)


@torch.no_grad()
def last_query_masses(
    run: TrainedRun, heads: list[tuple[int, int, np.ndarray]], lengths: list[int], batch: int
) -> list[tuple[list[float], list[float]]]:
    """For each ``(layer, head, kernel)``: the last query's mass on the target, and on the offsets whose
    kernel beats the target's, at every length (one forward pass per length serves every head)."""
    cfg = run.config
    out = [([], []) for _ in heads]
    for n in lengths:
        tokens, _ = task_batch(cfg.task, batch, n, cfg.vocab, cfg.offset, generator(cfg.seed, f"mass-{n}"))
        logits = run.model.attention_logits(tokens.to(run.model.device))
        for (layer, head, kernel), (target, hijacked) in zip(heads, out, strict=True):
            attn = torch.softmax(logits[layer][:, head, -1].cpu(), -1).mean(0).flip(0)  # index = offset
            hijackers = torch.as_tensor(kernel[:n] > kernel[cfg.offset])
            target.append(float(attn[cfg.offset]))
            hijacked.append(float(attn[hijackers].sum()))
    return out


@torch.no_grad()
def forward_with_masked_offsets(model: Transformer, tokens: torch.Tensor,
                                masked: dict[tuple[int, int], torch.Tensor]) -> torch.Tensor:
    """Vocabulary logits ``(batch, length, vocab)`` with, for every ``(layer, head)`` in ``masked``, the listed offsets
    taken out of that head's view (logit ``-inf`` for every query).

    The explicit path of :meth:`Transformer.forward`, block by block from each attention's pre-softmax logits
    (:meth:`CausalSelfAttention.logits`): with nothing masked it is the model's own output up to rounding (tested).
    """
    x = model.embed_tokens(tokens)
    positions = torch.arange(tokens.shape[1], device=x.device)
    offsets = positions[:, None] - positions[None, :]  # (query, key)
    for layer, block in enumerate(model.blocks):
        normed = block.ln_attn(x)
        logits = block.attn.logits(normed)
        for (masked_layer, head), hidden in masked.items():
            if masked_layer == layer and len(hidden):
                logits[:, head] = logits[:, head].masked_fill(torch.isin(offsets, hidden.to(x.device)), float("-inf"))
        _, _, values = block.attn.split_heads(normed)
        mixed = (torch.softmax(logits, -1) @ values).transpose(1, 2).reshape(x.shape)
        x = x + block.attn.proj(mixed)
        x = x + block.mlp(block.ln_mlp(x))
    return model.readout(model.ln_out(x))


def hijacking_offsets(kernel: np.ndarray, offset: int, train_length: int, length: int) -> np.ndarray:
    """The offsets in ``[T, length)`` whose content-averaged logit exceeds the target's ``kernel[offset]``."""
    far = np.arange(train_length, length)
    return far[kernel[far] > kernel[offset]]


def first_collapse(last_accuracy: pd.Series) -> float:
    """The first length (the series' index) whose last-position accuracy is below ``COLLAPSE_ACCURACY``; NaN if none."""
    failed = last_accuracy[last_accuracy < COLLAPSE_ACCURACY]
    return float(failed.index.min()) if len(failed) else float("nan")


def mask_sets(kernel: np.ndarray, predicted: np.ndarray, offset: int, train_length: int, length: int,
              rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The offsets each condition of the masking test hides from one retrieval head, at ``length``.

    ``hijackers``: the far offsets whose measured kernel beats the target's; ``predicted``: those where the kernel of
    the mean query and key (``predicted``, from training-length sequences) beats its value at ``offset``; ``control``
    and ``runners_up``: as many other far offsets (at most all of them), drawn at random or the next below the target
    by the measured kernel; ``complement``: every far offset but the hijackers; ``all_far``: every far offset.
    """
    far = np.arange(train_length, length)
    hidden = hijacking_offsets(kernel, offset, train_length, length)
    others = np.setdiff1d(far, hidden)
    count = min(len(hidden), len(others))
    return dict(hijackers=hidden, predicted=far[predicted[far] > predicted[offset]],
                control=np.sort(rng.choice(others, size=count, replace=False)),
                runners_up=np.sort(others[np.argsort(-kernel[others], kind="stable")[:count]]),
                complement=others, all_far=far)


@torch.no_grad()
def masking_test(run: TrainedRun, heads: list[tuple[int, int, np.ndarray, np.ndarray]], length: int, batch: int,
                 rng: np.random.Generator, stream: str) -> dict:
    """Last-position accuracy at ``length`` on ``batch`` fresh shift sequences (random stream ``stream``) under every
    condition of :func:`mask_sets` and unmasked. ``heads``: ``(layer, head, measured kernel, mean-vector kernel)`` of
    the retrieval heads, each over offsets ``0 .. longest - 1``. Also returns the offsets each condition hides, summed
    over heads, and the layers it touches."""
    cfg = run.config
    per_head = {(layer, head): mask_sets(kernel, predicted, cfg.offset, cfg.train_length, length, rng)
                for layer, head, kernel, predicted in heads}
    conditions = {"unmasked": {}} | {name: {key: torch.as_tensor(sets[name]) for key, sets in per_head.items()}
                                     for name in MASK_CONDITIONS[1:]}
    correct = dict.fromkeys(conditions, 0)
    gen = generator(cfg.seed, stream)
    for start in range(0, batch, EVAL_SEQUENCE_CHUNK):
        tokens, targets = task_batch(cfg.task, min(EVAL_SEQUENCE_CHUNK, batch - start), length, cfg.vocab, cfg.offset,
                                     gen, train=False)
        tokens = tokens.to(run.model.device)
        for name, masks in conditions.items():
            predicted = forward_with_masked_offsets(run.model, tokens, masks)[:, -1].argmax(-1).cpu()
            correct[name] += int((predicted == targets[:, -1]).sum())
    counts = {f"{name}_offsets": sum(len(sets[name]) for sets in per_head.values()) for name in MASK_CONDITIONS[1:]}
    return dict(collapse_length=length, masked_layers=",".join(sorted({str(layer) for layer, _ in per_head})),
                **counts, **{f"accuracy_{name}": hits / batch for name, hits in correct.items()})


def masking_verdicts(masking: pd.DataFrame, batch: int) -> pd.DataFrame:
    """The networks the masking test judges (collapsed on its own batch too), with whether each condition brings the
    last position back: accuracy at least ``COLLAPSE_ACCURACY`` and a gain over the unmasked accuracy of at least
    ``RESTORE_MARGIN_SE`` worst-case standard errors ``0.5 / sqrt(batch)``."""
    judged = masking[masking.accuracy_unmasked < COLLAPSE_ACCURACY].copy()
    margin = RESTORE_MARGIN_SE * 0.5 / math.sqrt(batch)
    for name in MASK_CONDITIONS[1:]:
        accuracy = judged[f"accuracy_{name}"]
        judged[f"restored_{name}"] = (accuracy >= COLLAPSE_ACCURACY) & (accuracy - judged.accuracy_unmasked >= margin)
    return judged


def masking_values(judged: pd.DataFrame) -> dict[str, float]:
    """The masking claims' values over the judged networks (NaN, a failure, when none is judged)."""
    if not len(judged):
        return dict.fromkeys(["masking_restores", "predicted_mask_restores", "masking_beats_control",
                              "masking_beats_runners_up", "complement_restored", "all_far_restored"], float("nan"))
    return dict(masking_restores=judged.restored_hijackers.mean(),
                predicted_mask_restores=judged.restored_predicted.mean(),
                masking_beats_control=(judged.accuracy_hijackers - judged.accuracy_control).mean(),
                masking_beats_runners_up=(judged.accuracy_hijackers - judged.accuracy_runners_up).mean(),
                complement_restored=judged.restored_complement.mean(), all_far_restored=judged.restored_all_far.mean())


def measure_network(run: TrainedRun, job: tuple[str, Parameters]) -> dict:
    """In the worker, after training: measure everything the chapter needs of one network (``job``: its label, the parameters)."""
    label, p = job
    cfg = run.config
    lengths = doubling_lengths(cfg.train_length, p.length_factor)
    sweep = length_sweep(run.model, cfg, lengths, p.eval_batch, sequence_chunk=EVAL_SEQUENCE_CHUNK).assign(
        label=label, task=cfg.task, offset=cfg.offset, seed=cfg.seed)
    out = dict(label=label, task=cfg.task, offset=cfg.offset, seed=cfg.seed, sweep=sweep,
               final_loss=float(np.mean(run.losses[-50:])))
    longest = lengths[-1]
    shift_start = longest - cfg.train_length
    out["shift_f64"] = shift_deviation(run, shift_start, torch.float64)
    out["shift_f32"] = shift_deviation(run, shift_start, torch.float32)
    if cfg.model.encoding == "ape":
        out["ape_rows_untouched"] = ape_rows_untouched(run)
    if cfg.model.encoding == "rope":
        rng = np.random.default_rng(derive_seed(cfg.seed, f"transfer-null-{label}-k{cfg.offset}"))
        heads, kernels = analyse_rope_run(run, p, rng)
        chosen = [(row["layer"], row["head"], head_kernels.kernel.to_numpy(), head_kernels.predicted.to_numpy())
                  for row in heads
                  for head_kernels in [kernels[(kernels.layer == row["layer"]) & (kernels["head"] == row["head"])]]]
        measured = [(layer, head, kernel) for layer, head, kernel, _ in chosen]
        for row, (target, hijacked) in zip(heads, last_query_masses(run, measured, lengths, p.kernel_batch),
                                           strict=True):
            row["mass_by_length"], row["hijacked_by_length"] = target, hijacked
        collapse = first_collapse(sweep[sweep.metric == "last"].set_index("length").accuracy)
        if not math.isnan(collapse) and label != TURNING_ONLY:  # the masking claims pool the other rotary networks
            tag = f"{label}-k{cfg.offset}-{int(collapse)}"
            mask_rng = np.random.default_rng(derive_seed(cfg.seed, f"transfer-mask-{tag}"))
            out["masking"] = dict(masking_test(run, chosen, int(collapse), p.mask_batch, mask_rng, f"masking-{tag}"),
                                  label=label, offset=cfg.offset, seed=cfg.seed)
        out["heads"] = [dict(row, label=label, offset=cfg.offset, seed=cfg.seed) for row in heads]
        out["kernels"] = kernels.assign(label=label, offset=cfg.offset, seed=cfg.seed)
    return out


def held_out_values(held: HeldOutRuns | None) -> dict[str, float]:
    """The held-out claims' values: missing runs, runs failing a masking check, runs in which the pooled carrier test
    does not reject, runs in which the identifiable-base heads beat their carrier null no more often than the
    base-10^4 heads (NaN without runs), and the other evidence checks' failures. The held-out claims of the sweep's own
    runs (NaN there) are left out."""
    empty = dict(held_out_masking=float("nan"), held_out_carrier=float("nan"), held_out_carrier_identifiable=float("nan"),
                 held_out_other_failures=float("nan"))
    if held is None:
        return dict(held_out_complete=0.0, **empty)
    checks = held.checks
    if not len(checks):
        return dict(held_out_complete=float(held.missing), **empty)
    evidence = checks[(checks.role == "evidence") & ~checks.name.str.startswith("held_out")]
    failed = evidence[evidence.passed.map(lambda v: v is False)]
    masking = failed[failed.name.isin(MASKING_CHECKS)]
    rejects = set(checks[(checks.name == "carrier_pooled") & (checks.value <= CARRIER_LEVEL)].key)
    shares = {name: checks[checks.name == name].set_index("key").value
              for name in ("carrier_share_standard", "carrier_share_identifiable")}
    paired = pd.concat(shares, axis=1).dropna()  # a run without both shares (no tested head of one kind) is not ahead
    ahead = set(paired.index[paired.carrier_share_identifiable > paired.carrier_share_standard])
    return dict(held_out_complete=float(held.missing), held_out_masking=float(masking.key.nunique()),
                held_out_carrier=float(len(set(checks.key) - rejects)),
                held_out_carrier_identifiable=float(len(set(checks.key) - ahead)),
                held_out_other_failures=float((~failed.name.isin(MASKING_CHECKS)).sum()))


def transfer_variants(p: Parameters) -> list[tuple[str, TransformerConfig]]:
    """The networks of the chapter: RoPE as usual, RoPE with every plane identifiable, RoPE rotating only its identifiable
    planes, RoPE with fewer heads, APE, NoPE."""
    base = TransformerConfig(vocab=p.vocab, dim=p.dim, layers=p.layers, heads=p.heads, max_length=p.longest)
    fixed = identifiable_base(p.dim // p.heads, p.train_length, p.fixed_turns)
    return [
        ("RoPE", base.with_(encoding="rope")),
        (IDENTIFIABLE, base.with_(encoding="rope", rope_base=fixed)),
        (TURNING_ONLY, base.with_(encoding="rope", rope_planes=turning_planes(p))),
        (f"RoPE, {p.compare_heads} heads", base.with_(encoding="rope", heads=p.compare_heads)),
        ("APE", base.with_(encoding="ape")),
        ("NoPE", base.with_(encoding="nope")),
    ]


def turning_planes(p: Parameters) -> int:
    """Identifiable planes per head at base 10^4 and the default head width: the ones the ablation rotates."""
    return int(identifiable_planes(rope_frequencies(p.dim // p.heads).numpy(), p.train_length).sum())


def transfer_jobs(p: Parameters) -> list[tuple[NetworkRunConfig, tuple[str, Parameters]]]:
    """Every variant on shift, ``seeds`` each per offset, with their labels. Copy and reversal in this decoder are
    chapter 11's runs (:data:`FULL_SEQUENCE_SWEEP`), which this chapter reads rather than trains again."""
    shared = dict(train_length=p.train_length, batch=p.batch, lr=p.lr, device=p.device)
    return [(NetworkRunConfig(model=model, task="shift", offset=k, steps=p.steps, seed=seed, **shared), (label, p))
            for label, model in transfer_variants(p) for k in p.offsets for seed in p.seed_list]


MASKING_COLUMNS = ["label", "offset", "seed", "collapse_length", "masked_layers",
                   *(f"{name}_offsets" for name in MASK_CONDITIONS[1:]), *(f"accuracy_{name}" for name in MASK_CONDITIONS)]
HEAD_COLUMNS = ["label", "offset", "seed", "layer", "head", "mass_in_range", "kernel_argmax", "mean_kernel_argmax", "coherence",
                "null_q999", "n_measurable", "kernel_at_k", "far_max", "far_argmax", "first_hijack", "amplitude_sum",
                "mean_kernel_at_k", "mass_by_length", "hijacked_by_length", "fit_r2", "carrier_margin", "carrier_r2",
                "carrier_p", "carrier_null_q95", "carrier_null", "carrier_mixed"]


@dataclass
class TransferStudy:
    accuracy: pd.DataFrame  # label, task, offset, seed, length, metric, accuracy, n
    runs: pd.DataFrame  # label, task, offset, seed, final_loss, shift_f64, shift_f32, ape_rows_untouched
    heads: pd.DataFrame  # one row per retrieval head of every RoPE shift run
    kernels: pd.DataFrame  # label, offset, seed, layer, head, delta, kernel
    masking: pd.DataFrame  # per collapsed rotary network: MASKING_COLUMNS


def transfer_study(p: Parameters, progress: bool = True) -> TransferStudy:
    """Train every network of the chapter in ``p.workers`` processes and collect the tables."""
    results = map_stacked(measure_network, transfer_jobs(p), p.workers, progress, desc="networks")
    accuracy = pd.concat([r["sweep"] for r in results], ignore_index=True)
    scalar = ("label", "task", "offset", "seed", "final_loss", "shift_f64", "shift_f32", "ape_rows_untouched")
    runs = pd.DataFrame([{key: r.get(key, np.nan) for key in scalar} for r in results])
    heads = pd.DataFrame([row for r in results for row in r.get("heads", [])], columns=HEAD_COLUMNS)
    kernels = [r["kernels"] for r in results if "kernels" in r and len(r["kernels"])]
    masking = pd.DataFrame([r["masking"] for r in results if "masking" in r], columns=MASKING_COLUMNS)
    return TransferStudy(accuracy, runs, heads, pd.concat(kernels, ignore_index=True) if kernels else pd.DataFrame(),
                         masking)


def collapse_table(heads: pd.DataFrame, accuracy: pd.DataFrame) -> pd.DataFrame:
    """Per rotary network: its first hijacking offset (min over retrieval heads, ``inf`` if none), the first
    length whose last-position accuracy falls below ``COLLAPSE_ACCURACY`` (NaN if none), and whether the collapse
    is explained, i.e. happens only at a length that already contains a hijacking offset."""
    last = accuracy[(accuracy.task == "shift") & (accuracy.metric == "last")]
    rows = []
    for (label, offset, seed), group in heads.groupby(["label", "offset", "seed"]):
        curve = last[(last.label == label) & (last.offset == offset) & (last.seed == seed)].set_index("length").accuracy
        first_fail = first_collapse(curve)
        hijack = float(group.first_hijack.where(group.first_hijack >= 0, np.inf).min())
        rows.append(dict(label=label, offset=offset, seed=seed, first_hijack=hijack, collapse_length=first_fail,
                         explained=bool(np.isnan(first_fail) or hijack < first_fail)))
    return pd.DataFrame(rows, columns=["label", "offset", "seed", "first_hijack", "collapse_length", "explained"])


@dataclass
class FullSequenceRuns:
    """Chapter 11's committed copy and reversal runs of this chapter's decoder, for this chapter's encodings."""

    study: NetworkZooStudy | None  # None when the sweep has no current run
    train_size: int  # chapter 11's largest training size N
    numbers: dict[str, str | int]  # what the prose quotes: the setting, counts, and per (task, encoding) cell
    table: pd.DataFrame  # chapter 11's cell table (registered and measured verdicts, means) of these runs


FULL_SEQUENCE_TASKS = ("copy", "reversal")


def full_sequence_runs() -> FullSequenceRuns:
    """Read :data:`FULL_SEQUENCE_SWEEP` for :data:`FULL_SEQUENCE_ENCODINGS` on copy and reversal: the runs, chapter 11's
    setting of them (its defaults under each run's overrides), the counts of runs, learned runs and generalizing runs,
    RoPE's runs that carry past N, and chapter 11's numbers and measured verdicts per cell ("not run" without runs)."""
    full = committed_runs(FULL_SEQUENCE_SWEEP)
    swept = full.study.select(FULL_SEQUENCE_TASKS) if full.study is not None else None
    keys = ["full_N", "full_tokens", "full_steps", "full_batch", "full_lr", "full_seeds", "full_runs", "full_learned",
            "full_generalize", "z_rope_carries"]
    numbers: dict[str, str | int] = dict.fromkeys(keys, "not run")
    numbers |= {f"z_{task}_{encoding}_measured": "not run"
                for task in FULL_SEQUENCE_TASKS for encoding in FULL_SEQUENCE_ENCODINGS}
    numbers |= dict(full_present=full.expected - full.missing, full_expected=full.expected,
                    rope_copy_registered=PREDICTED_VERDICTS[("rope", "copy")][0])
    if swept is None:
        ours, table = None, pd.DataFrame()
    else:
        ours = NetworkZooStudy(*(df[df.encoding.isin(FULL_SEQUENCE_ENCODINGS)]
                                 for df in (swept.accuracy, swept.losses, swept.verdicts)))
        defaults = default_parameters(BOOK_DIR / f"{ZooParameters.chapter}.ipynb")
        settings = [defaults | o for o in full.overrides if "shift" not in o.get("tasks", defaults["tasks"])]
        verdicts = ours.verdicts
        learned = verdicts[verdicts.learned]
        rope = verdicts[verdicts.encoding == "rope"]
        table = cell_table(verdicts)
        numbers |= dict(full_N=full.train_size, full_tokens=sequence_length("copy", full.train_size, 0),
                        full_seeds=f"{verdicts.seed.min()}-{verdicts.seed.max()}", full_runs=len(verdicts),
                        full_learned=len(learned), full_generalize=int((learned.measured == "generalizes").sum()),
                        z_rope_carries=f"{int(rope.carries.sum())} of {len(rope)}")
        numbers |= {f"full_{name}": ", ".join(str(v) for v in sorted({s[name] for s in settings}))
                    for name in ("steps", "batch", "lr")}
        numbers |= {f"z_{task}_{encoding}_measured": measured
                    for (task, encoding), measured in table.set_index(["task", "encoding"]).measured.items()}
    numbers |= {f"z_{name}": value for name, value in
                cell_numbers(ours, full.train_size, FULL_SEQUENCE_TASKS, FULL_SEQUENCE_ENCODINGS).items()}
    return FullSequenceRuns(ours, full.train_size, numbers, table)
