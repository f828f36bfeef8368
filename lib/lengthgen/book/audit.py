"""Which chapter records of a build are current: the summary page's audit, and the notebook defaults it checks against.

:func:`audit` reads a records folder and accepts a record only if it is *current*: one per
chapter of the table of contents, made by the chapter's current code (code fingerprint) and
notebook (notebook hash), at the notebook's own parameters. Anything else is reported by
name: a chapter without a record (it failed before its claim check, or never ran), a stale
record (other code, another notebook, other parameters), a foreign record (a chapter the book
does not list).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from . import fingerprint
from .bookcache import toc_chapters
from .judging import rejudge
from .parameters import parameters_of
from .paths import REPO_ROOT, notebook_path
from .records import checks_table, load_records
from .rerun import default_parameters

SUMMARY = "99_claims_summary"  # the page that audits the others


@dataclass
class Audit:
    """What the records folder holds, judged against the current book."""

    chapters: list[str]  # the toc's chapters, in book order, without this page
    records: dict[str, dict]  # current records by chapter
    missing: list[str] = field(default_factory=list)
    stale: dict[str, str] = field(default_factory=dict)  # chapter -> why
    foreign: list[str] = field(default_factory=list)

    @property
    def checks(self) -> pd.DataFrame:
        """Every check of every current record, in book order."""
        return checks_table([self.records[c] for c in self.chapters if c in self.records])

    @property
    def failed(self) -> pd.DataFrame:
        checks = self.checks
        return checks[checks.passed.map(lambda passed: passed is False)]


def current_defaults(chapter: str, root: Path = REPO_ROOT) -> dict:
    """The chapter's notebook parameters, validated, as a record stores them."""
    return parameters_of(chapter).from_values(default_parameters(notebook_path(chapter, root))).as_dict()


def audit(folder: Path, root: Path = REPO_ROOT) -> Audit:
    """Judge every record in ``folder`` against the table of contents, the current code and the notebooks."""
    chapters = [c for c in toc_chapters(root) if c != SUMMARY]
    found = {name: record for name, record in load_records(folder).items() if name != SUMMARY}
    result = Audit(chapters, {})
    result.foreign = sorted(name for name in found if name not in chapters)
    for chapter in chapters:
        record = found.get(chapter)
        if record is None:
            result.missing.append(chapter)
            continue
        reasons = stale_reasons(chapter, record, root)
        if reasons:
            result.stale[chapter] = "; ".join(reasons)
        else:
            result.records[chapter] = rejudge(record)
    return result


def stale_reasons(chapter: str, record: dict, root: Path = REPO_ROOT) -> list[str]:
    """Why a chapter's record is not current (another chapter's, other code, another notebook, other parameters)."""
    reasons = []
    if record.get("chapter") != chapter:
        reasons.append(f"the record names chapter {record.get('chapter')!r}")
    if record.get("code_fingerprint") != fingerprint.code_fingerprint(chapter, root):
        reasons.append("made by other code (code fingerprint differs)")
    if record.get("notebook_hash") != fingerprint.notebook_hash(notebook_path(chapter, root)):
        reasons.append("made by another version of the notebook (notebook hash differs)")
    if record.get("parameters") != current_defaults(chapter, root):
        reasons.append("made with other parameters than the notebook's")
    return reasons
