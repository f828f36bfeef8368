"""Judging stored measurements against the claims as they are now, never against a stored verdict.

A run's key covers what it measured, not how it is judged (:mod:`lengthgen.book.fingerprint`), so a
record made before a claim was edited is still current. Every reader of stored runs therefore
passes each record through :func:`rejudge`: each check's statement, comparison, role, threshold
(at the run's own parameters) and verdict are recomputed from its stored value and the current
claims data; a per-run check's count of failing runs is recounted from its runs' stored values (a
per-run check with no run judged nothing: *not judged*, value NaN, a failure; a per-run check
``given`` another judges only the runs that pass that one, and leaves the others' verdicts ``None``).
A check whose claim is no longer registered keeps its value and is judged by nothing (role
``unregistered``, verdict ``None``); a registered check the run never measured (registered later, or
now per run where it was one value, or the reverse) fails as *not measured*, never passes. A record
that is judged again this way is equal to the stored one whenever the claims did not change (a test
holds every committed record to that).
"""

from __future__ import annotations

import copy
import math
from typing import Any

from .records import COMPARISONS

NOT_MEASURED = "not measured in this run"  # a registered check a stored run cannot be judged on: it fails


def holds(value: float, comparison: str, threshold: float) -> bool:
    """Whether ``value <comparison> threshold`` holds; NaN never does."""
    value = float(value)
    return (not math.isnan(value)) and bool(COMPARISONS[comparison](value, float(threshold)))


def rejudge(record: dict) -> dict:
    """A copy of a stored record whose every verdict is recomputed from its values and the current claims."""
    from ..claims import claims_of
    from .parameters import parameters_of

    chapter = record["chapter"]
    claims = claims_of(chapter)
    judged = copy.deepcopy(record)
    parameters: list[Any] = []  # built once, only if a threshold is a function of the parameters

    def threshold(claim: Any) -> float:
        if callable(claim.threshold) and not parameters:
            parameters.append(parameters_of(chapter).from_values(record["parameters"]))
        return claim.threshold_for(parameters[0] if parameters else None)

    per_run = judged.get("details", {}).get("per_run", {})
    stored = {check["name"] for check in judged["checks"]}
    for claim in claims.values():  # registered after this run was made: it was never measured, so it fails
        if claim.comparison and claim.name not in stored:
            judged["checks"].append(dict(name=claim.name, claim=f"{NOT_MEASURED}: {claim.statement}", value=math.nan,
                                         comparison=claim.comparison, threshold=math.nan, passed=False, role=claim.role))
    for check in judged["checks"]:
        claim = claims.get(check["name"])
        if claim is None:
            check.update(role="unregistered", passed=None)
        elif not claim.comparison:
            check.update(claim=claim.statement, comparison="", threshold=math.nan, passed=None, role="reported")
        elif check["claim"].startswith(NOT_MEASURED):
            continue
        elif claim.per_run != (check["name"] in per_run):  # measured as the other kind: nothing to judge it by
            check.update(claim=f"{NOT_MEASURED} (stored {'per run' if not claim.per_run else 'as one value'}): "
                         f"{claim.statement}", value=math.nan, threshold=math.nan, passed=False, role=claim.role)
        elif claim.per_run:
            bar = threshold(claim)
            runs = per_run[check["name"]]
            for run in runs:
                run["passed"] = holds(run["value"], claim.comparison, bar)
            if claim.given:  # judged only on the runs that pass the given claim, judged now as well
                given = claims.get(claim.given)
                given_bar = threshold(given) if given is not None else math.nan
                passing = {(run["offset"], run["seed"]) for run in per_run.get(claim.given, [])
                           if given is not None and holds(run["value"], given.comparison, given_bar)}
                for run in runs:
                    if (run["offset"], run["seed"]) not in passing:
                        run["passed"] = None
            judged_runs = [run for run in runs if run["passed"] is not None]
            failing = float(sum(not run["passed"] for run in judged_runs)) if judged_runs else math.nan  # not judged
            check.update(claim=f"runs failing: {claim.statement}", value=failing, comparison="==", threshold=0.0,
                         passed=failing == 0, role=claim.role)
        else:
            bar = threshold(claim)
            check.update(claim=claim.statement, comparison=claim.comparison, threshold=bar,
                         passed=holds(check["value"], claim.comparison, bar), role=claim.role)
    if judged.get("status") in ("ok", "claims failed"):
        judged["status"] = "claims failed" if any(c["passed"] is False for c in judged["checks"]) else "ok"
    return judged
