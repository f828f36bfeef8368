"""The book's one decoder: a small GPT-style transformer whose position encoding is a setting.

In the spirit of nanoGPT's ``model.py``: token embedding, pre-LayerNorm blocks of causal multi-head
attention and an MLP, a final LayerNorm and a linear readout, GPT-2 initialization. Chapters 6 and 13
use it with ``rope``, ``ape`` or ``nope``; chapter 11 with every encoding of :data:`NETWORK_ZOO`;
chapter 12 subclasses it (:mod:`lengthgen.model.relation_network`) to add a learned bias on position
relations. The encoding enters in three places:

* added to the token embedding: ``ape`` (a learned table; rows beyond the training length receive no
  gradient) and ``sinusoidal`` (the interleaved table, fixed, scaled to the embedding's size);
* rotating queries and keys: ``rope`` (every plane, or the first ``rope_planes``), ``partial_rope``
  (GPT-NeoX's ``rotary_pct``: the first ``rotary_fraction`` of each head's coordinates) and
  ``randomized`` (RoPE at sorted random positions, Ruoss et al. 2023, given to ``forward``);
* a bias added to every head's logits: ``t5`` (a learned scalar per head and bucket), ``alibi`` (fixed
  slopes) and ``fire`` (a learned MLP of the normalized offset). T5's and FIRE's biases are one module
  shared by the layers, as in T5 (our choice for FIRE, whose paper we do not have).

``nope`` has only the causal mask. Attention is ``fused`` (``scaled_dot_product_attention``, causal;
no bias) or ``explicit`` (the softmax written out over logits plus the bias: the fused CPU kernel
does not differentiate through a learned bias, and written out it batches over stacked seeds).
:meth:`Attention.logits` returns every head's pre-softmax logits, which the analyses read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import torch
from torch import nn
from torch.nn import functional as F

from .config import Config
from .encodings import rope_frequencies, turn
from .position_zoo import FireBias, T5Bias, alibi_bias, alibi_slopes, partial_rotary_dims, sinusoidal_table
from .seeding import generator
from .tasks import sequence_cross_entropy
from .training import RunConfig

NETWORK_ZOO: tuple[str, ...] = ("nope", "ape", "sinusoidal", "randomized", "t5", "alibi", "rope", "partial_rope", "fire")
ROTARY = ("rope", "partial_rope", "randomized")
ADDED = ("ape", "sinusoidal")
BIASED = ("t5", "alibi", "fire")
Rotation = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class TransformerConfig(Config):
    """Architecture of the decoder, its position encoding and the encoding's settings."""

    vocab: int = 64
    dim: int = 64
    layers: int = 2
    heads: int = 4
    mlp_ratio: int = 4
    encoding: str = "rope"  # any of NETWORK_ZOO
    attention: Literal["fused", "explicit"] = "fused"  # bias encodings need "explicit"
    max_length: int = 512  # APE table rows
    ape_init_first: bool = True  # draw the APE table's init before the blocks' (else last: its size moves no draw)
    rope_base: float = 10_000.0
    rope_planes: int | None = None  # rotate only the fastest planes of each head (None: all)
    ape_init_std: float = 0.02
    rotary_fraction: float = 0.25  # partial_rope: share of each head's coordinates rotated
    random_span: int = 1024  # randomized: positions drawn from 0 .. random_span - 1
    fire_hidden: int = 32  # fire: width of the MLP
    fire_threshold: float = 64.0  # fire: the initial L (the training length is the natural choice)

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    def rotary_dims(self) -> int:
        """Coordinates of each head that rotate (0 for encodings without rotation)."""
        if self.encoding not in ROTARY:
            return 0
        return partial_rotary_dims(self.head_dim, self.rotary_fraction if self.encoding == "partial_rope" else 1.0)

    def frequencies(self) -> torch.Tensor:
        """Per-plane frequencies of the rotated planes of one head (float64); planes beyond ``rope_planes`` get 0."""
        freqs = rope_frequencies(self.rotary_dims(), self.rope_base)
        if self.rope_planes is not None:
            freqs = torch.where(torch.arange(len(freqs)) < self.rope_planes, freqs, torch.zeros_like(freqs))
        return freqs


def rotate_planes(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first ``2 * planes`` coordinates of ``x`` (half pairing: plane ``m`` is coordinates ``m`` and
    ``m + planes``); the rest pass through (GPT-NeoX's partial rotary)."""
    planes = cos.shape[-1]
    return turn(x[..., :planes], x[..., planes: 2 * planes], cos, sin, x[..., 2 * planes:])


class Attention(nn.Module):
    """Causal multi-head attention whose logits get a rotation of queries and keys and/or an additive bias."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim, bias=False)
        self.proj = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def split_heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys, values ``(batch, heads, length, head_dim)`` before any rotation."""
        b, n, _ = x.shape
        q, k, v = self.qkv(x).split(self.cfg.dim, dim=2)
        shape = (b, n, self.cfg.heads, self.cfg.head_dim)
        return tuple(t.view(shape).transpose(1, 2) for t in (q, k, v))

    def rotated(self, x: torch.Tensor, rotation: Rotation | None) -> tuple[torch.Tensor, ...]:
        """Queries, keys (rotated when ``rotation`` is given) and values."""
        q, k, v = self.split_heads(x)
        if rotation is not None:
            q, k = rotate_planes(q, *rotation), rotate_planes(k, *rotation)
        return q, k, v

    def logits(self, x: torch.Tensor, rotation: Rotation | None, bias: torch.Tensor | None = None) -> torch.Tensor:
        """Pre-softmax logits ``(batch, heads, length, length)``, ``-inf`` above the diagonal. ``rotation``: ``cos`` and
        ``sin`` broadcasting to ``(batch, heads, length, planes)``; ``bias``: ``(1 or batch, heads or 1, length,
        length)`` with the causal mask in it (``None``: no bias)."""
        q, k, _ = self.rotated(x, rotation)
        return self.scores(q, k, bias)

    def scores(self, q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """Scaled query-key products plus ``bias``, or with the causal mask where there is no bias."""
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.cfg.head_dim)
        if bias is not None:
            return scores + bias
        n = q.shape[-2]
        causal = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        return scores.masked_fill(~causal, float("-inf"))

    def forward(self, x: torch.Tensor, rotation: Rotation | None, bias: torch.Tensor | None) -> torch.Tensor:
        """Fused causal attention when ``bias`` is ``None``, else the softmax written out over logits plus bias; under
        ``torch.compile`` always written out (the compiler fuses it, and batches it over stacked seeds)."""
        b, n, _ = x.shape
        q, k, v = self.rotated(x, rotation)
        if bias is None and not torch.compiler.is_compiling():
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = torch.softmax(self.scores(q, k, bias), dim=-1) @ v
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
        self.attn = Attention(cfg)
        self.ln_mlp = nn.LayerNorm(cfg.dim)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, rotation: Rotation | None = None, bias: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln_attn(x), rotation, bias)
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
    """Decoder-only transformer with any encoding of :data:`NETWORK_ZOO`, returning vocabulary logits."""

    def __init__(self, cfg: TransformerConfig, gen: torch.Generator) -> None:
        super().__init__()
        if cfg.encoding not in NETWORK_ZOO:
            raise ValueError(f"encoding must be one of {NETWORK_ZOO}, got {cfg.encoding!r}")
        if cfg.dim % cfg.heads or cfg.head_dim % 2:
            raise ValueError(f"dim={cfg.dim} must split into {cfg.heads} heads of even size")
        if cfg.attention not in ("fused", "explicit") or (cfg.attention == "fused" and cfg.encoding in BIASED):
            raise ValueError(f"attention must be 'explicit' for {BIASED} and 'fused' or 'explicit' otherwise, "
                             f"got {cfg.attention!r} for {cfg.encoding!r}")
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.dim)
        table = (lambda: nn.Parameter(torch.zeros(cfg.max_length, cfg.dim))) if cfg.encoding == "ape" else (lambda: None)
        if cfg.ape_init_first:
            self.position = table()
        self.relative_bias = T5Bias(cfg.heads) if cfg.encoding == "t5" else None
        self.fire = FireBias(cfg.heads, cfg.fire_hidden, 1.0, cfg.fire_threshold) if cfg.encoding == "fire" else None
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln_out = nn.LayerNorm(cfg.dim)
        self.readout = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        if not cfg.ape_init_first:
            self.position = table()
        gpt2_init(self, cfg, gen)
        if self.fire is not None:
            self.fire.reset_parameters(gen)
        self.register_buffer("freqs", cfg.frequencies(), persistent=False)
        self._tables: dict[tuple, Rotation] = {}  # rotation tables of positions start .. by (start, length, dtype, device)

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    @property
    def sinusoidal_scale(self) -> float:
        """The fixed table times ``sqrt(2) * 0.02``: the root-mean-square of its coordinates (``1/sqrt(2)``) brought
        to the token embedding's (GPT-2's 0.02), the ratio of the original recipe (embeddings scaled to unit size,
        table added as is); added unscaled, the table swamps the tokens at init and the network barely learns."""
        return math.sqrt(2) * 0.02

    def check_positions(self, positions: torch.Tensor) -> None:
        """Raise if a position is beyond the APE table."""
        if self.position is not None and int(positions.max()) >= self.cfg.max_length:
            raise ValueError(f"position {int(positions.max())} is beyond the APE table ({self.cfg.max_length} rows)")

    def positions(self, tokens: torch.Tensor, positions: torch.Tensor | None, start: int) -> torch.Tensor:
        """``(batch or 1, length)`` positions: the given ones, else ``start .. start + length - 1``."""
        if positions is None:
            return torch.arange(start, start + tokens.shape[-1], device=tokens.device)[None]
        if self.cfg.encoding not in ROTARY + ADDED:
            raise ValueError(f"{self.cfg.encoding!r} has no use for positions: its bias is a function of 0 .. length - 1")
        return positions

    def embed_tokens(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Token embedding plus the added encoding's rows at ``positions``."""
        x = self.embed(tokens)
        if self.position is not None:
            if not torch.compiler.is_compiling():  # a host sync; compiled training steps stay inside the table
                self.check_positions(positions)
            return x + self.position[positions]
        if self.cfg.encoding == "sinusoidal":
            table = sinusoidal_table(positions.reshape(-1), self.cfg.dim).to(x.dtype) * self.sinusoidal_scale
            return x + table.view(*positions.shape, self.cfg.dim)
        return x

    def rotation(self, positions: torch.Tensor, dtype: torch.dtype) -> Rotation | None:
        """``cos`` and ``sin`` ``(batch or 1, 1, length, planes)`` of every rotated plane, from float64 angles (the
        frequencies from the configuration, not the buffer, which is batched when seeds are stacked)."""
        if not len(self.freqs):
            return None
        angles = positions.to(torch.float64)[..., None] * self.cfg.frequencies().to(positions.device)
        return torch.cos(angles).to(dtype)[:, None], torch.sin(angles).to(dtype)[:, None]

    def bias(self, length: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor | None:
        """``(1, heads or 1, length, length)`` additive logits: the bias encodings' (zero for the others) with the
        causal mask (``-inf`` above the diagonal) in them; ``None`` for fused attention."""
        if self.cfg.attention == "fused":
            return None
        pos = torch.arange(length, device=device)
        if self.relative_bias is not None:
            bias = self.relative_bias(pos, pos)
        elif self.fire is not None:
            bias = self.fire(pos, pos)
        elif self.cfg.encoding == "alibi":
            bias = alibi_bias(pos, pos, alibi_slopes(self.cfg.heads))
        else:
            bias = torch.zeros(1, length, length, device=device)
        causal = torch.ones(length, length, dtype=torch.bool, device=device).tril()
        return bias.to(dtype).masked_fill(~causal, float("-inf"))[None]

    def encode(self, tokens: torch.Tensor, positions: torch.Tensor | None = None,
               start: int = 0) -> tuple[torch.Tensor, Rotation | None, torch.Tensor | None]:
        """What the blocks take: the embedded tokens, the rotation and the bias."""
        n = tokens.shape[-1]
        cached = positions is None
        positions = self.positions(tokens, positions, start)
        x = self.embed_tokens(tokens, positions)
        if torch.compiler.is_compiling():  # no side effect in compiled code: a cache write would recompile the step
            return x, self.rotation(positions, x.dtype), self.bias(n, x.dtype, tokens.device)
        key = (start, n, x.dtype, x.device)
        if not cached or key not in self._tables:
            rotation = self.rotation(positions, x.dtype)
            if not cached:
                return x, rotation, self.bias(n, x.dtype, tokens.device)
            self._tables[key] = rotation
        return x, self._tables[key], self.bias(n, x.dtype, tokens.device)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None, start: int = 0) -> torch.Tensor:
        """Vocabulary logits ``(batch, length, vocab)``; ``positions`` ``(batch, length)`` (default ``start ..``)."""
        x, rotation, bias = self.encode(tokens, positions, start)
        for block in self.blocks:
            x = block(x, rotation, bias)
        return self.readout(self.ln_out(x))

    def loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy over the positions that have a target."""
        return sequence_cross_entropy(logits, targets)

    @torch.no_grad()
    def predict(self, tokens: torch.Tensor, position_sets: list[torch.Tensor]) -> list[torch.Tensor]:
        """Predicted tokens ``(batch, len(positions))`` for each set of positions, from one forward pass."""
        predicted = self(tokens).argmax(-1)
        return [predicted[:, positions.to(predicted.device)] for positions in position_sets]

    @torch.no_grad()
    def attention_logits(self, tokens: torch.Tensor, start: int = 0) -> list[torch.Tensor]:
        """Pre-softmax logits of every layer, each ``(batch, heads, length, length)``."""
        x, rotation, bias = self.encode(tokens, None, start)
        out = []
        for block in self.blocks:
            out.append(block.attn.logits(block.ln_attn(x), rotation, bias))
            x = block(x, rotation, bias)
        return out

    @torch.no_grad()
    def layer_inputs(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """The normalized input of every layer's attention, ``(batch, length, dim)``."""
        x, rotation, bias = self.encode(tokens)
        out = []
        for block in self.blocks:
            out.append(block.ln_attn(x))
            x = block(x, rotation, bias)
        return out


@dataclass(frozen=True)
class NetworkRunConfig(RunConfig):
    """The decoder on a task (warm-up over the first 10 % of steps by default)."""

    model: TransformerConfig = field(default_factory=TransformerConfig)
    steps: int = 1500
    batch: int = 32
    lr: float = 3e-3
    warmup_fraction: float = 0.1

    network: ClassVar[type[Transformer]] = Transformer  # what build_model makes (the relation network subclasses it)

    @property
    def vocab(self) -> int:
        return self.model.vocab

    @property
    def eval_stream(self) -> str:
        return f"eval-{self.task}"

    def build_model(self) -> Transformer:
        """The freshly initialized network of this run."""
        return self.network(self.model, generator(self.seed, self.init_stream))
