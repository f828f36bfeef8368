"""Single attention heads whose queries and keys see positions only.

Content enters only through the values: attention mass on key ``s`` carries the
token ``x_s`` (a learned value embedding), and a learned readout maps the
attended value to vocabulary logits. The attention pattern therefore is a
function of positions alone and is shared by every sequence in a batch, which
makes both heads cheap to analyse exactly.

* :class:`RopeHead`: learned vectors ``q, k`` rotated by position,
  logit ``<R_t q, R_s k> / sqrt(d)``.
* :class:`ApeHead`: a learned absolute table ``P``, ``q_t = W_q (c + P_t)``,
  ``k_s = W_k (c + P_s)``, logit ``<q_t, k_s> / sqrt(d)``.
* :class:`LinearRotaryHead`: the rotary kernel without softmax (chapter 5's control),
  ``o_t = sum_{D <= t} f(D) e_{x_{t-D}}`` with ``f(D) = phi(D) . q``, and its two normalized
  variants (weights ``f^2`` or ``exp f`` divided by their sum).

:class:`HeadRunConfig` and :class:`LinearRunConfig` define a training run of each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from torch import nn

from .encodings import Convention, full_band_frequencies, rope_frequencies, rotate
from .seeding import generator
from .tasks import sequence_cross_entropy
from .training import Optimizer, RunConfig

HeadKind = Literal["rope", "ape"]
WeightMap = Literal["linear", "squared", "exp"]


class PositionOnlyHead(nn.Module):
    """Shared machinery: causal softmax over position logits, value embedding, readout."""

    def __init__(self, dim: int, vocab: int, gen: torch.Generator) -> None:
        super().__init__()
        self.dim, self.vocab = dim, vocab
        self.value = nn.Parameter(torch.randn(vocab, dim, generator=gen))
        self.readout = nn.Parameter(torch.randn(dim, vocab, generator=gen) / math.sqrt(dim))

    # -- the part each encoding defines ------------------------------------------------
    def position_logits(self, query_pos: torch.Tensor, key_pos: torch.Tensor) -> torch.Tensor:
        """Pre-softmax logits ``(len(query_pos), len(key_pos))``, without the causal mask."""
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------
    def readout_matrix(self) -> torch.Tensor:
        """``(vocab, vocab)``: output logits produced by full attention on one token."""
        return self.value @ self.readout

    @property
    def device(self) -> torch.device:
        return self.value.device

    def attention(self, length: int, query_pos: torch.Tensor | None = None, start: int | torch.Tensor = 0) -> torch.Tensor:
        """Causal attention weights ``(n_queries, length)`` for the given query indices (default: all).

        Token ``i`` sits at position ``start + i`` (``start`` 0 unless a run trains on windows of a longer range).
        """
        keys = torch.arange(length, device=self.device)
        queries = keys if query_pos is None else query_pos.to(self.device)
        logits = self.position_logits(queries + start, keys + start)
        logits = logits.masked_fill(keys[None, :] > queries[:, None], float("-inf"))
        return torch.softmax(logits, dim=-1)

    def loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy over the positions that have a target."""
        return sequence_cross_entropy(logits, targets)

    def forward(self, tokens: torch.Tensor, start: int | torch.Tensor = 0) -> torch.Tensor:
        """Vocabulary logits ``(batch, length, vocab)`` at every position of ``tokens`` (token ``i`` at ``start + i``).

        The attention pattern depends on positions only, so one ``(length, length)`` matrix serves
        every sequence: the logits are ``attention @ W[tokens]`` with ``W`` the readout matrix,
        computed as a single matrix product over the whole batch.
        """
        batch, length = tokens.shape
        attn = self.attention(length, start=start).to(self.value.dtype)
        rows = self.readout_matrix()[tokens]  # (batch, length, vocab): the logits of full attention on each token
        folded = rows.transpose(0, 1).reshape(length, -1)  # (length, batch * vocab)
        return (attn @ folded).reshape(length, batch, -1).transpose(0, 1)

    def token_mass(self, tokens: torch.Tensor, query_pos: torch.Tensor) -> torch.Tensor:
        """Attention mass per vocabulary entry, ``(batch, n_queries, vocab)``, for chosen queries.

        Memory-frugal: attention weights are scattered into vocabulary bins, so no
        per-position value vector is ever materialized. Cost is O(batch * n_queries * length).
        """
        attn = self.attention(tokens.shape[1], query_pos).to(self.value.dtype)
        batch, n_q = tokens.shape[0], attn.shape[0]
        mass = torch.zeros(batch, n_q, self.vocab, dtype=attn.dtype, device=attn.device)
        index = tokens[:, None, :].expand(batch, n_q, tokens.shape[1])
        return mass.scatter_add_(2, index, attn[None].expand(batch, -1, -1))

    def query_logits(self, tokens: torch.Tensor, query_pos: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits ``(batch, n_queries, vocab)`` at the chosen query positions."""
        return self.token_mass(tokens, query_pos) @ self.readout_matrix()

    @torch.no_grad()
    def predict(self, tokens: torch.Tensor, position_sets: list[torch.Tensor], chunk: int = 256) -> list[torch.Tensor]:
        """Predicted tokens ``(batch, len(positions))`` for each set of query positions.

        Each set is scored separately, ``chunk`` queries at a time: queries never build a
        ``d``-dimensional vector per key, so a long sequence costs ``O(batch * chunk * length)``.
        """
        out = []
        for positions in position_sets:
            parts = [self.query_logits(tokens, positions[i : i + chunk]).argmax(-1) for i in range(0, len(positions), chunk)]
            out.append(torch.cat(parts, dim=1))
        return out


class RopeHead(PositionOnlyHead):
    """Rotary head: logit ``<R_t q, R_s k> / sqrt(d)`` with learned ``q`` and ``k``."""

    def __init__(
        self,
        dim: int,
        vocab: int,
        gen: torch.Generator,
        qk_init_std: float = 0.1,
        base: float = 10_000.0,
        convention: Convention = "half",
        freqs: torch.Tensor | None = None,
    ) -> None:
        super().__init__(dim, vocab, gen)
        self.convention = convention
        self.q = nn.Parameter(qk_init_std * torch.randn(dim, generator=gen))
        self.k = nn.Parameter(qk_init_std * torch.randn(dim, generator=gen))
        theta = rope_frequencies(dim, base) if freqs is None else freqs.to(torch.float64)
        self.register_buffer("freqs", theta)

    def position_logits(self, query_pos: torch.Tensor, key_pos: torch.Tensor) -> torch.Tensor:
        queries = rotate(self.q, query_pos, self.freqs, self.convention)
        keys = rotate(self.k, key_pos, self.freqs, self.convention)
        return queries @ keys.T / math.sqrt(self.dim)

    def offset_logits(self, offsets: torch.Tensor) -> torch.Tensor:
        """``f(D) = <q, R_D k> / sqrt(d)``: the logit of a query on the key ``D`` positions back."""
        return self.position_logits(torch.zeros(1, dtype=torch.long, device=self.device), -offsets.to(self.device))[0]


class ApeHead(PositionOnlyHead):
    """Learned absolute positions: ``q_t = W_q (c + P_t)``, ``k_s = W_k (c + P_s)``."""

    def __init__(
        self,
        dim: int,
        vocab: int,
        max_length: int,
        gen: torch.Generator,
        table_init_std: float = 0.02,
    ) -> None:
        super().__init__(dim, vocab, gen)
        self.table = nn.Parameter(table_init_std * torch.randn(max_length, dim, generator=gen))
        self.const = nn.Parameter(torch.randn(dim, generator=gen))
        self.w_q = nn.Parameter(torch.randn(dim, dim, generator=gen) / math.sqrt(dim))
        self.w_k = nn.Parameter(torch.randn(dim, dim, generator=gen) / math.sqrt(dim))

    @property
    def max_length(self) -> int:
        return self.table.shape[0]

    def position_logits(self, query_pos: torch.Tensor, key_pos: torch.Tensor) -> torch.Tensor:
        query_pos, key_pos = query_pos.to(self.device), key_pos.to(self.device)
        if not torch._C._functorch.is_batchedtensor(query_pos) and int(max(query_pos.max(), key_pos.max())) >= self.max_length:
            raise ValueError(f"position beyond the APE table (max_length={self.max_length})")
        queries = (self.const + self.table[query_pos]) @ self.w_q.T
        keys = (self.const + self.table[key_pos]) @ self.w_k.T
        return queries @ keys.T / math.sqrt(self.dim)


def offset_features(offsets: torch.Tensor, freqs: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """``Phi[D] = R_{-D} key / sqrt(d)``, shape ``(len(offsets), d)``: a rotary kernel with query ``q`` is ``Phi q``."""
    return rotate(key, -offsets, freqs) / math.sqrt(key.shape[0])


def unit_key(dim: int, seed: int | None = None) -> torch.Tensor:
    """A fixed key with unit amplitude in every rotary plane (half convention), float64.

    Phases are zero, or uniformly random from the seed's ``"key"`` stream: the seed changes
    the features while keeping every plane's amplitude, hence the conditioning.
    """
    half = dim // 2
    phase = torch.zeros(half, dtype=torch.float64)
    if seed is not None:
        phase = 2 * torch.pi * torch.rand(half, generator=generator(seed, "key"), dtype=torch.float64)
    return torch.cat([torch.cos(phase), torch.sin(phase)])


def kernel_weights(f: torch.Tensor, weight_map: WeightMap) -> torch.Tensor:
    """The attention weight ``g(f)`` of each offset: ``f`` itself, ``f^2`` or ``exp f`` (before any normalization)."""
    if weight_map == "linear":
        return f
    if weight_map == "squared":
        return f**2
    if weight_map == "exp":
        return torch.exp(f)
    raise ValueError(f"weight_map must be 'linear', 'squared' or 'exp', got {weight_map!r}")


class LinearRotaryHead(nn.Module):
    """Rotary attention with a kernel linear in the parameters: ``f(D) = Phi[D] . q`` (chapter 5).

    The key is fixed and only ``q`` is learned. With ``weight_map="linear"`` the output is
    ``o_t = sum_{D <= t} f(D) e_{x_{t-D}}``, unnormalized (the control of chapter 5). The two
    normalized variants weight each offset by ``g(f(D))`` and divide by the sum over ``D <= t``:
    ``g = f^2`` (a positive polynomial map) and ``g = exp`` (softmax). Values are one-hot, and
    the outputs are scored with squared error against the one-hot target at the training
    queries ``query_positions``.
    """

    def __init__(
        self, features: torch.Tensor, query_positions: torch.Tensor, vocab: int, init: torch.Tensor | None = None,
        weight_map: WeightMap = "linear",
    ) -> None:
        super().__init__()
        kernel_weights(torch.zeros(1), weight_map)  # fail early on an unknown map
        self.vocab = vocab
        self.weight_map = weight_map
        self.q = nn.Parameter(torch.zeros(features.shape[1], dtype=features.dtype) if init is None else init.clone())
        self.register_buffer("features", features)  # Phi over the training offsets 0 .. T-1
        self.register_buffer("query_positions", query_positions)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Outputs ``(batch, n_queries, vocab)`` at the training queries."""
        length = self.features.shape[0]
        delta = self.query_positions[:, None] - torch.arange(length, device=tokens.device)[None, :]
        g = kernel_weights(self.features @ self.q, self.weight_map)  # g(f(D)) for D = 0 .. T-1
        weights = torch.where(delta >= 0, g[delta.clamp(min=0)], torch.zeros((), dtype=g.dtype, device=g.device))
        if self.weight_map != "linear":
            weights = weights / weights.sum(-1, keepdim=True)
        onehot = nn.functional.one_hot(tokens, self.vocab).to(g.dtype)
        return weights @ onehot

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Squared error against the one-hot target token at every training query, summed over the
        vocabulary and averaged over queries and sequences (``targets``: shift targets, ``(batch, T)``;
        every training query ``t >= offset`` has one)."""
        picked = targets[:, self.query_positions]
        onehot = nn.functional.one_hot(picked, self.vocab).to(outputs.dtype)
        return ((outputs - onehot) ** 2).sum(-1).mean()


@dataclass(frozen=True)
class HeadRunConfig(RunConfig):
    """A single position-only head (RoPE or learned APE) on fixed-offset retrieval."""

    kind: HeadKind = "rope"
    dim: int = 64
    vocab: int = 64
    rope_base: float = 10_000.0
    rope_convention: str = "half"
    rope_full_band: bool = False  # frequencies pi * base^(-2m/d) instead of base^(-2m/d)
    qk_init_std: float = 0.1
    table_init_std: float = 0.02
    max_length: int = 512  # APE table rows (only the first train_length are trained, unless window_starts > 0)
    window_starts: int = 0  # each training batch starts at a position drawn from 0 .. window_starts (0: always at 0)

    def sample_batch(self, gen: torch.Generator) -> tuple[tuple[torch.Tensor, torch.Tensor] | torch.Tensor, torch.Tensor]:
        """A training batch; with ``window_starts`` the inputs are ``(tokens, start)``, the batch's first position."""
        tokens, targets = super().sample_batch(gen)
        if not self.window_starts:
            return tokens, targets
        if self.window_starts + self.train_length > self.max_length:
            raise ValueError("window_starts + train_length must fit in the APE table (max_length)")
        return (tokens, torch.randint(0, self.window_starts + 1, (), generator=gen, device="cpu")), targets

    def build_model(self) -> RopeHead | ApeHead:
        gen = generator(self.seed, self.init_stream)
        if self.kind == "rope":
            freqs = full_band_frequencies(self.dim, self.rope_base) if self.rope_full_band else None
            return RopeHead(self.dim, self.vocab, gen, self.qk_init_std, self.rope_base, self.rope_convention, freqs)
        if self.kind == "ape":
            return ApeHead(self.dim, self.vocab, self.max_length, gen, self.table_init_std)
        raise ValueError(f"kind must be 'rope' or 'ape', got {self.kind!r}")


@dataclass(frozen=True)
class LinearRunConfig(RunConfig):
    """The linear rotary kernel: only ``q`` is learned, with a fixed unit key (chapter 5).

    ``frequency_jitter`` (a fraction ``j`` in ``[0, 1]``) moves each frequency, by a factor drawn
    from the seed's ``"frequencies"`` stream, to a uniformly random place in the first ``j`` of
    its own cell of the geometric ladder (``theta_m * base^(-2 j u / d)``, ``u`` uniform in
    ``[0, 1)``): seeds then differ in their features, not only in the key's phases, and the
    min-norm kernel is a real replicate. ``j < 1`` keeps neighbouring frequencies apart, hence
    the features well conditioned.
    """

    dim: int = 64
    vocab: int = 64
    frequencies: Literal["full-band", "standard"] = "full-band"
    rope_base: float = 100.0
    frequency_jitter: float = 0.0
    weight_map: WeightMap = "linear"
    random_init: bool = False  # start ``q`` from a normal draw (std ``init_std``) instead of zero
    init_std: float = 1.0
    optimizer: Optimizer = "sgd"

    init_stream: ClassVar[str] = "linear-init"
    data_stream: ClassVar[str] = "linear-train-data"

    def frequency_set(self) -> torch.Tensor:
        """The rotary frequencies of this run (jittered within their ladder cells when asked)."""
        freqs = (full_band_frequencies if self.frequencies == "full-band" else rope_frequencies)(self.dim, self.rope_base)
        if self.frequency_jitter:
            u = torch.rand(self.dim // 2, generator=generator(self.seed, "frequencies"), dtype=torch.float64)
            freqs = freqs * self.rope_base ** (-2 * self.frequency_jitter * u / self.dim)
        return freqs

    def features(self, offsets: torch.Tensor) -> torch.Tensor:
        """``Phi`` at the given offsets, with the seed's unit key."""
        return offset_features(offsets, self.frequency_set(), unit_key(self.dim, self.seed))

    def build_model(self) -> LinearRotaryHead:
        init = None
        if self.random_init:
            init = self.init_std * torch.randn(self.dim, generator=generator(self.seed, self.init_stream),
                                               dtype=torch.float64)
        queries = torch.arange(self.offset, self.train_length)
        return LinearRotaryHead(self.features(torch.arange(self.train_length)), queries, self.vocab, init,
                                self.weight_map)
