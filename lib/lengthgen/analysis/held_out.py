"""Reading a chapter's committed sweep: the checks of its current runs on held-out seeds.

A chapter with a committed sweep (``data/sweeps/<name>``) runs itself there at its defaults on seeds reserved before
any of those runs, at offsets beside its default, and reads the records back beside its own run. This module is that
reader, shared by chapters 6, 10 and 13: which runs the spec lists, which of them have a record made by this code and
this notebook, and every check of those.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from ..book.paths import SWEEPS_DIR
from ..book.sweep import expand, load_spec, results_table


@dataclass
class HeldOutRuns:
    """The checks of the committed sweep's runs of one chapter that its spec lists now (fresh records only)."""

    checks: pd.DataFrame  # one row per (present run, check): key, name, value, passed, role, offset, seeds
    expected: int  # runs the spec lists
    missing: int  # of those, runs with no record made by this code and this notebook


def held_out_runs(name: str, chapter: str) -> HeldOutRuns:
    """Read the committed sweep ``data/sweeps/<name>``: every current run of ``chapter`` with its checks, its offset
    (the run's first) and its seeds (``"first-last"``); ``passed`` is a bool, or None/NaN for a reported number."""
    folder = SWEEPS_DIR / name
    keys = {r.key for r in expand(load_spec(folder / "spec.yaml")) if r.chapter == chapter}
    checks = results_table(folder, keys)
    present = set(checks.key) if len(checks) else set()
    if len(checks):
        checks["offset"] = checks.param_offsets.map(lambda o: int(json.loads(o)[0]))
        checks["seeds"] = [f"{a}-{a + n - 1}" for a, n in zip(checks.param_seed_start, checks.param_seeds, strict=True)]
        checks["passed"] = checks.passed.map(lambda v: v if v is None or v != v else bool(v))
    return HeldOutRuns(checks, len(keys), len(keys - present))
