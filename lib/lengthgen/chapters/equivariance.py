"""Chapter 1 (``01_equivariance``): RoPE logits are Toeplitz, so the length-T rule repeats at every length."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..analysis.kernels import as_dtype, logit_matrix, offset_profile, toeplitz_deviation
from ..analysis.planes import planes_of, predicted_first_hijack
from ..book.parameters import parameter
from ..model.evaluation import doubling_lengths, length_sweep
from ..model.heads import HeadRunConfig, PositionOnlyHead
from ..model.training import TrainedRun
from .common import GB, Execution, HeadTraining, LengthSweep, head_run_configs, map_stacked


@dataclass(frozen=True)
class Parameters(HeadTraining, LengthSweep, Execution):
    """Chapter 1's parameters."""

    chapter = "01_equivariance"
    rope_base: float = parameter("RoPE base b of the frequencies b^(-2m/d)", 2.0, 1e9)
    rope_convention: str = parameter("how coordinates pair into rotary planes", choices=("half", "interleaved"))
    horizon_factor: int = parameter("how far the kernel beyond T is searched for a hijacking offset, in multiples of T "
                                    "(at least 2: the search starts at 2T)", 2, 1 << 20)
    hijack_base: float = parameter("RoPE base of the second set of heads, on which the first-hijack law is judged "
                                   "(small enough that a far offset out-scores the target within the horizon)", 2.0, 1e9)

    @property
    def horizon(self) -> int:
        return self.horizon_factor * self.train_length

    def memory_gb(self) -> float:
        matrices = 64 * self.longest**2 + 8 * self.eval_batch * (self.longest + 256 * self.vocab)
        kernel = 32 * min(self.horizon, PROFILE_CHUNK) * self.dim + 16 * self.horizon
        return self.workers * (matrices + kernel) / GB

    def memory_rule(self) -> str:
        return ("per worker: 64 bytes x longest length^2 for the full logit matrices, the evaluation batch, and for "
                f"the kernel out to the horizon 32 bytes x dim per offset of a {PROFILE_CHUNK}-offset chunk plus "
                "16 bytes per offset")


PROFILE_CHUNK = 1 << 16  # offsets whose rotated keys are formed at once when the kernel is read out to the horizon


@torch.no_grad()
def long_profile(head: PositionOnlyHead, horizon: int) -> np.ndarray:
    """``f(D)`` for ``D = 0 .. horizon - 1`` in float64, ``PROFILE_CHUNK`` offsets at a time (bounded memory)."""
    h = as_dtype(head, torch.float64)
    parts = [h.offset_logits(torch.arange(start, min(start + PROFILE_CHUNK, horizon)))
             for start in range(0, horizon, PROFILE_CHUNK)]
    return torch.cat(parts).cpu().numpy()


@torch.no_grad()
def offset_attention(head: PositionOnlyHead, length: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Attention of the last query on each offset ``D = 0 .. length-1`` (index ``D``)."""
    h = as_dtype(head, dtype)
    row = h.attention(length, torch.tensor([length - 1]))[0]
    return row.flip(0)


def renormalization_error(head: PositionOnlyHead, train_length: int, length: int) -> float:
    """Max |length-T pattern - length-L pattern restricted to offsets < T and renormalized|.

    With exact equivariance the two agree: extending the sequence only adds
    offsets, it never changes the logits of the offsets already there.
    """
    short = offset_attention(head, train_length)
    long = offset_attention(head, length)[:train_length]
    return float((short - long / long.sum()).abs().max())


def hijack_curve(f: np.ndarray, offset: int, train_length: int, lengths: list[int]) -> tuple[np.ndarray, int | None]:
    """The margin ``f(k) - max_{T <= D < L} f(D)`` at each length ``L``, and the first offset beyond ``T`` that beats
    the target (None if none does within ``len(f)``)."""
    far = f[train_length:]
    running = np.maximum.accumulate(far)
    margins = np.array([f[offset] - running[min(L, len(f)) - train_length - 1] for L in lengths])
    above = np.nonzero(far > f[offset])[0]
    return margins, (train_length + int(above[0])) if len(above) else None


MIN_JUDGED = 3  # the law's gain over a constant fitted on other seeds needs at least this many judged runs


def hijack_bias(hijack: pd.DataFrame) -> float:
    """Median signed ``log10(observed / predicted)`` over the judged runs (NaN if none): positive, the law is early."""
    seen = hijack[hijack.judged].signed.dropna()
    return float(seen.median()) if len(seen) else math.nan


def constant_errors(hijack: pd.DataFrame) -> pd.Series:
    """Per judged run, ``|log10(observed / c)|`` with ``c`` the geometric mean of the first hijacks of the *other* judged
    runs at the same offset: a per-offset constant fitted on other seeds, which knows nothing about any one head."""
    judged = hijack[hijack.judged]
    logs = np.log10(judged.observed.astype(float))
    errors = pd.Series(math.nan, index=hijack.index)
    for _, index in judged.groupby("offset").groups.items():
        for i in index:
            others = [j for j in index if j != i]
            if others:
                errors[i] = abs(logs[i] - logs[others].mean())
    return errors


def calibrated_errors(hijack: pd.DataFrame) -> pd.Series:
    """Per judged run, the law's ``|log10|`` error after rescaling its prediction by the median ratio observed/predicted
    of the *other* judged runs at the same offset: what the law's ranking of heads is worth once its bias is removed."""
    judged = hijack[hijack.judged]
    errors = pd.Series(math.nan, index=hijack.index)
    for _, index in judged.groupby("offset").groups.items():
        for i in index:
            others = [j for j in index if j != i]
            if others:
                errors[i] = abs(judged.signed[i] - judged.signed[others].median())
    return errors


def law_gain(hijack: pd.DataFrame) -> float:
    """Median ``|log10|`` error of the random-phase law minus that of the per-offset constant fitted on other seeds, over
    the judged runs (NaN with fewer than ``MIN_JUDGED``): negative when the law knows more about each head."""
    constant = constant_errors(hijack)
    both = hijack[hijack.judged & constant.notna() & hijack.signed.notna()]
    if len(both) < MIN_JUDGED:
        return math.nan
    return float(both.signed.abs().median() - constant[both.index].median())


@dataclass
class EquivarianceStudy:
    """Everything chapter 1 measures, as tidy tables (one row per run, or per run and length)."""

    runs: list[TrainedRun]
    exactness: pd.DataFrame  # offset, seed, trained (bool), toeplitz_f64, toeplitz_f32, renorm_f64, argmax_offset
    accuracy: pd.DataFrame  # offset, seed, trained, length, metric, accuracy, n
    renormalized: pd.DataFrame  # offset, seed, length, delta, attention (length-L pattern on offsets < T, renormalized)
    hijack: pd.DataFrame  # hijack heads: offset, seed, target_logit, amplitude_sum, observed, predicted, signed, judged
    margins: pd.DataFrame  # hijack heads: offset, seed, length, margin


def exactness_row(head: PositionOnlyHead, cfg: HeadRunConfig, lengths: list[int], trained: bool) -> dict:
    """The proof checks and the in-range peak of one head, trained or at its initialization."""
    T, longest = cfg.train_length, lengths[-1]
    return dict(offset=cfg.offset, seed=cfg.seed, trained=trained,
                toeplitz_f64=toeplitz_deviation(logit_matrix(head, longest, torch.float64)),
                toeplitz_f32=toeplitz_deviation(logit_matrix(head, longest, torch.float32)),
                renorm_f64=max(renormalization_error(head, T, L) for L in lengths),
                argmax_offset=int(offset_profile(head, T).argmax()))


def hijack_row(head: PositionOnlyHead, cfg: HeadRunConfig, horizon: int) -> tuple[dict, pd.DataFrame]:
    """The margin beyond T out to the horizon, the first hijack and its random-phase prediction, for one head; the run
    is judged when the head learned (its in-range kernel peaks at ``k``) and a far offset beats the target in range."""
    T, k = cfg.train_length, cfg.offset
    f = long_profile(head, horizon)
    horizon_lengths = doubling_lengths(T, horizon // T)[1:]  # lengths beyond T, doubling out to the horizon
    margins, observed = hijack_curve(f, k, T, horizon_lengths)
    planes = planes_of(head)
    predicted = predicted_first_hijack(planes, float(f[k]), T)
    learned = int(np.argmax(f[:T])) == k
    row = dict(offset=k, seed=cfg.seed, target_logit=float(f[k]), amplitude_sum=float(planes.amplitude.sum()),
               observed=observed, predicted=predicted, learned=learned, judged=learned and observed is not None,
               signed=math.log10(observed / predicted) if observed is not None else math.nan,  # -inf: law said never
               margin_at_horizon=float(margins[-1]))
    return row, pd.DataFrame(dict(offset=k, seed=cfg.seed, length=horizon_lengths, margin=margins))


def measure_run(run: TrainedRun, job: tuple[str, list[int], int, int]) -> tuple[TrainedRun, list[dict], pd.DataFrame,
                                                                                  pd.DataFrame, dict | None, pd.DataFrame]:
    """In the worker, after training. A head at the chapter's base: the proof checks on it and on its initialization,
    accuracy against length for both, the renormalized patterns. A head at the hijack base: its first hijack."""
    kind, lengths, eval_batch, horizon = job
    cfg, head = run.config, run.model
    if kind == "hijack":
        row, margins = hijack_row(head, cfg, horizon)
        return run, [], pd.DataFrame(), pd.DataFrame(), row, margins
    T, k = cfg.train_length, cfg.offset
    untrained = cfg.build_model()
    exact = [exactness_row(head, cfg, lengths, True), exactness_row(untrained, cfg, lengths, False)]
    sweeps = [length_sweep(model, cfg, lengths, eval_batch, out_of_range_queries=512).assign(
        offset=k, seed=cfg.seed, trained=trained) for model, trained in ((head, True), (untrained, False))]
    renorm = []
    for L in lengths:
        long = offset_attention(head, L)[:T].cpu()
        renorm.append(pd.DataFrame(dict(offset=k, seed=cfg.seed, length=L, delta=range(T),
                                        attention=(long / long.sum()).numpy())))
    return run, exact, pd.concat(sweeps, ignore_index=True), pd.concat(renorm, ignore_index=True), None, pd.DataFrame()


def equivariance_study(p: Parameters, progress: bool = True) -> EquivarianceStudy:
    """Train RoPE heads over offsets x seeds at the chapter's base, measure exact equivariance (trained and untrained)
    and accuracy against length; train the same runs at the hijack base and measure their first hijacks."""
    lengths = doubling_lengths(p.train_length, p.length_factor)
    shared = dict(rope_convention=p.rope_convention)
    jobs = [(cfg, ("main", lengths, p.eval_batch, p.horizon))
            for cfg in head_run_configs(p, "rope", rope_base=p.rope_base, **shared)]
    jobs += [(cfg, ("hijack", lengths, p.eval_batch, p.horizon))
             for cfg in head_run_configs(p, "rope", rope_base=p.hijack_base, **shared)]
    results = map_stacked(measure_run, jobs, p.workers, progress)
    main = [r for (_, job), r in zip(jobs, results, strict=True) if job[0] == "main"]
    hijack = [r for (_, job), r in zip(jobs, results, strict=True) if job[0] == "hijack"]
    return EquivarianceStudy([r[0] for r in main], pd.DataFrame([row for r in main for row in r[1]]),
                             pd.concat([r[2] for r in main], ignore_index=True),
                             pd.concat([r[3] for r in main], ignore_index=True),
                             pd.DataFrame([r[4] for r in hijack]), pd.concat([r[5] for r in hijack], ignore_index=True))


def claim_values(study: EquivarianceStudy) -> dict[str, object]:
    """Every claim's value from the study (a per-run claim's: one row per run, with ``value``)."""
    exact, acc, hijack = study.exactness, study.accuracy, study.hijack
    trained = exact[exact.trained]
    scored = acc[acc.trained & acc.metric.isin(["last", "out_of_range"])]
    judged = hijack[hijack.judged]
    return dict(toeplitz_f64=exact.toeplitz_f64.max(), toeplitz_f32=exact.toeplitz_f32.max(),
                renormalized_f64=exact.renorm_f64.max(),
                peak_at_k=trained.assign(value=(trained.argmax_offset - trained.offset).abs()),
                worst_accuracy=scored.groupby(["offset", "seed"]).accuracy.min().rename("value").reset_index(),
                hijack_judged_share=float(hijack.judged.mean()),
                hijack_law_error=float(judged.signed.abs().median()) if len(judged) else math.nan,
                hijack_law_within_10=float((judged.signed.abs() <= 1).mean()) if len(judged) else math.nan,
                hijack_law_gain=law_gain(hijack),
                untrained_worst_accuracy=acc[~acc.trained & (acc.metric == "out_of_range")].accuracy.max(),
                margin_at_horizon_min=hijack.margin_at_horizon.min(), hijack_bias=hijack_bias(hijack),
                hijack_constant_error=float(constant_errors(hijack).median()),
                hijack_calibrated_error=float(calibrated_errors(hijack).median()))
