"""Results records: a chapter run's claim checks, and everything needed to tell whether they are current.

A chapter's harness (:class:`lengthgen.book.harness.Chapter`) deletes the chapter's record when
the chapter starts and writes a new one when it finishes, before it asserts. Each record holds
every claim check (measured value, comparison, threshold, verdict) and reported number, the
parameters, the wall time, the UTC time, and what produced it: the build fingerprint, the
chapter's code fingerprint, the notebook hash, the library version, the device and the machine.
The claims summary page, reruns (``lengthgen.book.rerun``) and sweeps (``lengthgen.book.sweep``)
all read these JSON files; the folder they go to is always an explicit argument.
"""

from __future__ import annotations

import json
import math
import operator
import os
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

COMPARISONS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq}


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
    """One claim check, ``value <comparison> threshold``, or a reported number (``passed`` is None)."""

    name: str
    claim: str
    value: float
    comparison: str
    threshold: float
    passed: bool | None
    role: str = "evidence"  # evidence, proof, sanity, or reported


@dataclass
class ChapterRecord:
    """The claim checks of one chapter run and what produced them."""

    chapter: str
    parameters: dict[str, Any]
    checks: list[Check] = field(default_factory=list)
    wall_time_s: float | None = None
    created_utc: str = ""
    build_fingerprint: str = ""
    code_fingerprint: str = ""
    measurement_fingerprint: str = ""
    notebook_hash: str = ""
    library_version: str = ""
    device: str = ""
    machine: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)  # structured findings a chapter passes on (e.g. failing sweep checks)

    def check(self, name: str, claim: str, value: float, comparison: str, threshold: float, role: str = "evidence") -> bool:
        """Record ``value <comparison> threshold`` under ``name``; returns whether it holds (NaN never does)."""
        if comparison not in COMPARISONS:
            raise ValueError(f"comparison must be one of {list(COMPARISONS)}, got {comparison!r}")
        value, threshold = float(value), float(threshold)
        passed = (not math.isnan(value)) and bool(COMPARISONS[comparison](value, threshold))
        self.checks.append(Check(name, claim, value, comparison, threshold, passed, role))
        return passed

    def report(self, name: str, claim: str, value: float) -> None:
        """Record a measured number that the chapter reports but does not assert."""
        self.checks.append(Check(name, claim, float(value), "", math.nan, None, "reported"))

    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.passed is False]

    def save(self, path: Path) -> Path:
        """Write the record to ``path`` atomically (temporary file, then rename)."""
        write_json_atomically(Path(path), dict(asdict(self), parameters=plain(self.parameters), details=plain(self.details)))
        return Path(path)

    def assert_all(self) -> None:
        """Raise ``AssertionError`` naming every failed check."""
        failed = self.failures()
        if failed:
            lines = [f"{c.name}: {c.claim}: measured {c.value:.6g}, required {c.comparison} {c.threshold:.6g}" for c in failed]
            raise AssertionError("claim check failed:\n" + "\n".join(lines))


def write_json_atomically(path: Path, payload: dict) -> None:
    """Write JSON to ``path`` so that readers never see a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.{id(payload)}.tmp")
    try:
        tmp.write_text(json.dumps(payload, indent=1, sort_keys=True))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class RecordFileError(ValueError):
    """A record file that cannot be read as a record; the message names the file."""


def load_record(path: Path) -> dict:
    """One record as a plain dict; an unreadable or malformed file raises :class:`RecordFileError` naming it."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RecordFileError(f"{path}: not a readable results record ({err})") from err
    if not isinstance(record, dict):
        raise RecordFileError(f"{path}: not a results record (a JSON {type(record).__name__}, not an object)")
    return record


def load_records(directory: Path) -> dict[str, dict]:
    """Every record in a folder, by file stem (normally the chapter name)."""
    return {p.stem: load_record(p) for p in sorted(Path(directory).glob("*.json"))}


def checks_table(records: list[dict]) -> pd.DataFrame:
    """Tidy table of every check of every record.

    Columns: ``chapter, name, claim, role, value, comparison, threshold, passed, wall_time_s``.
    """
    rows = [dict(chapter=r["chapter"], wall_time_s=r.get("wall_time_s"), **c) for r in records for c in r["checks"]]
    columns = ["chapter", "name", "claim", "role", "value", "comparison", "threshold", "passed", "wall_time_s"]
    return pd.DataFrame(rows, columns=columns)
