"""The claims summary page (``99_claims_summary``): every record of this build, audited, and every claim.

:func:`audit` reads the records folder and accepts a record only if it is *current*: one per
chapter of the table of contents, made by the chapter's current code (code fingerprint) and
notebook (notebook hash), at the notebook's own parameters. Anything else is reported by
name: a chapter without a record (it failed before its claim check, or never ran), a stale
record (other code, another notebook, other parameters), a foreign record (a chapter the book
does not list). The page asserts that there is none of these and that no claim failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..book import fingerprint
from ..book.bookcache import toc_chapters
from ..book.parameters import ChapterParameters, parameter
from ..book.paths import RECORDS_DIR, REPO_ROOT, notebook_path
from ..book.records import checks_table, load_records
from . import parameters_of
from .claims import Claim, claims_of

SUMMARY = "99_claims_summary"


@dataclass(frozen=True)
class Parameters(ChapterParameters):
    """The summary page's parameters."""

    chapter = SUMMARY
    always_execute = True
    records_folder: str = parameter("folder of results records to summarize ('' = data/records, the book build's)")


CLAIMS = (
    Claim("records_missing", "chapters in the table of contents without a record", "==", 0,
          "Every chapter must have run in this build and written its record.", role="sanity"),
    Claim("records_stale", "records made by other code, another notebook or other parameters", "==", 0,
          "A record is current only if its build fingerprint, notebook hash and parameters match this build.",
          role="sanity"),
    Claim("records_foreign", "records of chapters not in the table of contents", "==", 0,
          "A record the book does not list (a deleted chapter, a stray file) must not be shown as this build's.",
          role="sanity"),
    Claim("claims_failed", "asserted claim checks that fail", "==", 0,
          "The book is green only if every asserted claim of every chapter holds."),
)


def folder_of(p: Parameters) -> Path:
    """The records folder the page summarizes."""
    return Path(p.records_folder) if p.records_folder else RECORDS_DIR


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
    from ..book.rerun import default_parameters

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
        reasons = []
        if record.get("chapter") != chapter:
            reasons.append(f"the record names chapter {record.get('chapter')!r}")
        if record.get("code_fingerprint") != fingerprint.code_fingerprint(chapter, root):
            reasons.append("made by other code (code fingerprint differs)")
        if record.get("notebook_hash") != fingerprint.notebook_hash(notebook_path(chapter, root)):
            reasons.append("made by another version of the notebook (notebook hash differs)")
        if record.get("parameters") != current_defaults(chapter, root):
            reasons.append("made with other parameters than the notebook's")
        if reasons:
            result.stale[chapter] = "; ".join(reasons)
        else:
            result.records[chapter] = record
    return result


def claims_registry(root: Path = REPO_ROOT) -> pd.DataFrame:
    """Every registered claim of every chapter in the book, in book order: statement, role, reason, revision note."""
    rows = [dict(chapter=chapter, name=c.name, claim=c.statement, role=c.role, reason=c.reason, revised=c.revised)
            for chapter in toc_chapters(root) for c in claims_of(chapter).values()]
    return pd.DataFrame(rows)


def revisions(root: Path = REPO_ROOT) -> pd.DataFrame:
    """The claims whose threshold, or what they assert, was changed after results were seen."""
    table = claims_registry(root)
    return table[table.revised != ""][["chapter", "claim", "revised"]].reset_index(drop=True)
