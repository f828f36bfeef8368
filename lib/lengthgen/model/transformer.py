"""A small GPT-style decoder with a selectable position encoding (RoPE, learned APE, none).

In the spirit of nanoGPT's ``model.py``: token embedding, pre-LayerNorm blocks of causal
multi-head attention and an MLP, a final LayerNorm and a linear readout. The position
encoding is the only thing that changes between variants:

* ``"rope"``: queries and keys of every head are rotated by position (the rotation of
  :func:`lengthgen.model.encodings.rotate`, written with slices);
* ``"ape"``: a learned table of position vectors is added to the token embedding;
  rows beyond the training length receive no gradient;
* ``"nope"``: no position information at all beyond the causal mask.

The fast path uses ``torch.nn.functional.scaled_dot_product_attention``; the explicit
path (:meth:`CausalSelfAttention.logits`) returns the pre-softmax logits of every head,
which the analyses read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn
from torch.nn import functional as F

from .config import Config
from .encodings import rope_frequencies, turn
from .seeding import generator
from .tasks import sequence_cross_entropy
from .training import RunConfig

Encoding = Literal["rope", "ape", "nope"]
ENCODINGS: tuple[str, ...] = ("rope", "ape", "nope")


@dataclass(frozen=True)
class TransformerConfig(Config):
    """Architecture of the decoder."""

    vocab: int = 64
    dim: int = 64
    layers: int = 2
    heads: int = 4
    mlp_ratio: int = 4
    encoding: Encoding = "rope"
    max_length: int = 512  # APE table rows
    rope_base: float = 10_000.0
    rope_planes: int | None = None  # rotate only the fastest planes of each head (None: all)
    ape_init_std: float = 0.02

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads


def head_frequencies(cfg: TransformerConfig) -> torch.Tensor:
    """Per-plane RoPE frequencies of one head; planes beyond ``rope_planes`` get frequency 0 (not rotated)."""
    freqs = rope_frequencies(cfg.head_dim, cfg.rope_base)
    if cfg.rope_planes is not None:
        freqs = torch.where(torch.arange(len(freqs)) < cfg.rope_planes, freqs, torch.zeros_like(freqs))
    return freqs


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention; RoPE on queries and keys when the encoding is ``"rope"``."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim, bias=False)
        self.proj = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.register_buffer("freqs", head_frequencies(cfg), persistent=False)
        self._tables: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}  # rotation tables by positions, dtype, device

    def split_heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys, values ``(batch, heads, length, head_dim)`` before any rotation."""
        b, n, _ = x.shape
        q, k, v = self.qkv(x).split(self.cfg.dim, dim=2)
        shape = (b, n, self.cfg.heads, self.cfg.head_dim)
        return tuple(t.view(shape).transpose(1, 2) for t in (q, k, v))

    def rotation_table(
        self, start: int, length: int, dtype: torch.dtype, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``cos`` and ``sin`` of every position's angles ``(length, head_dim / 2)``, computed once in float64 and cached."""
        key = (start, length, dtype, device)
        if key not in self._tables:
            positions = torch.arange(start, start + length, dtype=torch.float64, device=device)
            angles = positions[:, None] * head_frequencies(self.cfg).to(device)[None, :]
            self._tables[key] = (torch.cos(angles).to(dtype), torch.sin(angles).to(dtype))
        return self._tables[key]

    def rotate(self, x: torch.Tensor, start: int) -> torch.Tensor:
        """Rotate ``(..., length, head_dim)`` queries or keys at positions ``start ..`` (RoPE only, "half" pairing).

        Same result as :func:`lengthgen.model.encodings.rotate`, written with slices and a cached
        table because it runs in every layer of every training step.
        """
        if self.cfg.encoding != "rope":
            return x
        cos, sin = self.rotation_table(start, x.shape[-2], x.dtype, x.device)
        half = x.shape[-1] // 2
        return turn(x[..., :half], x[..., half:], cos, sin)

    def logits(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Explicit path: pre-softmax causal logits ``(batch, heads, length, length)``, ``-inf`` above the diagonal."""
        n = x.shape[1]
        q, k, _ = self.split_heads(x)
        q, k = self.rotate(q, start), self.rotate(k, start)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.cfg.head_dim)
        causal = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        return scores.masked_fill(~causal, float("-inf"))

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = self.split_heads(x)
        q, k = self.rotate(q, start), self.rotate(k, start)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, n, self.cfg.dim))


class MLP(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(cfg.dim, cfg.mlp_ratio * cfg.dim)
        self.out = nn.Linear(cfg.mlp_ratio * cfg.dim, cfg.dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(F.gelu(self.fc(x)))


class Block(nn.Module):
    """Pre-LayerNorm residual block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.ln_attn = nn.LayerNorm(cfg.dim)
        self.attn = CausalSelfAttention(cfg)
        self.ln_mlp = nn.LayerNorm(cfg.dim)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        x = x + self.attn(self.ln_attn(x), start)
        return x + self.mlp(self.ln_mlp(x))


@torch.no_grad()
def gpt2_init(model: nn.Module, cfg: TransformerConfig, gen: torch.Generator) -> None:
    """GPT-2 style: normal(0, 0.02) weights, zero biases, residual projections scaled by depth, the APE table
    (parameter ``position``) at ``cfg.ape_init_std``; LayerNorms and parameters of fewer than 2 dimensions untouched."""
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            p.zero_()
        elif p.dim() >= 2 and "ln" not in name:
            std = 0.02 / math.sqrt(2 * cfg.layers) if name.endswith(("proj.weight", "out.weight")) else 0.02
            if name == "position":
                std = cfg.ape_init_std
            p.copy_(torch.randn(p.shape, generator=gen) * std)


class Transformer(nn.Module):
    """Decoder-only transformer returning vocabulary logits at every position."""

    def __init__(self, cfg: TransformerConfig, gen: torch.Generator) -> None:
        super().__init__()
        if cfg.encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {ENCODINGS}, got {cfg.encoding!r}")
        if cfg.dim % cfg.heads or cfg.head_dim % 2:
            raise ValueError(f"dim={cfg.dim} must split into {cfg.heads} heads of even size")
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.dim)
        self.position = nn.Parameter(torch.zeros(cfg.max_length, cfg.dim)) if cfg.encoding == "ape" else None
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln_out = nn.LayerNorm(cfg.dim)
        self.readout = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        self._init_weights(gen)

    def _init_weights(self, gen: torch.Generator) -> None:
        gpt2_init(self, self.cfg, gen)

    def embed_tokens(self, tokens: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Token embedding plus, for APE, the position rows ``start .. start + length - 1``."""
        x = self.embed(tokens)
        if self.position is not None:
            end = start + tokens.shape[1]
            if end > self.cfg.max_length:
                raise ValueError(f"positions up to {end - 1} beyond the APE table ({self.cfg.max_length} rows)")
            x = x + self.position[start:end]
        return x

    def forward(self, tokens: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Vocabulary logits ``(batch, length, vocab)``; ``start`` is the position of the first token (default 0)."""
        x = self.embed_tokens(tokens, start)
        for block in self.blocks:
            x = block(x, start)
        return self.readout(self.ln_out(x))

    def loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy over the positions that have a target."""
        return sequence_cross_entropy(logits, targets)

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    @torch.no_grad()
    def predict(self, tokens: torch.Tensor, position_sets: list[torch.Tensor]) -> list[torch.Tensor]:
        """Predicted tokens ``(batch, len(positions))`` for each set of positions, from one forward pass."""
        predicted = self(tokens).argmax(-1)
        return [predicted[:, positions.to(predicted.device)] for positions in position_sets]

    @torch.no_grad()
    def attention_logits(self, tokens: torch.Tensor, start: int = 0) -> list[torch.Tensor]:
        """Pre-softmax logits of every layer, each ``(batch, heads, length, length)``, via the explicit path."""
        x = self.embed_tokens(tokens, start)
        out = []
        for block in self.blocks:
            out.append(block.attn.logits(block.ln_attn(x), start))
            x = block(x, start)
        return out

    @torch.no_grad()
    def layer_inputs(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """The normalized input of every layer's attention, ``(batch, length, dim)``."""
        x = self.embed_tokens(tokens)
        out = []
        for block in self.blocks:
            out.append(block.ln_attn(x))
            x = block(x)
        return out


@dataclass(frozen=True)
class NetworkRunConfig(RunConfig):
    """The small transformer on a full-sequence task (warm-up over the first 10 % of steps by default)."""

    model: TransformerConfig = field(default_factory=TransformerConfig)
    steps: int = 1500
    batch: int = 32
    lr: float = 3e-3
    warmup_fraction: float = 0.1

    @property
    def vocab(self) -> int:
        return self.model.vocab

    @property
    def eval_stream(self) -> str:
        return f"eval-{self.task}"

    def build_model(self) -> Transformer:
        return Transformer(self.model, generator(self.seed, self.init_stream))
