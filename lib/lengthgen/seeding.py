"""Deterministic random streams derived from one integer seed.

Each purpose (initialization, training data, evaluation data) gets its own
``torch.Generator`` so that, for example, evaluating at an extra length never
changes the training data of a run.
"""

from __future__ import annotations

import hashlib

import torch


def derive_seed(seed: int, stream: str) -> int:
    """A 63-bit seed for the named stream, a pure function of ``(seed, stream)``."""
    digest = hashlib.sha256(f"{seed}:{stream}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def generator(seed: int, stream: str) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded for ``stream`` of run ``seed``."""
    return torch.Generator().manual_seed(derive_seed(seed, stream))
