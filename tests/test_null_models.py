"""The null-model test of the single-head evidence: a chapter's pipeline on untrained heads (one step at the smallest
learning rate) must fail each of its evidence checks or leave it *not judged*. A check an untrained head passes
cannot tell the accounts apart, and is labelled sanity instead."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from lengthgen.book.judging import rejudge
from lengthgen.book.rerun import checked_parameters
from lengthgen.claims import claims_of

UNTRAINED = dict(steps=1, lr=1e-6, seeds=3, workers=1, offsets=[5], device="cpu")  # one step that moves nothing


def untrained_values(chapter: str) -> tuple[dict, object]:
    """The chapter's claim values and parameters for heads trained one step, at shortened evaluation settings."""
    if chapter == "01_equivariance":
        from lengthgen.chapters.equivariance import claim_values, equivariance_study

        p = checked_parameters(chapter, UNTRAINED | dict(horizon_factor=64))
        return claim_values(equivariance_study(p, progress=False)), p
    if chapter == "02_absolute_pinning":
        from lengthgen.chapters.absolute_pinning import claim_values, pinning_study

        p = checked_parameters(chapter, UNTRAINED | dict(length_factor=8))
        return claim_values(pinning_study(p, progress=False), p), p
    if chapter == "03_carrier":
        from lengthgen.chapters.carrier import carrier_study, claim_values

        p = checked_parameters(chapter, UNTRAINED | dict(null_draws=1000))
        return claim_values(carrier_study(p, progress=False)), p
    from lengthgen.chapters.dilution_law import claim_values, dilution_study

    p = checked_parameters(chapter, UNTRAINED | dict(length_factor=256, forward_factor=64, mc_samples=1000,
                                                     rope_bases=[10000.0]))
    return claim_values(dilution_study(p, progress=False)), p


def as_record(chapter: str, values: dict, p: object) -> dict:
    """A record holding the values as a chapter stores them, for the judge every reader uses."""
    checks, per_run = [], {}
    for name, claim in claims_of(chapter).items():
        value = values[name]
        if isinstance(value, pd.DataFrame):
            per_run[name] = [dict(offset=int(r.offset), seed=int(r.seed), value=float(r.value), passed=True)
                             for r in value.itertuples()]
            value = 0.0
        checks.append(dict(name=name, claim="", value=float(value), comparison=claim.comparison, threshold=0.0,
                           passed=True, role=claim.role))
    return dict(chapter=chapter, parameters=dataclasses.asdict(p), checks=checks, details=dict(per_run=per_run),
                status="ok")


@pytest.mark.parametrize("chapter", ["01_equivariance", "02_absolute_pinning", "03_carrier", "04_dilution_law"])
def test_no_evidence_check_passes_on_an_untrained_head(chapter: str):
    values, p = untrained_values(chapter)
    judged = rejudge(as_record(chapter, values, p))
    evidence = [c for c in judged["checks"] if c["role"] == "evidence"]
    passing = [c["name"] for c in evidence if c["passed"] is not False]
    assert evidence or chapter == "04_dilution_law"  # chapter 4's laws pass on untrained heads: registered sanity
    assert not passing, f"{chapter}: evidence checks an untrained head passes: {passing}"
