"""Machine-readable results records: each chapter's claim checks, parameters and wall time.

A chapter's claim-check cell builds a :class:`ChapterRecord`, adds one :meth:`~ChapterRecord.check`
per claim (the measured value, the comparison and the threshold), writes the record and
then asserts every check. Runs can then be compared without parsing notebooks: the claims
summary page, reruns (``lengthgen.rerun``) and sweeps (``lengthgen.sweep``) all read these
JSON files.

Records go to ``$LENGTHGEN_RECORDS`` when set (reruns and sweeps point it at their own
folder), otherwise to ``data/records/`` (rewritten by every build, not committed).
"""

from __future__ import annotations

import json
import math
import operator
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from . import __version__
from .paths import DATA_DIR

RECORDS_ENV = "LENGTHGEN_RECORDS"
COMPARISONS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq}


def records_dir() -> Path:
    """Where records are written: ``$LENGTHGEN_RECORDS`` or ``data/records``."""
    return Path(os.environ.get(RECORDS_ENV, DATA_DIR / "records"))


def plain(value: Any) -> Any:
    """A JSON-friendly copy of ``value`` (numpy scalars and arrays, tuples, paths)."""
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


@dataclass
class Check:
    """One claim: ``value <comparison> threshold``."""

    name: str
    claim: str
    value: float
    comparison: str
    threshold: float
    passed: bool | None  # None: reported, not asserted


@dataclass
class ChapterRecord:
    """The claim checks of one chapter run."""

    chapter: str
    parameters: dict[str, Any]
    checks: list[Check] = field(default_factory=list)
    wall_time_s: float | None = None
    library_version: str = __version__

    def check(self, name: str, claim: str, value: float, comparison: str, threshold: float) -> bool:
        """Record ``value <comparison> threshold`` under ``name``; returns whether it holds."""
        if comparison not in COMPARISONS:
            raise ValueError(f"comparison must be one of {list(COMPARISONS)}, got {comparison!r}")
        value, threshold = float(value), float(threshold)
        passed = (not math.isnan(value)) and bool(COMPARISONS[comparison](value, threshold))
        self.checks.append(Check(name, claim, value, comparison, threshold, passed))
        return passed

    def report(self, name: str, claim: str, value: float) -> None:
        """Record a measured number that the chapter reports but does not assert (``passed`` is None)."""
        self.checks.append(Check(name, claim, float(value), "", math.nan, None))

    def save(self, wall_time_s: float | None = None, directory: Path | None = None) -> Path:
        """Write ``<chapter>.json`` atomically (temporary file, then rename)."""
        self.wall_time_s = wall_time_s
        directory = records_dir() if directory is None else Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.chapter}.json"
        payload = dict(asdict(self), parameters=plain(self.parameters))
        write_json_atomically(path, payload)
        return path

    def assert_all(self) -> None:
        """Raise ``AssertionError`` naming every failed check."""
        failed = [c for c in self.checks if c.passed is False]
        if failed:
            lines = [f"{c.name}: {c.claim}: measured {c.value:.6g}, required {c.comparison} {c.threshold:.6g}" for c in failed]
            raise AssertionError("claim check failed:\n" + "\n".join(lines))


def write_json_atomically(path: Path, payload: dict) -> None:
    """Write JSON to ``path`` so that readers never see a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(payload, indent=1, sort_keys=True))
    os.replace(tmp, path)


def load_record(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def checks_table(records: list[dict]) -> pd.DataFrame:
    """Tidy table of every check of every record: ``chapter, name, claim, value, comparison, threshold, passed, wall_time_s``."""
    rows = [dict(chapter=r["chapter"], wall_time_s=r.get("wall_time_s"), **c) for r in records for c in r["checks"]]
    columns = ["chapter", "name", "claim", "value", "comparison", "threshold", "passed", "wall_time_s"]
    return pd.DataFrame(rows, columns=columns)


def load_records(directory: Path | None = None) -> list[dict]:
    """Every record in a folder, sorted by chapter."""
    directory = records_dir() if directory is None else Path(directory)
    return [load_record(p) for p in sorted(directory.glob("*.json"))]
