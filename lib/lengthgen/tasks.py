"""The fixed-offset retrieval task.

Tokens are i.i.d. uniform over a vocabulary of size ``vocab``. At every query
position ``t >= offset`` the model must output the token at ``t - offset``.
Positions ``t < offset`` have no target and are ignored.
"""

from __future__ import annotations

import torch

IGNORE = -100  # the target value cross-entropy skips


def sample_tokens(batch: int, length: int, vocab: int, gen: torch.Generator) -> torch.Tensor:
    """A ``(batch, length)`` int64 tensor of i.i.d. uniform tokens."""
    return torch.randint(0, vocab, (batch, length), generator=gen)


def offset_targets(tokens: torch.Tensor, offset: int) -> torch.Tensor:
    """Targets of the offset task: ``target[:, t] = tokens[:, t - offset]``, ``IGNORE`` for ``t < offset``."""
    targets = torch.full_like(tokens, IGNORE)
    targets[:, offset:] = tokens[:, : tokens.shape[1] - offset]
    return targets
