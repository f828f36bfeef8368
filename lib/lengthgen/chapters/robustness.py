"""Chapter 7 (``07_robustness``): the single-head claims over many seeds and offsets, from a committed sweep.

The chapter reads ``data/sweeps/<sweep_name>/`` and never reruns it. Only the runs the spec
lists *now* count: a run's key hashes its parameters, the chapter's code fingerprint and its
notebook hash, so a run made by older code or an older notebook is missing, not shown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..book.parameters import ChapterParameters, ParameterError, parameter
from ..book.paths import SWEEPS_DIR
from ..book.records import load_record
from ..book.sweep import Run, expand, load_spec
from .claims import Claim, reported


@dataclass(frozen=True)
class Parameters(ChapterParameters):
    """Chapter 7's parameters."""

    chapter = "07_robustness"
    data_inputs = ("data/sweeps",)
    sweep_name: str = parameter("folder under data/sweeps/ holding spec.yaml and results.csv")

    def check(self) -> None:
        super().check()
        folder = SWEEPS_DIR / self.sweep_name
        if not (folder / "spec.yaml").is_file() or not (folder / "results.csv").is_file():
            known = sorted(p.parent.name for p in SWEEPS_DIR.glob("*/spec.yaml"))
            raise ParameterError(f"parameter 'sweep_name' = {self.sweep_name!r} names no committed sweep "
                                 f"(a folder with spec.yaml and results.csv): must be one of {known}")


CLAIMS = (
    Claim("missing_runs", "runs of the spec missing from the committed table (stale or never run)", "==", 0,
          "The committed sweep must hold every run its spec lists, made by the current code and notebooks.",
          role="sanity"),
    Claim("error_runs", "runs that stopped with an error before their claim check", "==", 0,
          "Every run of the sweep must reach its claim check.", role="sanity"),
    reported("sweep_checks_failed", "asserted checks of the sweep that fail (listed on the claims summary)"),
)


@dataclass
class Sweep:
    """A committed sweep: the spec's runs and the rows of those that are present."""

    folder: Path
    expected: list[Run]
    results: pd.DataFrame  # rows of current runs only, with offset and seeds columns
    missing: list[str]  # keys of spec runs absent from the table (never run, or made by other code)

    def worker_seconds(self) -> float:
        """Wall time the present runs took, summed over runs (from their records)."""
        present = set(self.results.key)
        return sum(load_record(path).get("wall_time_s") or 0.0 for path in (self.folder / "runs").glob("*.json")
                   if path.stem in present)

    @property
    def asserted(self) -> pd.DataFrame:
        rows = self.results[self.results.passed.notna()].copy()
        rows["passed"] = rows.passed.astype(str).str.lower() == "true"
        return rows

    @property
    def reported(self) -> pd.DataFrame:
        return self.results[self.results.passed.isna()]

    def runs(self) -> pd.DataFrame:
        """One row per run: chapter, offset, status, key."""
        return self.results.groupby(["chapter", "offset"]).agg(status=("status", "first"), key=("key", "first")).reset_index()

    def failing(self) -> pd.DataFrame:
        """Every asserted check that fails, with its run's offset."""
        asserted = self.asserted
        return asserted[~asserted.passed][["chapter", "offset", "name", "claim", "value", "comparison", "threshold"]]


def offset_of(overrides: str) -> int:
    """The target offset of a single-offset run, from its overrides."""
    values = json.loads(overrides)["offsets"]
    if len(values) != 1:
        raise ValueError(f"a robustness run must have one offset, got {values}")
    return int(values[0])


def load_sweep(name: str) -> Sweep:
    """Read a committed sweep, keeping only the rows of runs its spec lists now."""
    folder = SWEEPS_DIR / name
    expected = expand(load_spec(folder / "spec.yaml"))
    keys = {run.key for run in expected}
    table = pd.read_csv(folder / "results.csv")
    results = table[table.key.isin(keys)].copy()
    results["offset"] = results.overrides.map(offset_of)
    results["seeds"] = results.overrides.map(lambda o: json.loads(o)["seeds"])
    missing = sorted(keys - set(results.key))
    if len(results) == 0:
        raise RuntimeError(f"the committed sweep {folder} holds none of the {len(keys)} runs its spec lists now (made by "
                           f"other code or notebooks, or never run): regenerate it with "
                           f"`make sweep SPEC={folder.relative_to(SWEEPS_DIR.parents[1])}/spec.yaml ARGS=--prune`")
    return Sweep(folder, expected, results, missing)


def failure_lines(failing: pd.DataFrame) -> list[str]:
    """One line per failing sweep check, for the chapter's prose and the claims summary."""
    return [f"{r.chapter} k={r.offset}: {r.name} = {r.value:.4g} (needs {r.comparison} {r.threshold:g})"
            for r in failing.itertuples()]
