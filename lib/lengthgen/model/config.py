"""The one base of every configuration: a frozen dataclass that can be copied with changes and dumped."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Self


@dataclass(frozen=True)
class Config:
    """Base of every run and model configuration: immutable, hashable, JSON-friendly through :meth:`as_dict`."""

    def with_(self, **changes: Any) -> Self:
        """A copy with some fields changed."""
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """Every field (nested configurations included) as plain Python values."""
        return asdict(self)
