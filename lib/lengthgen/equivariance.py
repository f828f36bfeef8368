"""Chapter 1's measurements: RoPE logits are Toeplitz, so the length-T rule repeats at every length."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pandas as pd
import torch

from .evaluation import length_sweep
from .heads import PositionOnlyHead, RopeHead
from .studies import doubling_lengths, run_configs
from .training import TrainedRun, train_many


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
    t = torch.arange(length)
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
    """The learned logit ``f(D)`` for ``D = 0 .. max_offset - 1`` in float64."""
    with torch.no_grad():
        return as_dtype(head, torch.float64).offset_logits(torch.arange(max_offset))


@dataclass
class EquivarianceStudy:
    """Everything chapter 1 measures, as tidy tables (one row per seed, or per seed and length)."""

    runs: list[TrainedRun]
    exactness: pd.DataFrame  # seed, toeplitz_f64, toeplitz_f32, renorm_f64 (max over lengths)
    accuracy: pd.DataFrame  # seed, length, metric, accuracy, n
    renormalized: pd.DataFrame  # seed, length, offset, attention (length-L pattern on offsets < T, renormalized)


def equivariance_study(params: dict, progress: bool = True) -> EquivarianceStudy:
    """Train RoPE heads over seeds and measure exact equivariance and accuracy vs length."""
    T = params["train_length"]
    lengths = doubling_lengths(T, params["length_factor"])
    configs = run_configs(params, "rope", rope_base=params["rope_base"], rope_convention=params["rope_convention"])
    runs = train_many(configs, progress=progress)
    exact, acc, renorm = [], [], []
    for run in runs:
        seed, head, longest = run.config.seed, run.head, lengths[-1]
        exact.append(
            dict(
                seed=seed,
                toeplitz_f64=toeplitz_deviation(logit_matrix(head, longest, torch.float64)),
                toeplitz_f32=toeplitz_deviation(logit_matrix(head, longest, torch.float32)),
                renorm_f64=max(renormalization_error(head, T, L) for L in lengths),
                argmax_offset=int(offset_profile(head, T).argmax()),
            )
        )
        sweep = length_sweep(head, lengths, T, params["offset"], params["vocab"], seed, batch=params["eval_batch"])
        acc.append(sweep.assign(seed=seed))
        for L in lengths:
            long = offset_attention(head, L)[:T]
            renorm.append(pd.DataFrame(dict(seed=seed, length=L, offset=range(T), attention=(long / long.sum()).numpy())))
    return EquivarianceStudy(runs, pd.DataFrame(exact), pd.concat(acc, ignore_index=True), pd.concat(renorm, ignore_index=True))
