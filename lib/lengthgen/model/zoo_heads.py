"""Single position-only heads for every encoding of the zoo, on the retrieval task of chapters 1-4.

Each head is a :class:`lengthgen.model.heads.PositionOnlyHead`: content enters only through the values, so the
attention pattern is a function of positions alone and the encoding is the only thing that differs.

* ``nope``: constant logits (the causal mask only);
* ``alibi``: the fixed bias ``-slope * (i - j)``, nothing positional to learn;
* ``randomized``: a RoPE head whose positions are a sorted random sample of ``0 .. span - 1`` (Ruoss et al. 2023),
  a fresh sample every training step and one fixed sample per length at evaluation;
* ``ape``: the learned table (:class:`lengthgen.model.heads.ApeHead`);
* ``sinusoidal``: the same bilinear form on the fixed sinusoidal table, ``q_t = W_q (c + s_t)``;
* ``t5``: one learned scalar per T5 bucket of the offset;
* ``rope``: :class:`lengthgen.model.heads.RopeHead`;
* ``partial_rope``: a RoPE head that rotates only a fraction of its planes (GPT-NeoX's ``rotary_pct``);
* ``fire``: FIRE's learned function of the normalized offset.

:class:`ZooRunConfig` defines a training run of any of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from .heads import ApeHead, HeadRunConfig, PositionOnlyHead, RopeHead
from .position_zoo import FireBias, alibi_bias, partial_rotary_frequencies, sinusoidal_table, t5_bucket
from .seeding import generator

ZOO: dict[str, str] = {
    "nope": "no position signal: constant logits",
    "alibi": "fixed linear bias -slope (i - j)",
    "randomized": "RoPE on sorted random positions from a wider range",
    "ape": "learned absolute table",
    "sinusoidal": "fixed sinusoidal absolute table",
    "t5": "learned scalar per T5 offset bucket",
    "rope": "rotary, every plane",
    "partial_rope": "rotary on a fraction of the planes",
    "fire": "learned MLP of the normalized offset",
}


class ConstantHead(PositionOnlyHead):
    """NoPE: every logit is zero, so a query spreads its attention uniformly over the keys it sees."""

    def position_logits(self, query_pos: torch.Tensor, key_pos: torch.Tensor) -> torch.Tensor:
        return torch.zeros(len(query_pos), len(key_pos), dtype=self.value.dtype, device=self.device)


class AlibiHead(PositionOnlyHead):
    """ALiBi alone: logit ``-slope * (i - j)``; the slope is fixed, as in ALiBi."""

    def __init__(self, dim: int, vocab: int, gen: torch.Generator, slope: float) -> None:
        super().__init__(dim, vocab, gen)
        self.slope = slope

    def position_logits(self, query_pos: torch.Tensor, key_pos: torch.Tensor) -> torch.Tensor:
        return alibi_bias(query_pos.to(self.device), key_pos.to(self.device), [self.slope])[0].to(self.value.dtype)


class SinusoidalHead(PositionOnlyHead):
    """Fixed sinusoidal positions (the paper's interleaved convention) in APE's bilinear form:
    ``q_t = W_q (c + s_t)``, ``k_s = W_k (c + s_s)``, logit ``<q_t, k_s> / sqrt(d)``; defined at every position."""

    def __init__(self, dim: int, vocab: int, gen: torch.Generator) -> None:
        super().__init__(dim, vocab, gen)
        self.const = nn.Parameter(torch.randn(dim, generator=gen))
        self.w_q = nn.Parameter(torch.randn(dim, dim, generator=gen) / math.sqrt(dim))
        self.w_k = nn.Parameter(torch.randn(dim, dim, generator=gen) / math.sqrt(dim))

    def position_logits(self, query_pos: torch.Tensor, key_pos: torch.Tensor) -> torch.Tensor:
        def table(pos: torch.Tensor) -> torch.Tensor:
            return sinusoidal_table(pos.to(self.device), self.dim).to(self.value.dtype)

        queries = (self.const + table(query_pos)) @ self.w_q.T
        keys = (self.const + table(key_pos)) @ self.w_k.T
        return queries @ keys.T / math.sqrt(self.dim)


class T5Head(PositionOnlyHead):
    """T5's relative bias as the whole logit: one learned scalar per bucket of the causal offset."""

    def __init__(self, dim: int, vocab: int, gen: torch.Generator, init_std: float, num_buckets: int = 32,
                 max_distance: int = 128) -> None:
        super().__init__(dim, vocab, gen)
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.bucket_logit = nn.Parameter(init_std * torch.randn(num_buckets, generator=gen))

    def position_logits(self, query_pos: torch.Tensor, key_pos: torch.Tensor) -> torch.Tensor:
        relative = key_pos.to(self.device)[None, :] - query_pos.to(self.device)[:, None]
        return self.bucket_logit[t5_bucket(relative, False, self.num_buckets, self.max_distance)]


class FireHead(PositionOnlyHead):
    """FIRE as the whole logit: ``MLP(psi(i - j) / psi(max(i, L)))`` with learned ``c``, ``L`` and MLP."""

    def __init__(self, dim: int, vocab: int, gen: torch.Generator, hidden: int, threshold_init: float) -> None:
        super().__init__(dim, vocab, gen)
        self.fire = FireBias(heads=1, hidden=hidden, c_init=1.0, threshold_init=threshold_init)
        self.fire.reset_parameters(gen)

    def position_logits(self, query_pos: torch.Tensor, key_pos: torch.Tensor) -> torch.Tensor:
        return self.fire(query_pos.to(self.device), key_pos.to(self.device))[0].to(self.value.dtype)


class RandomizedRopeHead(RopeHead):
    """RoPE on randomized positions: token ``i`` sits at the ``i``-th smallest of ``length`` positions drawn without
    replacement from ``0 .. span - 1``. Training passes each step's draw as ``start`` (position minus index); at
    evaluation (``start`` 0) every length gets one fixed draw from its own seeded stream."""

    def __init__(self, dim: int, vocab: int, gen: torch.Generator, qk_init_std: float, base: float, span: int,
                 position_seed: int) -> None:
        super().__init__(dim, vocab, gen, qk_init_std, base)
        self.span, self.position_seed = span, position_seed

    def evaluation_positions(self, length: int) -> torch.Tensor:
        """The fixed sorted draw that positions the tokens of a length-``length`` evaluation sequence."""
        gen = generator(self.position_seed, f"randomized-positions-{length}")
        return torch.randperm(self.span, generator=gen)[:length].sort().values.to(self.device)

    def attention(self, length: int, query_pos: torch.Tensor | None = None, start: int | torch.Tensor = 0,
                  ) -> torch.Tensor:
        """Causal attention weights ``(n_queries, length)``; token ``i`` at this step's draw ``i + start[i]`` in
        training, at the fixed evaluation draw when ``start`` is 0."""
        keys = torch.arange(length, device=self.device)
        queries = keys if query_pos is None else query_pos.to(self.device)
        evaluating = isinstance(start, int) and start == 0
        positions = self.evaluation_positions(length) if evaluating else keys + start
        logits = self.position_logits(positions[queries], positions)
        logits = logits.masked_fill(keys[None, :] > queries[:, None], float("-inf"))
        return torch.softmax(logits, dim=-1)


@dataclass(frozen=True)
class ZooRunConfig(HeadRunConfig):
    """A single position-only head with any encoding of the zoo on fixed-offset retrieval."""

    encoding: str = "rope"
    rotary_fraction: float = 0.25  # partial_rope: the share of coordinates rotated (GPT-NeoX rotary_pct)
    alibi_slope: float = 0.5  # alibi: the steepest slope of an eight-head model
    random_span: int = 1024  # randomized: positions are drawn from 0 .. random_span - 1
    fire_hidden: int = 32  # fire: width of the MLP

    init_stream: ClassVar[str] = "zoo-init"
    data_stream: ClassVar[str] = "zoo-train-data"

    def sample_batch(self, gen: torch.Generator) -> tuple[tuple[torch.Tensor, torch.Tensor] | torch.Tensor, torch.Tensor]:
        """A training batch; for ``randomized`` the inputs are ``(tokens, start)`` with ``start + index`` this step's
        sorted random positions."""
        tokens, targets = super().sample_batch(gen)
        if self.encoding != "randomized":
            return tokens, targets
        if self.random_span < self.train_length:
            raise ValueError("random_span must be at least train_length")
        positions = torch.randperm(self.random_span, generator=gen)[: self.train_length].sort().values
        return (tokens, positions - torch.arange(self.train_length)), targets

    def build_model(self) -> PositionOnlyHead:
        if self.encoding not in ZOO:
            raise ValueError(f"encoding must be one of {sorted(ZOO)}, got {self.encoding!r}")
        gen = generator(self.seed, self.init_stream)
        dim, vocab = self.dim, self.vocab
        if self.encoding == "nope":
            return ConstantHead(dim, vocab, gen)
        if self.encoding == "alibi":
            return AlibiHead(dim, vocab, gen, self.alibi_slope)
        if self.encoding == "randomized":
            return RandomizedRopeHead(dim, vocab, gen, self.qk_init_std, self.rope_base, self.random_span, self.seed)
        if self.encoding == "ape":
            return ApeHead(dim, vocab, self.max_length, gen, self.table_init_std)
        if self.encoding == "sinusoidal":
            return SinusoidalHead(dim, vocab, gen)
        if self.encoding == "t5":
            return T5Head(dim, vocab, gen, self.qk_init_std)
        if self.encoding == "partial_rope":
            freqs = partial_rotary_frequencies(dim, self.rotary_fraction, self.rope_base)
            return RopeHead(dim, vocab, gen, self.qk_init_std, self.rope_base, freqs=freqs)
        if self.encoding == "fire":
            return FireHead(dim, vocab, gen, self.fire_hidden, float(self.train_length))
        return RopeHead(dim, vocab, gen, self.qk_init_std, self.rope_base)
