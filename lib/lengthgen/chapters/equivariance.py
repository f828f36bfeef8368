"""Chapter 1 (``01_equivariance``): RoPE logits are Toeplitz, so the length-T rule repeats at every length."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pandas as pd
import torch

from ..book.parameters import parameter
from ..model.evaluation import doubling_lengths, length_sweep
from ..model.heads import PositionOnlyHead, RopeHead
from ..model.training import TrainedRun
from .claims import Claim, f32_toeplitz
from .common import GB, Execution, HeadTraining, LengthSweep, head_run_configs, map_stacked


@dataclass(frozen=True)
class Parameters(HeadTraining, LengthSweep, Execution):
    """Chapter 1's parameters."""

    chapter = "01_equivariance"
    rope_base: float = parameter("RoPE base b of the frequencies b^(-2m/d)", 2.0, 1e9)
    rope_convention: str = parameter("how coordinates pair into rotary planes", choices=("half", "interleaved"))

    def memory_gb(self) -> float:
        return self.workers * (64 * self.longest**2 + 8 * self.eval_batch * (self.longest + 256 * self.vocab)) / GB

    def memory_rule(self) -> str:
        return "per worker: 64 bytes x longest length^2 for the full logit matrices, plus the evaluation batch"


CLAIMS = (
    Claim("toeplitz_f64", "float64 logit matrix is Toeplitz (relative deviation)", "<=", 1e-12,
          "An order of magnitude above the rounding estimate L eps_64 at the longest length; any real dependence on "
          "absolute position would show at the scale of the logits themselves.", role="proof"),
    Claim("toeplitz_f32", "float32 logit matrix is Toeplitz (relative deviation)", "<=", f32_toeplitz,
          "The same rounding argument in single precision: cos and sin of angles up to L radians carry an error of "
          "about L eps_32, and a factor 10 leaves room for the matrix product.", role="proof",
          threshold_text="10 L eps_32"),
    Claim("renormalized_f64", "renormalized long pattern equals the length-T pattern", "<=", 1e-12,
          "The same 10^-12 as the float64 Toeplitz check: attention weights are at most 1, so rounding stays far below it.",
          role="proof"),
    Claim("peak_at_k", "runs whose f peaks away from k", "==", 0,
          "Exact: within the training range the learned kernel must peak at the target offset in every run."),
    Claim("worst_accuracy", "lowest accuracy of any run at any length up to the longest", ">=", 0.95,
          "A floor for 'the rule is reproduced', not an equality: new offsets dilute the softmax (chapter 4), and a "
          "last-query accuracy over 256 sequences has a binomial standard error of about 0.01 near 0.97."),
)


def as_dtype(head: PositionOnlyHead, dtype: torch.dtype) -> PositionOnlyHead:
    """A copy of ``head`` with parameters and buffers in ``dtype`` (the original is untouched)."""
    return copy.deepcopy(head).to(dtype)


@torch.no_grad()
def logit_matrix(head: PositionOnlyHead, length: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The ``length x length`` position logits computed directly from absolute positions."""
    pos = torch.arange(length)
    return as_dtype(head, dtype).position_logits(pos, pos)


def toeplitz_deviation(logits: torch.Tensor) -> float:
    """Largest deviation along causal diagonals, relative to the largest logit magnitude.

    For every offset ``D >= 0`` the entries ``logits[t, t - D]`` are compared with
    their first one ``logits[D, 0]``. Zero means ``logits`` is exactly a function of ``t - s``.
    """
    length = logits.shape[0]
    t = torch.arange(length, device=logits.device)
    s = t[None, :].expand(length, length)
    offset = t[:, None] - s
    causal = offset >= 0
    reference = logits[offset.clamp(min=0), 0]  # logits[D, 0] for each entry's offset D
    deviation = (logits - reference).abs()[causal].max()
    return float(deviation / logits[causal].abs().max())


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


def offset_profile(head: RopeHead, max_offset: int) -> torch.Tensor:
    """The learned logit ``f(D)`` for ``D = 0 .. max_offset - 1`` in float64, on the CPU."""
    with torch.no_grad():
        return as_dtype(head, torch.float64).offset_logits(torch.arange(max_offset)).cpu()


@dataclass
class EquivarianceStudy:
    """Everything chapter 1 measures, as tidy tables (one row per run, or per run and length)."""

    runs: list[TrainedRun]
    exactness: pd.DataFrame  # offset, seed, toeplitz_f64, toeplitz_f32, renorm_f64 (max over lengths), argmax_offset
    accuracy: pd.DataFrame  # offset, seed, length, metric, accuracy, n
    renormalized: pd.DataFrame  # offset, seed, length, delta, attention (length-L pattern on offsets < T, renormalized)


def measure_run(run: TrainedRun, job: tuple[list[int], int]) -> tuple[TrainedRun, dict, pd.DataFrame, pd.DataFrame]:
    """In the worker, after training: test the head's exact equivariance and sweep its accuracy over lengths."""
    lengths, eval_batch = job
    cfg, head = run.config, run.model
    T, longest = cfg.train_length, lengths[-1]
    exact = dict(
        offset=cfg.offset,
        seed=cfg.seed,
        toeplitz_f64=toeplitz_deviation(logit_matrix(head, longest, torch.float64)),
        toeplitz_f32=toeplitz_deviation(logit_matrix(head, longest, torch.float32)),
        renorm_f64=max(renormalization_error(head, T, L) for L in lengths),
        argmax_offset=int(offset_profile(head, T).argmax()),
    )
    sweep = length_sweep(head, cfg, lengths, eval_batch, out_of_range_queries=512).assign(offset=cfg.offset, seed=cfg.seed)
    renorm = []
    for L in lengths:
        long = offset_attention(head, L)[:T].cpu()
        renorm.append(pd.DataFrame(dict(offset=cfg.offset, seed=cfg.seed, length=L, delta=range(T),
                                        attention=(long / long.sum()).numpy())))
    return run, exact, sweep, pd.concat(renorm, ignore_index=True)


def equivariance_study(p: Parameters, progress: bool = True) -> EquivarianceStudy:
    """Train RoPE heads over offsets x seeds and measure exact equivariance and accuracy vs length."""
    lengths = doubling_lengths(p.train_length, p.length_factor)
    configs = head_run_configs(p, "rope", rope_base=p.rope_base, rope_convention=p.rope_convention)
    results = map_stacked(measure_run, [(cfg, (lengths, p.eval_batch)) for cfg in configs], p.workers, progress)
    runs, exact, acc, renorm = zip(*results, strict=True)
    return EquivarianceStudy(list(runs), pd.DataFrame(list(exact)), pd.concat(acc, ignore_index=True),
                             pd.concat(renorm, ignore_index=True))
