"""The small decoder of chapter 6 with any encoding of the zoo, on the full-sequence tasks.

Everything but the position encoding is :class:`lengthgen.model.transformer.Transformer`'s: token
embedding, pre-LayerNorm blocks of causal attention and the same MLP, GPT-2 initialization. The
encodings enter in three places:

* added to the token embedding: ``ape`` (a learned table, rows beyond the training length never
  trained) and ``sinusoidal`` (the paper's interleaved table, fixed, scaled to the embedding's size);
* rotating queries and keys: ``rope`` (every plane), ``partial_rope`` (GPT-NeoX's ``rotary_pct``: the
  first ``rotary_fraction`` of each head's coordinates), ``randomized`` (RoPE at sorted random
  positions from ``0 .. random_span - 1``, Ruoss et al. 2023, in training and at test);
* a bias added to every head's logits: ``t5`` (a learned scalar per head and bucket), ``alibi`` (fixed
  slopes) and ``fire`` (a learned MLP of the normalized offset). T5's and FIRE's biases are one module
  shared by the layers, as in T5 (our choice for FIRE, whose paper we do not have);

``nope`` has only the causal mask. Positions count from 0; ``forward`` takes an optional
``(batch, length)`` tensor of positions (the randomized draw), else ``0 .. length - 1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import nn
from torch.nn import functional as F

from .encodings import turn
from .position_zoo import FireBias, T5Bias, alibi_bias, alibi_slopes, partial_rotary_dims, sinusoidal_table
from .seeding import generator
from .sequence_tasks import SequenceTask, check_task, sequence_batch, sequence_length, training_batch
from .tasks import IGNORE
from .transformer import MLP, NetworkRunConfig, TransformerConfig, gpt2_init

NETWORK_ZOO: tuple[str, ...] = ("nope", "ape", "sinusoidal", "randomized", "t5", "alibi", "rope", "partial_rope", "fire")
ROTARY = ("rope", "partial_rope", "randomized")
ADDED = ("ape", "sinusoidal")


@dataclass(frozen=True)
class ZooNetworkConfig(TransformerConfig):
    """The decoder's architecture with the zoo's encoding and its settings."""

    encoding: str = "rope"  # type: ignore[assignment]  # any of NETWORK_ZOO
    rotary_fraction: float = 0.25  # partial_rope: share of each head's coordinates rotated
    random_span: int = 1024  # randomized: positions drawn from 0 .. random_span - 1
    fire_hidden: int = 32  # fire: width of the MLP
    fire_threshold: float = 64.0  # fire: the initial L (the training length is the natural choice)

    def rotary_dims(self) -> int:
        """Coordinates of each head that rotate (0 for encodings without rotation)."""
        if self.encoding not in ROTARY:
            return 0
        return partial_rotary_dims(self.head_dim, self.rotary_fraction if self.encoding == "partial_rope" else 1.0)


class ZooAttention(nn.Module):
    """Causal multi-head attention whose logits get a rotation of queries and keys and/or an additive bias."""

    def __init__(self, cfg: ZooNetworkConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim, bias=False)
        self.proj = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, rotation: tuple[torch.Tensor, torch.Tensor] | None,
                bias: torch.Tensor) -> torch.Tensor:
        """``rotation``: ``cos`` and ``sin`` ``(batch or 1, 1, length, planes)`` of the rotated planes (half pairing
        over the first ``2 planes`` coordinates); ``bias``: ``(1, heads or 1, length, length)`` with the causal mask in
        it. The attention is written out rather than fused: the fused CPU kernel does not differentiate through a
        learned bias, and written out it batches over stacked seeds."""
        b, n, _ = x.shape
        q, k, v = self.qkv(x).split(self.cfg.dim, dim=2)
        q, k, v = (t.view(b, n, self.cfg.heads, self.cfg.head_dim).transpose(1, 2) for t in (q, k, v))
        if rotation is not None:
            q, k = rotate_planes(q, *rotation), rotate_planes(k, *rotation)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.cfg.head_dim) + bias
        y = torch.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, n, self.cfg.dim))


def rotate_planes(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first ``2 * planes`` coordinates of ``x`` (half pairing: plane ``m`` is coordinates ``m`` and
    ``m + planes``); the rest pass through (GPT-NeoX's partial rotary)."""
    planes = cos.shape[-1]
    x1, x2, rest = x[..., :planes], x[..., planes: 2 * planes], x[..., 2 * planes:]
    return turn(x1, x2, cos, sin, rest)


class ZooBlock(nn.Module):
    """Pre-LayerNorm residual block, as :class:`lengthgen.model.transformer.Block`, passing the encoding through."""

    def __init__(self, cfg: ZooNetworkConfig) -> None:
        super().__init__()
        self.ln_attn = nn.LayerNorm(cfg.dim)
        self.attn = ZooAttention(cfg)
        self.ln_mlp = nn.LayerNorm(cfg.dim)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, rotation: tuple[torch.Tensor, torch.Tensor] | None,
                bias: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_attn(x), rotation, bias)
        return x + self.mlp(self.ln_mlp(x))


class ZooTransformer(nn.Module):
    """Decoder-only transformer with any encoding of :data:`NETWORK_ZOO`, returning vocabulary logits."""

    def __init__(self, cfg: ZooNetworkConfig, gen: torch.Generator) -> None:
        super().__init__()
        if cfg.encoding not in NETWORK_ZOO:
            raise ValueError(f"encoding must be one of {NETWORK_ZOO}, got {cfg.encoding!r}")
        if cfg.dim % cfg.heads or cfg.head_dim % 2:
            raise ValueError(f"dim={cfg.dim} must split into {cfg.heads} heads of even size")
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.dim)
        self.relative_bias = T5Bias(cfg.heads) if cfg.encoding == "t5" else None
        self.fire = FireBias(cfg.heads, cfg.fire_hidden, 1.0, cfg.fire_threshold) if cfg.encoding == "fire" else None
        self.blocks = nn.ModuleList(ZooBlock(cfg) for _ in range(cfg.layers))
        self.ln_out = nn.LayerNorm(cfg.dim)
        self.readout = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        # registered last, so that its size (the longest evaluated sequence) changes no other parameter's init draws
        self.position = nn.Parameter(torch.zeros(cfg.max_length, cfg.dim)) if cfg.encoding == "ape" else None
        gpt2_init(self, cfg, gen)
        if self.fire is not None:
            self.fire.reset_parameters(gen)
        rotary = cfg.rotary_dims()
        freqs = cfg.rope_base ** (-torch.arange(0, rotary, 2, dtype=torch.float64) / max(rotary, 1))
        self.register_buffer("freqs", freqs, persistent=False)

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

    def rotation(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``cos`` and ``sin`` ``(batch or 1, 1, length, planes)`` of every rotated plane, from float64 angles."""
        if not len(self.freqs):
            return None
        angles = positions.to(torch.float64)[..., None] * self.freqs
        return torch.cos(angles).to(dtype)[:, None], torch.sin(angles).to(dtype)[:, None]

    def bias(self, length: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """``(1, heads or 1, length, length)`` additive logits: the bias encodings' (zero for the others) with the
        causal mask (``-inf`` above the diagonal) in them."""
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

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Vocabulary logits ``(batch, length, vocab)``; ``positions`` ``(batch, length)`` (default ``0 .. length-1``)."""
        n = tokens.shape[-1]
        if positions is None:
            positions = torch.arange(n, device=tokens.device)[None]
        elif self.cfg.encoding not in ROTARY + ADDED:
            raise ValueError(f"{self.cfg.encoding!r} has no use for positions: its bias is a function of 0 .. length - 1")
        x = self.embed(tokens)
        if self.position is not None:
            self.check_positions(positions)
            x = x + self.position[positions]
        elif self.cfg.encoding == "sinusoidal":
            table = sinusoidal_table(positions.reshape(-1), self.cfg.dim).to(x.dtype) * self.sinusoidal_scale
            x = x + table.view(*positions.shape, self.cfg.dim)
        rotation = self.rotation(positions, x.dtype)
        bias = self.bias(n, x.dtype, tokens.device)
        for block in self.blocks:
            x = block(x, rotation, bias)
        return self.readout(self.ln_out(x))

    def loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy over the positions that have an answer."""
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE)


@dataclass(frozen=True)
class ZooNetworkRunConfig(NetworkRunConfig):
    """The zoo decoder on a full-sequence task, trained on instance sizes ``1 .. train_size``."""

    model: ZooNetworkConfig = field(default_factory=ZooNetworkConfig)
    task: SequenceTask = "copy"  # type: ignore[assignment]
    train_size: int = 16

    init_stream: ClassVar[str] = "zoo-network-init"
    data_stream: ClassVar[str] = "zoo-network-data"

    def __post_init__(self) -> None:
        check_task(self.task, self.train_size, self.model.vocab)
        if self.train_length != sequence_length(self.task, self.train_size, self.offset):
            object.__setattr__(self, "train_length", sequence_length(self.task, self.train_size, self.offset))

    def build_model(self) -> ZooTransformer:
        return ZooTransformer(self.model, generator(self.seed, self.init_stream))

    def sample_batch(self, gen: torch.Generator) -> tuple[torch.Tensor | tuple[torch.Tensor, ...], torch.Tensor]:
        """Sizes ``1 .. train_size``; for ``randomized`` the inputs are ``(tokens, positions)``."""
        tokens, targets = training_batch(self.task, self.batch, self.train_size, self.vocab, self.offset, gen)
        if self.model.encoding != "randomized":
            return tokens, targets
        return (tokens, random_positions(self.batch, tokens.shape[1], self.model.random_span, gen)), targets


def random_positions(batch: int, length: int, span: int, gen: torch.Generator) -> torch.Tensor:
    """``(batch, length)`` sorted samples without replacement from ``0 .. span - 1``."""
    if length > span:
        raise ValueError(f"random_span {span} is shorter than a sequence of {length} tokens")
    return torch.stack([torch.randperm(span, generator=gen)[:length].sort().values for _ in range(batch)])


@torch.no_grad()
def exact_match(model: ZooTransformer, cfg: ZooNetworkRunConfig, sizes: list[int], batch: int) -> list[dict]:
    """Per size: the share of ``batch`` fresh instances answered entirely right (``exact``) and of answers right
    (``token``), from the run's evaluation stream (one per size; randomized positions drawn from it too)."""
    device = next(model.parameters()).device
    rows = []
    for size in sizes:
        gen = generator(cfg.seed, f"{cfg.eval_stream}-size-{size}")
        tokens, targets = sequence_batch(cfg.task, batch, size, cfg.vocab, cfg.offset, gen)
        positions = None
        if cfg.model.encoding == "randomized":
            positions = random_positions(batch, tokens.shape[1], cfg.model.random_span, gen).to(device)
        predicted = model(tokens.to(device), positions).argmax(-1).cpu()
        answered = targets != IGNORE
        right = (predicted == targets) | ~answered
        rows.append(dict(size=size, exact=float(right.all(1).double().mean()),
                         token=float((right & answered).sum() / answered.sum()), n=batch))
    return rows
