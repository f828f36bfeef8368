"""One chapter harness: the cells every chapter shares, written once.

The cell after a chapter's ``parameters`` cell is::

    from lengthgen.book.harness import Chapter
    chapter = Chapter("01_equivariance", globals())
    p = chapter.parameters

which validates the parameters (stopping before any work with a message naming the parameter,
the rule and the valid range), deletes the chapter's old results record, starts the stopwatch,
applies the plotting theme and glues every registered threshold (``thr_<claim>``) for the prose.
The claim-check cell calls :meth:`Chapter.check` and :meth:`Chapter.report` by registered claim
name, then :meth:`Chapter.finish`, which writes the record, glues the wall time and asserts.

Reruns and sweeps tell a chapter where its record goes by injecting ``_records_folder`` (a
name no reader sets) through papermill; otherwise it goes to ``data/records/``.
"""

from __future__ import annotations

import datetime
import math
import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from .. import __version__
from ..claims import Claim, claims_of, find
from . import fingerprint
from .glue import glue
from .parameters import parameters_of, user_names
from .paths import RECORDS_DIR, notebook_path
from .plotting import set_theme
from .records import COMPARISONS, ChapterRecord
from .timing import Stopwatch

RECORDS_OPTION = "_records_folder"  # injected by reruns and sweeps: where this run's record goes


def cpu_model() -> str:
    """The processor's model name (``/proc/cpuinfo`` on Linux), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, str]:
    """What ran the chapter: processor, system, Python and torch versions, torch threads."""
    import torch

    return dict(processor=cpu_model(), cores=str(os.cpu_count()), system=platform.platform(),
                python=platform.python_version(), torch=torch.__version__, threads=str(torch.get_num_threads()))


def format_threshold(claim: Claim, value: float) -> str:
    if not claim.comparison:
        return ""
    text = f"{value:.3g}"
    return f"{claim.comparison} {claim.threshold_text} = {text}" if claim.threshold_text else f"{claim.comparison} {text}"


class Chapter:
    """A chapter run: its validated parameters, its claim checks and its record."""

    def __init__(self, name: str, namespace: Mapping[str, Any]) -> None:
        self.name = name
        self.parameters = parameters_of(name).from_values(user_names(namespace))
        folder = namespace.get(RECORDS_OPTION)
        self.record_path = Path(folder or RECORDS_DIR) / f"{name}.json"
        self.record_path.unlink(missing_ok=True)  # a chapter that stops early leaves no record behind
        self.stopwatch = Stopwatch()
        self.claims = claims_of(name)
        self.record = ChapterRecord(name, self.parameters.as_dict())
        set_theme()
        for claim in self.claims.values():
            if claim.comparison:
                glue(f"thr_{claim.name}", self.threshold(claim.name))

    @property
    def defaults(self) -> dict:
        """The notebook's own parameters cell, validated (what a committed sweep's design keeps fixed), whatever this
        run's parameters are."""
        from .audit import current_defaults

        return current_defaults(self.name)

    @property
    def device(self) -> str:
        """The device the chapter's tensors live on (``device`` parameter resolved)."""
        from ..model.seeding import resolve_device

        return str(resolve_device(getattr(self.parameters, "device", "cpu")))

    def threshold(self, name: str) -> float:
        """The registered threshold of a claim at this chapter's parameters."""
        return find(self.name, name).threshold_for(self.parameters)

    def check(self, name: str, value: float) -> bool:
        """Record the registered claim ``name`` on the measured ``value``; returns whether it holds."""
        claim = find(self.name, name)
        if not claim.comparison:
            raise ValueError(f"claim {name!r} of {self.name} is registered as reported, not asserted: use report()")
        if claim.per_run:
            raise ValueError(f"claim {name!r} of {self.name} is registered per run: use check_runs()")
        return self.record.check(name, claim.statement, value, claim.comparison, self.threshold(name), claim.role)

    def check_runs(self, name: str, runs: pd.DataFrame) -> bool:
        """Record a per-run claim: ``runs`` has one row per run (``offset``, ``seed``, ``value``); the check's value is
        the number of runs whose value fails the registered comparison (NaN, *not judged*, a failure, when there is no
        run), and every run's verdict goes to the record."""
        claim = find(self.name, name)
        if not claim.per_run:
            raise ValueError(f"claim {name!r} of {self.name} is not registered per run: use check()")
        threshold = self.threshold(name)
        verdicts: list[bool | None] = [bool(COMPARISONS[claim.comparison](float(v), threshold)) and v == v
                                       for v in runs.value]
        if claim.given:  # judged only on the runs that pass the given claim (checked before it)
            given = self.record.details.get("per_run", {}).get(claim.given)
            if given is None:
                raise ValueError(f"claim {name!r} of {self.name} is judged given {claim.given!r}: check that one first")
            passing = {(run["offset"], run["seed"]) for run in given if run["passed"]}
            verdicts = [ok if (int(o), int(s)) in passing else None
                        for o, s, ok in zip(runs.offset, runs.seed, verdicts, strict=True)]
        self.record.details.setdefault("per_run", {})[name] = [
            dict(offset=int(o), seed=int(s), value=float(v), passed=ok)
            for o, s, v, ok in zip(runs.offset, runs.seed, runs.value, verdicts, strict=True)]
        judged = [ok for ok in verdicts if ok is not None]
        failing = len(judged) - sum(judged) if judged else math.nan  # no run judged: not judged, never a pass
        return self.record.check(name, f"runs failing: {claim.statement}", failing, "==", 0, claim.role)

    def report(self, name: str, value: float) -> None:
        """Record the registered reported number ``name``."""
        claim = find(self.name, name)
        if claim.comparison:
            raise ValueError(f"claim {name!r} of {self.name} is registered with a threshold: use check()")
        self.record.report(name, claim.statement, value)

    def judge(self, values: Mapping[str, Any]) -> ChapterRecord:
        """Check or report every registered claim from ``values`` (by claim name), then :meth:`finish`.

        A per-run claim's value is a table with one row per run (``offset``, ``seed``, ``value``); a
        registered claim missing from ``values`` stops the chapter, naming it. Other entries (numbers the
        prose uses) are ignored.
        """
        missing = [name for name in self.claims if name not in values]
        if missing:
            raise KeyError(f"{self.name}: registered claims without a measured value: {missing}")
        for claim in self.claims.values():
            value = values[claim.name]
            if not claim.comparison:
                self.report(claim.name, value)
            elif claim.per_run:
                self.check_runs(claim.name, value)
            else:
                self.check(claim.name, value)
        return self.finish()

    def finish(self) -> ChapterRecord:
        """Write the record (wall time, fingerprints, machine), glue the wall time, then assert every claim."""
        record = self.record
        missing = [c.name for c in self.claims.values() if c.name not in {k.name for k in record.checks}]
        if missing:
            raise AssertionError(f"{self.name}: registered claims never checked or reported: {missing}")
        notebook = notebook_path(self.name)
        record.wall_time_s = self.stopwatch.seconds()
        record.created_utc = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        record.build_fingerprint = fingerprint.build_fingerprint()
        record.code_fingerprint = fingerprint.code_fingerprint(self.name)
        record.measurement_fingerprint = fingerprint.measurement_fingerprint(self.name)
        record.notebook_hash = fingerprint.notebook_hash(notebook)
        record.library_version = __version__
        record.device = self.device
        record.machine = machine()
        record.save(self.record_path)
        glue("wall_time", record.wall_time_s)
        record.assert_all()
        asserted = [c for c in record.checks if c.passed is not None]
        print(f"{self.name}: {len(asserted)} claim checks passed; wall time {record.wall_time_s:.1f} s")
        return record
