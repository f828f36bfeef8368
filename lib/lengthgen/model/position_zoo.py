"""The common position encodings besides RoPE and the learned table, each written from its formula.

* :func:`sinusoidal_table`: fixed sinusoidal APE (Vaswani et al. 2017), in its two conventions: ``"interleaved"``
  (the paper's ``PE[pos, 2i] = sin(pos / 10000^(2i/d))``, ``PE[pos, 2i+1] = cos(...)``) and ``"concatenated"``
  (tensor2tensor's ``[sin | cos]`` with timescales ``10000^(i / (d/2 - 1))``);
* :func:`randomized_positions`: randomized positions (Ruoss et al. 2023): per sequence, a sorted sample without
  replacement from ``0 .. max_position - 1``, in training *and* at test, fed to any encoding of positions;
* :func:`t5_bucket` and :class:`T5Bias`: T5's learned scalar per head and bucket, with Hugging Face's
  ``_relative_position_bucket`` semantics (causal: 32 buckets, max distance 128, distances 0-15 exact, then
  logarithmic; every distance from 113 on falls in bucket 31);
* :func:`alibi_slopes` and :func:`alibi_bias`: ALiBi (Press et al. 2022), slopes ``2^(-8h/H)`` for a power-of-two
  head count and the reference code's interleaving rule otherwise;
* :func:`partial_rotary`: GPT-NeoX's partial rotary (``rotary_pct``): only the first ``rotary_pct * head_dim``
  coordinates are rotated, with frequencies computed over those coordinates alone, and the rest pass through;
* :class:`FireBias`: FIRE (Li et al. 2023), ``b(i, j) = MLP(psi(i - j) / psi(max(i, L)))``,
  ``psi(x) = log(c x + 1)`` with learned ``c > 0`` and ``L > 0``: *not* a function of ``i - j`` alone once
  ``i > L``;

Biases are ``(heads, queries, keys)`` tensors added to the attention logits; positions count from 0. Every
function creates its tensors on the device of its inputs (or the given device).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

from .encodings import rotate

SinusoidalConvention = Literal["interleaved", "concatenated"]


def sinusoidal_table(positions: torch.Tensor, dim: int, convention: SinusoidalConvention = "interleaved",
                     base: float = 10_000.0) -> torch.Tensor:
    """``(len(positions), dim)`` fixed sinusoidal position vectors (float64)."""
    if dim % 2 or dim < 2:
        raise ValueError(f"dim must be even and >= 2, got {dim}")
    half = dim // 2
    steps = torch.arange(half, dtype=torch.float64, device=positions.device)
    if convention == "interleaved":
        inverse = base ** (-2 * steps / dim)
    elif convention == "concatenated":
        inverse = base ** (-steps / max(half - 1, 1))
    else:
        raise ValueError(f"convention must be 'interleaved' or 'concatenated', got {convention!r}")
    angles = positions.to(torch.float64)[:, None] * inverse[None, :]
    if convention == "concatenated":
        return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    return torch.stack([torch.sin(angles), torch.cos(angles)], dim=2).reshape(len(positions), dim)


def randomized_positions(batch: int, length: int, max_position: int, generator: torch.Generator,
                         device: torch.device | str = "cpu") -> torch.Tensor:
    """``(batch, length)`` increasing positions, each row a sample without replacement from ``0 .. max_position-1``."""
    if not 1 <= length <= max_position:
        raise ValueError(f"need 1 <= length <= max_position, got length {length}, max_position {max_position}")
    rows = [torch.randperm(max_position, generator=generator)[:length].sort().values for _ in range(batch)]
    return torch.stack(rows).to(device)


def t5_bucket(relative_position: torch.Tensor, bidirectional: bool = False, num_buckets: int = 32,
              max_distance: int = 128) -> torch.Tensor:
    """The bucket of each ``relative_position = key - query`` (Hugging Face's ``_relative_position_bucket``; the
    logarithm in float32, as there, so that bucket edges agree)."""
    buckets = torch.zeros_like(relative_position, dtype=torch.long)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        distance = -torch.clamp(relative_position, max=0)
    max_exact = num_buckets // 2
    large = max_exact + (torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).long()
    large = torch.clamp(large, max=num_buckets - 1)
    return buckets + torch.where(distance < max_exact, distance, large)


def offsets(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """``(queries, keys)`` matrix of ``query - key`` positions."""
    return queries[:, None] - keys[None, :]


class T5Bias(nn.Module):
    """T5's relative bias: one learned scalar per head and bucket of the key-query offset (causal buckets)."""

    def __init__(self, heads: int, num_buckets: int = 32, max_distance: int = 128) -> None:
        super().__init__()
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.table = nn.Parameter(torch.zeros(num_buckets, heads))

    def forward(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``(heads, len(queries), len(keys))`` bias."""
        bucket = t5_bucket(-offsets(queries, keys), False, self.num_buckets, self.max_distance)
        return self.table[bucket].permute(2, 0, 1)


def alibi_slopes(heads: int) -> list[float]:
    """ALiBi's head slopes: ``2^(-8h/H)``, ``h = 1 .. H`` for a power of two; otherwise the slopes of the largest
    power of two below ``H`` followed by every other slope of twice that power (the reference rule)."""
    if heads < 1:
        raise ValueError(f"heads must be >= 1, got {heads}")

    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start ** (h + 1) for h in range(n)]

    if math.log2(heads).is_integer():
        return power_of_two(heads)
    closest = 2 ** math.floor(math.log2(heads))
    return power_of_two(closest) + alibi_slopes(2 * closest)[0::2][: heads - closest]


def alibi_bias(queries: torch.Tensor, keys: torch.Tensor, slopes: list[float]) -> torch.Tensor:
    """``(heads, len(queries), len(keys))`` bias ``-slope_h * (i - j)`` (float64; the causal mask is separate)."""
    slope = torch.tensor(slopes, dtype=torch.float64, device=queries.device)
    return -slope[:, None, None] * offsets(queries, keys).to(torch.float64)[None]


def partial_rotary_dims(head_dim: int, rotary_pct: float) -> int:
    """``int(rotary_pct * head_dim)``, the coordinates GPT-NeoX rotates; it must be even and at least 2."""
    rotary_dims = int(head_dim * rotary_pct)
    if rotary_dims % 2 or rotary_dims < 2:
        raise ValueError(f"rotary_pct * head_dim must be an even number >= 2, got {rotary_dims}")
    return rotary_dims


def partial_rotary_frequencies(head_dim: int, rotary_pct: float, base: float = 10_000.0) -> torch.Tensor:
    """Per-plane frequencies of a partial-rotary head, ``head_dim / 2`` of them (float64): ``base^(-2m / rotary_dims)``
    for the ``rotary_dims / 2`` rotated planes, then zero (a plane that never turns) for every pass-through plane."""
    rotary_dims = partial_rotary_dims(head_dim, rotary_pct)
    rotated = base ** (-torch.arange(0, rotary_dims, 2, dtype=torch.float64) / rotary_dims)
    return torch.cat([rotated, torch.zeros(head_dim // 2 - rotary_dims // 2, dtype=torch.float64)])


def partial_rotary(x: torch.Tensor, positions: torch.Tensor, rotary_pct: float, base: float = 10_000.0,
                   ) -> torch.Tensor:
    """Rotate the first ``int(rotary_pct * head_dim)`` coordinates of ``x`` (``(..., len(positions), head_dim)``)
    with GPT-NeoX's pairing and frequencies ``base^(-2m / rotary_dims)``; the other coordinates pass through."""
    rotary_dims = partial_rotary_dims(x.shape[-1], rotary_pct)
    freqs = partial_rotary_frequencies(x.shape[-1], rotary_pct, base)[: rotary_dims // 2].to(x.device)
    rotated = rotate(x[..., :rotary_dims], positions, freqs, "half")
    return torch.cat([rotated, x[..., rotary_dims:]], dim=-1)


class FireBias(nn.Module):
    """FIRE: ``b_h(i, j) = MLP_h(psi(i - j) / psi(max(i, L)))``, ``psi(x) = log(c x + 1)``.

    Our choices where the formula leaves them open: one MLP (1 -> ``hidden`` -> ``heads``, ReLU) shared by the heads'
    outputs; ``c = exp(log_c)`` and ``L = |threshold|`` kept positive; ``c`` starts at ``c_init`` and ``L`` at
    ``threshold_init`` (the training length is the natural choice). For ``i <= L`` the normalizer is the constant
    ``psi(L)`` and the bias is a function of ``i - j``; beyond ``L`` it is not."""

    def __init__(self, heads: int, hidden: int = 32, c_init: float = 1.0, threshold_init: float = 64.0) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(1, hidden), nn.ReLU(), nn.Linear(hidden, heads))
        self.log_c = nn.Parameter(torch.tensor(math.log(c_init)))
        self.threshold = nn.Parameter(torch.tensor(float(threshold_init)))

    @torch.no_grad()
    def reset_parameters(self, gen: torch.Generator) -> None:
        """Redraw the MLP from ``gen`` (PyTorch's default bounds ``1/sqrt(fan_in)``, uniform), so that a seed fixes it."""
        for layer in (self.mlp[0], self.mlp[2]):
            bound = 1 / math.sqrt(layer.in_features)
            for p in (layer.weight, layer.bias):
                p.copy_((torch.rand(p.shape, generator=gen, dtype=p.dtype) * 2 - 1) * bound)

    def psi(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log1p(torch.exp(self.log_c) * x)

    def normalized_offset(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``(len(queries), len(keys))``: ``psi(i - j) / psi(max(i, L))`` (causal cells; clamped at 0 above)."""
        dtype = self.log_c.dtype
        distance = offsets(queries, keys).clamp(min=0).to(dtype)
        scale = torch.maximum(queries.to(dtype), self.threshold.abs())
        return self.psi(distance) / self.psi(scale)[:, None]

    def forward(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``(heads, len(queries), len(keys))`` bias."""
        return self.mlp(self.normalized_offset(queries, keys)[..., None]).permute(2, 0, 1)
