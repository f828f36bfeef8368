"""The one reader of committed sweeps: a chapter's runs that a sweep's spec lists, from their current records.

A chapter with a committed sweep (``data/sweeps/<name>``) runs itself there on seeds reserved before any of those
runs and reads the records back beside its own run. :func:`committed_runs` is that reader for every chapter (6, 10,
11, 12 and 13): which runs the spec lists, which of them have a record made by this code and this notebook, every
check of those (judged against the current claims), their records, and what the chapter builds from them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..book.paths import SWEEPS_DIR
from ..book.sweep import checks_table, expand, load_spec, stored_records


@dataclass
class CommittedRuns:
    """The runs of one chapter that a committed sweep's spec lists now (present: a record made by this code and this
    notebook)."""

    checks: pd.DataFrame  # one row per (present run, check): key, name, value, passed, role, param_* (the overrides)
    expected: int  # runs the spec lists
    missing: int  # of those, runs with no current record
    records: list[dict] = field(default_factory=list)  # every present run's record, in key order
    study: Any = None  # what the chapter builds from the records (None without a present run)

    @property
    def parameters(self) -> list[dict]:
        """Each present run's parameters in full (the chapter's defaults under its overrides)."""
        return [r["parameters"] for r in self.records]

    @property
    def overrides(self) -> list[dict]:
        """The parameters each present run was given."""
        return [r["overrides"] for r in self.records]

    @property
    def wall_seconds(self) -> list[float]:
        """Each present run's wall time (NaN where none was recorded)."""
        return [float("nan") if r["wall_time_s"] is None else float(r["wall_time_s"]) for r in self.records]

    def rows(self, part: str, columns: list[str] | None = None) -> pd.DataFrame:
        """The rows every present record keeps under ``details[part]``, one table."""
        return pd.DataFrame([row for r in self.records for row in r["details"][part]], columns=columns)

    def setting(self, name: str) -> Any:
        """The value of parameter ``name`` that every present run shares (None without one); runs that differ in it
        would be pooled by the chapter's verdicts, so that stops the reader."""
        values = {json.dumps(p[name]) for p in self.parameters}
        if len(values) > 1:
            raise ValueError(f"the committed sweep mixes {name} values {sorted(values)}; its verdicts need one")
        return self.parameters[0][name] if values else None


def committed_runs(name: str, chapter: str, study: Callable[[CommittedRuns], Any] | None = None) -> CommittedRuns:
    """Read the committed sweep ``data/sweeps/<name>``: every current run of ``chapter``, its checks (with, for
    chapters that take ``offsets``, the run's first ``offset`` and its ``seeds`` as ``"first-last"``) and
    ``study(runs)`` where given and a run is present."""
    folder = SWEEPS_DIR / name
    keys = {r.key for r in expand(load_spec(folder / "spec.yaml")) if r.chapter == chapter}
    records = list(stored_records(folder, keys))
    checks = checks_table(records)
    if len(checks):
        checks["passed"] = checks.passed.map(lambda v: v if v is None or v != v else bool(v))
    if len(checks) and "param_offsets" in checks:
        checks["offset"] = checks.param_offsets.map(lambda o: int(json.loads(o)[0]))
        checks["seeds"] = [f"{a}-{a + n - 1}" for a, n in zip(checks.param_seed_start, checks.param_seeds, strict=True)]
    runs = CommittedRuns(checks, len(keys), len(keys) - len(records), records)
    if study is not None and records:
        runs.study = study(runs)
    return runs
