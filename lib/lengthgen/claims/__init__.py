"""The claims data: every claim check of the book, declared once, with its threshold and the reason for it.

Each chapter's claims are ``CLAIMS``, a tuple of :class:`Claim`, in the module of this package
named like the chapter's analysis module (``lengthgen.claims.transfer`` for
``lengthgen.chapters.transfer``). They are judgement, not measurement: no run's key covers them
(:func:`lengthgen.book.fingerprint.measurement_fingerprint`), so editing a statement, a threshold or
a reason never makes a committed sweep stale, and every reader of stored runs judges their values
against the claims as they are now (:func:`lengthgen.book.judging.rejudge`). A chapter page, which
shows its claims, is re-executed when they change. A chapter asserts a claim by name
(``chapter.check("toeplitz_f64", value)``); the statement, the comparison and the threshold come
from there and nowhere else, and the chapter glues the threshold into its prose. Each :class:`Claim` says

* ``role``: ``evidence`` (a wrong account would fail it), ``proof`` (a numerical check of a
  theorem: it holds for any model, trained or not), ``sanity`` (it holds by construction, and
  guards the measurement), or ``reported`` (a number shown and not asserted);
* ``reason``: why this threshold, argued before the measurement it judges;
* ``revised``: if a threshold (or what a check asserts) was ever changed after results were
  seen, from what and why. The claims summary page shows every such note;
* ``per_run``: the comparison applies to every run (one seed at one setting) separately; the
  chapter's check is then the number of runs that fail it, which must be zero, and the record
  keeps every run's verdict, so the robustness chapter can count passes over the held-out sweep.

Thresholds are numbers or functions of the chapter's parameters (``threshold_text`` then says
how they are computed).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

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
    revised: str = ""
    per_run: bool = False

    def threshold_for(self, params: Any) -> float:
        """The threshold at the given chapter parameters."""
        if self.threshold is None:
            return float("nan")
        return float(self.threshold(params) if callable(self.threshold) else self.threshold)


def reported(name: str, statement: str, reason: str = "shown in the chapter, not asserted", revised: str = "") -> Claim:
    """A number a chapter reports without asserting it (``revised``: why a check that was asserted became a report)."""
    return Claim(name, statement, "", None, reason, role="reported", revised=revised)


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
