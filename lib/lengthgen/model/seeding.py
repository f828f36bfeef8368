"""Deterministic random streams derived from one integer seed, and the device a run uses.

Each purpose (initialization, training data, evaluation data) gets its own CPU
``torch.Generator`` so that, for example, evaluating at an extra length never changes the
training data of a run. Random numbers are always drawn on the CPU and then moved to the
run's device, so a seed gives the same data on every device.
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


def resolve_device(name: str) -> torch.device:
    """``"auto"`` is CUDA when a GPU is visible, else the CPU; anything else is passed to ``torch.device``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} was asked for, but torch sees no CUDA device")
    return device
