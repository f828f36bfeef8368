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

    @property
    def horizon(self) -> int:
        return self.horizon_factor * self.train_length

    def memory_gb(self) -> float:
        matrices = 64 * self.longest**2 + 8 * self.eval_batch * (self.longest + 256 * self.vocab)
        return self.workers * (matrices + 32 * self.horizon * self.dim) / GB

    def memory_rule(self) -> str:
        return ("per worker: 64 bytes x longest length^2 for the full logit matrices, the evaluation batch, and "
                "32 bytes x horizon x dim for the kernel out to the horizon")


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


def prediction_error(observed: int | None, predicted: float, horizon: int) -> float:
    """``|log10(observed / predicted)|``, the observation censored at the horizon.

    Without a hijack inside the horizon the observed length is only known to exceed it: the error is then the
    least it can be, ``log10(horizon / predicted)`` for a prediction inside the horizon and 0 beyond it.
    """
    if observed is None:
        return 0.0 if predicted >= horizon else math.log10(horizon / predicted)
    return abs(math.log10(observed / predicted))


def hijack_bias(hijack: pd.DataFrame) -> float:
    """Median signed ``log10(observed / predicted)`` over runs hijacked within the horizon (NaN if none)."""
    seen = hijack.signed.dropna()
    return float(seen.median()) if len(seen) else math.nan


def constant_gain(hijack: pd.DataFrame) -> float:
    """Median ``|log10|`` error of the law minus that of the best constant in hindsight, over runs hijacked within
    the horizon: the geometric mean of their observed lengths, a prediction that knows nothing about any one head."""
    seen = hijack[hijack.signed.notna()]
    if not len(seen):
        return math.nan
    logs = np.log10(seen.observed.astype(float))
    return float(seen.signed.abs().median() - (logs - logs.mean()).abs().median())


@dataclass
class EquivarianceStudy:
    """Everything chapter 1 measures, as tidy tables (one row per run, or per run and length)."""

    runs: list[TrainedRun]
    exactness: pd.DataFrame  # offset, seed, trained (bool), toeplitz_f64, toeplitz_f32, renorm_f64, argmax_offset
    accuracy: pd.DataFrame  # offset, seed, trained, length, metric, accuracy, n
    renormalized: pd.DataFrame  # offset, seed, length, delta, attention (length-L pattern on offsets < T, renormalized)
    hijack: pd.DataFrame  # offset, seed, target_logit, amplitude_sum, observed, predicted, error, signed
    margins: pd.DataFrame  # offset, seed, length, margin


def exactness_row(head: PositionOnlyHead, cfg: HeadRunConfig, lengths: list[int], trained: bool) -> dict:
    """The proof checks and the in-range peak of one head, trained or at its initialization."""
    T, longest = cfg.train_length, lengths[-1]
    return dict(offset=cfg.offset, seed=cfg.seed, trained=trained,
                toeplitz_f64=toeplitz_deviation(logit_matrix(head, longest, torch.float64)),
                toeplitz_f32=toeplitz_deviation(logit_matrix(head, longest, torch.float32)),
                renorm_f64=max(renormalization_error(head, T, L) for L in lengths),
                argmax_offset=int(offset_profile(head, T).argmax()))


def measure_run(run: TrainedRun, job: tuple[list[int], int, int]) -> tuple[TrainedRun, list[dict], pd.DataFrame,
                                                                             pd.DataFrame, dict, pd.DataFrame]:
    """In the worker, after training: the proof checks on the trained head and on its initialization, accuracy against
    length for both, the renormalized patterns, and the margin beyond T with its random-phase prediction."""
    lengths, eval_batch, horizon = job
    cfg, head = run.config, run.model
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
    f = offset_profile(head, horizon).numpy()
    horizon_lengths = doubling_lengths(T, horizon // T)[1:]  # lengths beyond T, doubling out to the horizon
    margins, observed = hijack_curve(f, k, T, horizon_lengths)
    planes = planes_of(head)
    predicted = predicted_first_hijack(planes, float(f[k]), T)
    hijack = dict(offset=k, seed=cfg.seed, target_logit=float(f[k]), amplitude_sum=float(planes.amplitude.sum()),
                  observed=observed, predicted=predicted, error=prediction_error(observed, predicted, horizon),
                  signed=math.log10(observed / predicted) if observed is not None and math.isfinite(predicted) else math.nan,
                  margin_at_horizon=float(margins[-1]))
    margin_table = pd.DataFrame(dict(offset=k, seed=cfg.seed, length=horizon_lengths, margin=margins))
    return run, exact, pd.concat(sweeps, ignore_index=True), pd.concat(renorm, ignore_index=True), hijack, margin_table


def equivariance_study(p: Parameters, progress: bool = True) -> EquivarianceStudy:
    """Train RoPE heads over offsets x seeds; measure exact equivariance (trained and untrained), accuracy against
    length, and the margin beyond T against its prediction from the amplitudes."""
    lengths = doubling_lengths(p.train_length, p.length_factor)
    configs = head_run_configs(p, "rope", rope_base=p.rope_base, rope_convention=p.rope_convention)
    results = map_stacked(measure_run, [(cfg, (lengths, p.eval_batch, p.horizon)) for cfg in configs], p.workers, progress)
    runs, exact, acc, renorm, hijack, margins = zip(*results, strict=True)
    return EquivarianceStudy(list(runs), pd.DataFrame([row for rows in exact for row in rows]),
                             pd.concat(acc, ignore_index=True), pd.concat(renorm, ignore_index=True),
                             pd.DataFrame(list(hijack)), pd.concat(margins, ignore_index=True))


def claim_values(study: EquivarianceStudy) -> dict[str, object]:
    """Every claim's value from the study (a per-run claim's: one row per run, with ``value``)."""
    exact, acc, hijack = study.exactness, study.accuracy, study.hijack
    trained = exact[exact.trained]
    scored = acc[acc.trained & acc.metric.isin(["last", "out_of_range"])]
    return dict(toeplitz_f64=exact.toeplitz_f64.max(), toeplitz_f32=exact.toeplitz_f32.max(),
                renormalized_f64=exact.renorm_f64.max(),
                peak_at_k=trained.assign(value=(trained.argmax_offset - trained.offset).abs()),
                worst_accuracy=scored.groupby(["offset", "seed"]).accuracy.min().rename("value").reset_index(),
                hijack_prediction=hijack.rename(columns={"error": "value"}),
                untrained_worst_accuracy=acc[~acc.trained & (acc.metric == "out_of_range")].accuracy.max(),
                margin_at_horizon_min=hijack.margin_at_horizon.min(),
                hijack_bias=hijack_bias(hijack), hijack_constant_gain=constant_gain(hijack))
