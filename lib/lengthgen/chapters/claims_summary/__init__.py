"""The claims summary page (``99_claims_summary``): every record of this build, audited
(:func:`lengthgen.book.audit.audit`), every claim of the papers judged (:mod:`lengthgen.claims.paper`), and the
committed sweeps' wall times. The page asserts that every chapter has a current record and that no
claim failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...book.audit import SUMMARY, Audit
from ...book.parameters import ChapterParameters, parameter
from ...book.paths import RECORDS_DIR, REPO_ROOT, SWEEPS_DIR
from ...book.sweep import expand, load_spec, stored_records


@dataclass(frozen=True)
class Parameters(ChapterParameters):
    """The summary page's parameters."""

    chapter = SUMMARY
    always_execute = True
    records_folder: str = parameter("folder of results records to summarize ('' = data/records, the book build's)")


def folder_of(p: Parameters) -> Path:
    """The records folder the page summarizes."""
    return Path(p.records_folder) if p.records_folder else RECORDS_DIR


# -- the committed sweeps' wall time, run by run ---------------------------------------------------------------

def run_settings(overrides: dict, varying: list[str]) -> str:
    """A run's own settings: the values of the parameters that vary between its chapter's runs in the spec."""
    def shown(value: object) -> str:
        return "+".join(map(str, value)) if isinstance(value, list) else str(value)

    return ", ".join(f"{name}={shown(overrides[name])}" for name in varying) or "(the only run)"


def sweep_wall_times(sweeps_dir: Path = SWEEPS_DIR, root: Path = REPO_ROOT) -> pd.DataFrame:
    """One row per stored run of every committed sweep: its settings, whether it is current, and its wall time.

    A run is ``current`` when its record was made by the chapter's current code and notebook (the same
    fingerprints the chapter itself checks before it reads the sweep; each chapter's fingerprint is
    computed once here, not once per run). ``wall_time_s`` is the chapter's own wall time inside the
    run as its record states it (training and measuring, without starting the kernel), on the machine
    named by ``processor``; ``workers`` is how many runs the spec executes at once, so a sweep's
    elapsed time is about its summed wall time over ``workers``.
    """
    rows = []
    for spec_path in sorted(sweeps_dir.glob("*/spec.yaml")):
        spec = load_spec(spec_path)
        current = {run.key for run in expand(spec)}
        records = list(stored_records(spec_path.parent, None))
        for chapter in dict.fromkeys(r["chapter"] for r in records):
            mine = [r for r in records if r["chapter"] == chapter]
            names = sorted({name for r in mine for name in r["overrides"]})
            varying = [n for n in names if len({repr(r["overrides"].get(n)) for r in mine}) > 1]
            for r in mine:
                rows.append(dict(sweep=spec_path.parent.name, chapter=chapter, settings=run_settings(r["overrides"], varying),
                                 key=r["key"], current=r["key"] in current, rekeyed_from=rekeyed_text(r),
                                 wall_time_s=float(r.get("wall_time_s") or float("nan")),
                                 workers=int(spec.get("workers", 1)), processor=r.get("machine", {}).get("processor", "")))
    return pd.DataFrame(rows, columns=["sweep", "chapter", "settings", "key", "current", "rekeyed_from", "wall_time_s",
                                       "workers", "processor"])


def rekeyed_text(record: dict) -> str:
    """The keys a run record was carried over from, each with the commit that verified the move ('' if none)."""
    return ", ".join(f"{entry['key']} (verified by {entry['verified_by'][:10]})" for entry in record.get("rekeyed_from", []))


def sweep_time_totals(runs: pd.DataFrame) -> pd.DataFrame:
    """Per sweep: stored, current and re-keyed runs, workers, summed and per-run wall time (from
    :func:`sweep_wall_times`)."""
    grouped = runs.assign(rekeyed=runs.rekeyed_from != "").groupby("sweep", sort=False)
    return pd.DataFrame(dict(
        runs=grouped.size(), current=grouped.current.sum(), rekeyed=grouped.rekeyed.sum(), workers=grouped.workers.first(),
        total_min=grouped.wall_time_s.sum() / 60, elapsed_min=grouped.wall_time_s.sum() / 60 / grouped.workers.first(),
        median_s=grouped.wall_time_s.median(), min_s=grouped.wall_time_s.min(), max_s=grouped.wall_time_s.max(),
    )).reset_index()


def claim_values(found: Audit) -> dict[str, object]:
    """Every claim's value: records missing, stale, made elsewhere, and claims failed."""
    return dict(records_missing=len(found.missing), records_stale=len(found.stale), records_foreign=len(found.foreign),
                claims_failed=len(found.failed))
