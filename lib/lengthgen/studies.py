"""Helpers shared by the chapters' studies: configs over seeds, evaluated lengths."""

from __future__ import annotations

from typing import Any

from .training import RunConfig

RUN_FIELDS = ("dim", "vocab", "train_length", "offset", "steps", "batch", "lr")


def run_configs(params: dict[str, Any], kind: str, **overrides: Any) -> list[RunConfig]:
    """One :class:`RunConfig` per seed ``0 .. seeds-1`` from a chapter's validated parameters."""
    shared = {name: params[name] for name in RUN_FIELDS if name in params}
    if "length_factor" in params:
        shared["max_length"] = params["length_factor"] * params["train_length"]
    shared.update(overrides)
    return [RunConfig(kind=kind, seed=seed, **shared) for seed in range(params["seeds"])]


def offset_grid_configs(params: dict[str, Any], kind: str, **overrides: Any) -> list[RunConfig]:
    """One :class:`RunConfig` per (offset, seed) over ``params["offsets"]`` x ``0 .. seeds-1``."""
    return [cfg for k in params["offsets"] for cfg in run_configs({**params, "offset": k}, kind, **overrides)]


def doubling_lengths(train_length: int, length_factor: int) -> list[int]:
    """``T, 2T, 4T, ...`` up to and including ``length_factor * T``."""
    lengths, factor = [], 1
    while factor < length_factor:
        lengths.append(factor * train_length)
        factor *= 2
    return lengths + [length_factor * train_length]
