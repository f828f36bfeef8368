"""A head's logits read as a function of the offset: the offset profile and the Toeplitz test (chapters 1, 4 and 10)."""

from __future__ import annotations

import copy

import torch

from ..model.heads import PositionOnlyHead, RopeHead


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


def offset_profile(head: RopeHead, max_offset: int) -> torch.Tensor:
    """The learned logit ``f(D)`` for ``D = 0 .. max_offset - 1`` in float64, on the CPU."""
    with torch.no_grad():
        return as_dtype(head, torch.float64).offset_logits(torch.arange(max_offset)).cpu()
