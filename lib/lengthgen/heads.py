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
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .encodings import Convention, rope_frequencies, rotate


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

    def attention(self, length: int, query_pos: torch.Tensor | None = None) -> torch.Tensor:
        """Causal attention weights ``(n_queries, length)`` for the given query positions (default: all)."""
        keys = torch.arange(length)
        queries = keys if query_pos is None else query_pos
        logits = self.position_logits(queries, keys)
        logits = logits.masked_fill(keys[None, :] > queries[:, None], float("-inf"))
        return torch.softmax(logits, dim=-1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits ``(batch, length, vocab)`` at every position of ``tokens``."""
        attn = self.attention(tokens.shape[1]).to(self.value.dtype)
        onehot = nn.functional.one_hot(tokens, self.vocab).to(attn.dtype)
        mass = attn @ onehot  # (batch, length, vocab): attention mass per token value
        return mass @ self.readout_matrix()

    def token_mass(self, tokens: torch.Tensor, query_pos: torch.Tensor) -> torch.Tensor:
        """Attention mass per vocabulary entry, ``(batch, n_queries, vocab)``, for chosen queries.

        Memory-frugal: attention weights are scattered into vocabulary bins, so no
        per-position value vector is ever materialized. Cost is O(batch * n_queries * length).
        """
        attn = self.attention(tokens.shape[1], query_pos).to(self.value.dtype)
        batch, n_q = tokens.shape[0], attn.shape[0]
        mass = torch.zeros(batch, n_q, self.vocab, dtype=attn.dtype)
        index = tokens[:, None, :].expand(batch, n_q, tokens.shape[1])
        return mass.scatter_add_(2, index, attn[None].expand(batch, -1, -1))

    def query_logits(self, tokens: torch.Tensor, query_pos: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits ``(batch, n_queries, vocab)`` at the chosen query positions."""
        return self.token_mass(tokens, query_pos) @ self.readout_matrix()


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
        return self.position_logits(torch.zeros(1, dtype=torch.long), -offsets)[0]


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
        if int(max(query_pos.max(), key_pos.max())) >= self.max_length:
            raise ValueError(f"position beyond the APE table (max_length={self.max_length})")
        queries = (self.const + self.table[query_pos]) @ self.w_q.T
        keys = (self.const + self.table[key_pos]) @ self.w_k.T
        return queries @ keys.T / math.sqrt(self.dim)
