"""The claims data: every claim check of the book, one line of data each, and its register.

Each chapter's claims are ``CLAIMS``, a tuple of :class:`Claim`, in the module of this package
named like the chapter's analysis module (``lengthgen.claims.transfer`` for
``lengthgen.chapters.transfer``). A :class:`Claim` is a name, a statement, a comparison, a
threshold, a reason of one sentence and

* ``role``: ``evidence`` (a wrong account would fail it), ``proof`` (a numerical check of a
  theorem: it holds for any model, trained or not), ``sanity`` (it holds by construction, and
  guards the measurement), or ``reported`` (a number shown and not asserted);
* ``per_run``: the comparison applies to every run (one seed at one setting) separately; the
  chapter's check is then the number of runs that fail it, which must be zero, and the record
  keeps every run's verdict, so the robustness chapter can count passes over the held-out sweep;
* ``given``: for a per-run claim, another per-run claim of the chapter (the head learned its task):
  only the runs that pass it are judged, the others are *not judged* (an untrained head's far
  queries are at chance too, so "at chance beyond T" says something only of a head that learned).

Thresholds are numbers or named functions of the chapter's parameters (``threshold_text`` then
says how they are computed).

Each chapter's **register** (``register/<module>.yaml``) keeps what does not fit on one line: the
full statement and argument, every revision (a threshold, a role or what a check asserts changed
after results were seen: why, and the value it replaced), and any seeds whose runs were looked at
before the claim was registered (``inspected_seeds``: never counted as held out for it). Its ``registered`` entry must equal the
claims data (:func:`register_problems`), so a threshold cannot change without the register saying so.
The book renders both at build time: each chapter's claim table and collapsed Provenance block,
and the page of every revision.

Claims are judgement, not measurement: no run's key covers them
(:func:`lengthgen.book.fingerprint.measurement_fingerprint`), so editing them never makes a committed
sweep stale, and every reader of stored runs judges their values against the claims as they are now
(:func:`lengthgen.book.judging.rejudge`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

EPS32 = float(np.finfo(np.float32).eps)
ROLES = ("evidence", "proof", "sanity", "reported")


@dataclass(frozen=True)
class Claim:
    """One registered claim check (or reported number) of one chapter."""

    name: str
    statement: str
    comparison: str  # "<=", "<", ">=", ">", "==", or "" for a reported number
    threshold: float | Callable[[Any], float] | None
    reason: str
    role: str = "evidence"
    threshold_text: str = ""
    per_run: bool = False
    given: str = ""  # a per-run claim of the same chapter: this one is judged only on the runs that pass it

    def threshold_for(self, params: Any) -> float:
        """The threshold at the given chapter parameters."""
        if self.threshold is None:
            return float("nan")
        return float(self.threshold(params) if callable(self.threshold) else self.threshold)


DEFAULT_REASON = "shown in the chapter, not asserted"  # a reported number's reason when it has none of its own


def reported(name: str, statement: str, reason: str = DEFAULT_REASON) -> Claim:
    """A number a chapter reports without asserting it."""
    return Claim(name, statement, "", None, reason, role="reported")


def f32_toeplitz(p: Any) -> float:
    """``10 L eps_32``: the single-precision rounding bound of a logit computed at lengths up to ``L``."""
    return 10 * p.longest * EPS32




def claims_module(chapter: str) -> str:
    """The module holding a chapter's claims: ``"06_transfer"`` -> ``"lengthgen.claims.transfer"``."""
    return f"{__name__}.{chapter.partition('_')[2]}"


def claims_of(chapter: str) -> dict[str, Claim]:
    """The registered claims of a chapter (``CLAIMS`` in its module of this package), by name."""
    name = claims_module(chapter)
    try:
        claims = getattr(importlib.import_module(name), "CLAIMS", None)
    except ModuleNotFoundError as err:
        if err.name != name:
            raise
        claims = None
    if claims is None:
        raise KeyError(f"chapter {chapter!r} registers no claims (CLAIMS in {name})")
    return {claim.name: claim for claim in claims}


def find(chapter: str, name: str) -> Claim:
    """One registered claim; an unregistered name is an error (a threshold must be registered before it is used)."""
    claims = claims_of(chapter)
    if name not in claims:
        raise KeyError(f"claim {name!r} is not registered for chapter {chapter!r} (CLAIMS in {claims_module(chapter)}); "
                       f"registered: {sorted(claims)}")
    return claims[name]


# -- the register: full arguments and revisions, outside the one-line data ------------------------------------

REGISTER_DIR = Path(__file__).with_name("register")


def register_path(chapter: str) -> Path:
    """The register file of a chapter's claims: ``"06_transfer"`` -> ``register/transfer.yaml``."""
    return REGISTER_DIR / f"{chapter.partition('_')[2]}.yaml"


def register_of(chapter: str) -> dict[str, dict]:
    """A chapter's register: per claim name, ``registered`` and any ``statement``, ``argument``, ``revisions``."""
    path = register_path(chapter)
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


def registered_text(claim: Claim) -> str:
    """What the register records as in force: ``"evidence, per run: >= 0.8"``, or ``"reported"``."""
    if not claim.comparison:
        return "reported"
    threshold = claim.threshold.__name__ if callable(claim.threshold) else repr(claim.threshold)
    given = f", given {claim.given}" if claim.given else ""
    return f"{claim.role}{', per run' if claim.per_run else ''}{given}: {claim.comparison} {threshold}"


def register_problems(chapter: str, claims: dict[str, Claim] | None = None) -> list[str]:
    """Every disagreement between a chapter's claims data and its register (empty when they agree)."""
    claims = claims_of(chapter) if claims is None else claims
    register = register_of(chapter)
    where = register_path(chapter).name
    problems = [f"{chapter}: claim {name!r} has no entry in register/{where}" for name in claims if name not in register]
    problems += [f"{chapter}: register/{where} lists {name!r}, which the claims data does not" for name in register
                 if name not in claims]
    for name, claim in claims.items():
        entry = register.get(name)
        if entry is None:
            continue
        now = registered_text(claim)
        if entry.get("registered") != now:
            problems.append(f"{chapter}: claim {name!r} is {now!r} in the claims data but {entry.get('registered')!r} in "
                            f"register/{where}: a threshold changed after registration needs the register's "
                            "'registered' updated and a revision (was, why)")
        revisions = entry.get("revisions") or []
        if any(not str(rev.get("why", "")).strip() for rev in revisions):
            problems.append(f"{chapter}: a revision of {name!r} in register/{where} does not say why")
        if revisions and revisions[-1].get("was") == entry.get("registered"):
            problems.append(f"{chapter}: the last revision of {name!r} in register/{where} replaced {now!r} by itself")
        inspected = entry.get("inspected_seeds", [])
        if not isinstance(inspected, list) or not all(isinstance(seed, int) for seed in inspected):
            problems.append(f"{chapter}: register/{where} entry {name!r}: inspected_seeds must be a list of seeds")
        unknown = set(entry) - {"registered", "statement", "argument", "revisions", "inspected_seeds"}
        if unknown:
            problems.append(f"{chapter}: register/{where} entry {name!r} has unknown fields {sorted(unknown)}")
    return problems


def inspected_seeds(chapter: str, name: str) -> frozenset[int]:
    """Seeds whose runs were looked at before a claim was registered: never counted as held-out evidence for it."""
    return frozenset((register_of(chapter).get(name) or {}).get("inspected_seeds", []))


def unrevised_changes(before: dict[str, dict], now: dict[str, dict]) -> list[str]:
    """Claims whose registered value or inspected seeds differ between two versions of a register with no revision
    added since (a seed declared inspected leaves the held-out evidence, so that too needs a reason)."""
    def fixed(entry: dict) -> tuple:
        return entry.get("registered"), sorted(entry.get("inspected_seeds") or [])

    return [name for name, entry in now.items() if name in before and fixed(before[name]) != fixed(entry)
            and len(entry.get("revisions") or []) <= len(before[name].get("revisions") or [])]
