"""Committed sweeps of held-out runs: the ``committed_sweep`` parameter group, and the rule held-out evidence is judged by.

A chapter with a committed sweep (``data/sweeps/<name>``) runs itself there on seeds it reserved before any of those
runs (its ``held_out_seeds``) and reads the records back beside the page's own run. Two rules follow, checked before any
work: the named sweep exists, and the page's own seeds avoid the reserved ones (a held-out seed seen on the page would
no longer be held out). The sweep's own runs set ``committed_sweep: ""``.

Chapters 6, 10, 11, 12 and 13 use this group; their reserved seeds come from the seed ledger (:mod:`.seeds`).

Held-out evidence pooled over many runs or heads is judged by one rule, chapter 7's: a claim may fail on a share
:data:`TOLERATED_FAILURE_RATE` of them (rare optimization failures), and does not hold when its count of failures has
an exact one-sided binomial p-value below :data:`SIGNIFICANCE` at that rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..book.parameters import ParameterError, parameter
from ..book.paths import SWEEPS_DIR
from .common import Seeds

TOLERATED_FAILURE_RATE = 0.05  # a claim may fail on this share of held-out runs (rare optimization failures)
SIGNIFICANCE = 0.01  # ... and is judged not to hold when more failures than that would give have p below this


@dataclass(frozen=True)
class CommittedSweep(Seeds):
    """The committed sweep a chapter reads, and the seeds that sweep holds out (set by the chapter)."""

    held_out_seeds: ClassVar[tuple[int, ...]] = ()
    committed_sweep: str = parameter("committed sweep of this chapter (a folder of data/sweeps) whose runs on held-out "
                                     "seeds are read beside this run's; '' for none (what the sweep's own runs use)")

    def check(self) -> None:
        super().check()
        if self.committed_sweep and not (SWEEPS_DIR / self.committed_sweep / "spec.yaml").exists():
            known = sorted(p.parent.name for p in SWEEPS_DIR.glob("*/spec.yaml"))
            raise ParameterError(f"parameter 'committed_sweep' = {self.committed_sweep!r} is out of range: no "
                                 f"data/sweeps/{self.committed_sweep}/spec.yaml; committed sweeps: {known} (or '')")
        held = self.held_out_seeds
        if self.committed_sweep and set(self.seed_list) & set(held):
            raise ParameterError(f"parameter 'seed_start' = {self.seed_start} is out of range: with a committed sweep, "
                                 f"this page's seeds ({self.seed_start} .. {self.seed_start + self.seeds - 1}) must "
                                 f"avoid the sweep's held-out seeds {held[0]} .. {held[-1]}")
