"""xPos (Sun et al. 2023, "A Length-Extrapolatable Transformer"): RoPE whose planes decay with the offset.

Plane ``m`` of a head of dimension ``d`` turns at ``theta_m = base^(-2m/d)`` as in RoPE and is also scaled: the query
at position ``i`` by ``zeta_m^(i/gamma)`` and the key at ``j`` by ``zeta_m^(-j/gamma)``, with

    zeta_m = (2m + 0.4 d) / (1.4 d),    gamma the scale base (512 in the paper's code, torchscale's ``XPOS``),

so plane ``m`` of the logit is multiplied by ``zeta_m^((i - j)/gamma)``: still a function of the offset alone, and a
decay that is strongest on the fastest plane (``zeta_0 = 0.4 / 1.4``) and weakest on the slowest. torchscale centres
the positions to keep the two factors near one, and so does :class:`XposHead`; the product, and so the logit, is the
same. Its blockwise causal
attention at inference is a separate device and is not part of the encoding here.

* :func:`xpos_zeta`, :func:`xpos_decay`: the per-plane base ``zeta_m`` and the factor on the logit at an offset;
* :class:`XposHead`: the position-only head of chapters 1-4 with xPos (a :class:`~lengthgen.model.heads.RopeHead`
  whose rotated query and key are scaled; same parameters and initialization as its RoPE twin of the same seed);
* :class:`XposRunConfig`: the zoo's run configuration (:class:`~lengthgen.model.zoo_heads.ZooRunConfig`) extended by
  the encoding ``"xpos"``, the way chapter 13's configuration extends the network's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .encodings import plane_index, rotate
from .heads import PositionOnlyHead, RopeHead
from .seeding import generator
from .zoo_heads import ZooRunConfig

XPOS = "rotary, every plane decaying with the offset (xPos)"  # the zoo's one-line description
XPOS_SCALE_BASE = 512.0  # gamma in the paper's code


def xpos_zeta(dim: int) -> torch.Tensor:
    """``zeta_m = (2m + 0.4 d) / (1.4 d)`` for the planes ``m = 0 .. d/2 - 1`` (float64), plane 0 the fastest."""
    if dim % 2 or dim < 2:
        raise ValueError(f"dim must be even and at least 2, got {dim}")
    return (torch.arange(0, dim, 2, dtype=torch.float64) + 0.4 * dim) / (1.4 * dim)


def xpos_decay(offsets: torch.Tensor, dim: int, scale_base: float = XPOS_SCALE_BASE) -> torch.Tensor:
    """The factor ``zeta_m^(D / gamma)`` xPos puts on plane ``m`` of the logit at offset ``D``: shape ``(n, d/2)``."""
    return xpos_zeta(dim)[None, :] ** (offsets.to(torch.float64)[:, None] / scale_base)


class XposHead(RopeHead):
    """A RoPE head whose plane ``m`` is scaled by ``zeta_m^(i/gamma)`` on the query and ``zeta_m^(-j/gamma)`` on the
    key, so that the logit's plane ``m`` decays as ``zeta_m^((i - j)/gamma)``."""

    def __init__(self, dim: int, vocab: int, gen: torch.Generator, qk_init_std: float, base: float,
                 scale_base: float = XPOS_SCALE_BASE) -> None:
        super().__init__(dim, vocab, gen, qk_init_std, base)
        if not (scale_base > 0 and math.isfinite(scale_base)):
            raise ValueError(f"scale_base must be positive and finite, got {scale_base}")
        self.scale_base = scale_base
        first, second = plane_index(dim, self.convention)
        coordinate_zeta = torch.empty(dim, dtype=torch.float64)
        coordinate_zeta[first] = coordinate_zeta[second] = xpos_zeta(dim)
        self.register_buffer("log_zeta", coordinate_zeta.log())  # per coordinate, in the convention's order

    def scale(self, positions: torch.Tensor, center: torch.Tensor | float = 0.0) -> torch.Tensor:
        """``zeta^((position - center) / gamma)`` per position and coordinate, ``(n, d)``, in the head's dtype."""
        shifted = positions.to(device=self.log_zeta.device, dtype=torch.float64) - center
        return torch.exp(shifted[:, None] / self.scale_base * self.log_zeta[None, :]).to(self.value.dtype)

    def position_logits(self, query_pos: torch.Tensor, key_pos: torch.Tensor) -> torch.Tensor:
        """RoPE's logits with the decay; positions are centred on their midpoint first (as torchscale does), which
        leaves the product of the two factors unchanged and keeps each near one at any length."""
        every = torch.cat([query_pos.reshape(-1), key_pos.reshape(-1)]).to(torch.float64)
        center = 0.5 * (every.min() + every.max())
        queries = rotate(self.q, query_pos, self.freqs, self.convention) * self.scale(query_pos, center)
        keys = rotate(self.k, key_pos, self.freqs, self.convention) / self.scale(key_pos, center)
        return queries @ keys.T / math.sqrt(self.dim)


@dataclass(frozen=True)
class XposRunConfig(ZooRunConfig):
    """The zoo's single head on fixed-offset retrieval, with the encoding ``"xpos"`` besides the zoo's own."""

    encoding: str = "xpos"
    xpos_scale_base: float = XPOS_SCALE_BASE  # gamma: plane m of the logit decays as zeta_m^(D / gamma)

    def build_model(self) -> PositionOnlyHead:
        """An :class:`XposHead` for ``"xpos"`` (the same random draws as the RoPE head of the same seed), else the
        zoo's head."""
        if self.encoding != "xpos":
            return super().build_model()
        return XposHead(self.dim, self.vocab, generator(self.seed, self.init_stream), self.qk_init_std, self.rope_base,
                        self.xpos_scale_base)
