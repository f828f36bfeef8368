"""The claims of ``lengthgen.chapters.claims_summary`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from . import Claim

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
