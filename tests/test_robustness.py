"""Chapter 7's judgement of held-out runs: failure counts against a tolerated rate, pass fractions, settings."""

import json
from pathlib import Path

import pandas as pd
import pytest

from lengthgen.analysis.stats import excess_failure_p_value
from lengthgen.chapters.robustness import (
    SIGNIFICANCE,
    TOLERATED_FAILURE_RATE,
    Sweep,
    failure_lines,
    setting_of,
)


def test_excess_failure_p_value_is_the_exact_binomial_tail():
    # P(X >= 1) for X ~ Bin(10, 0.05) = 1 - 0.95^10
    assert excess_failure_p_value(1, 10, 0.05) == pytest.approx(1 - 0.95**10)
    assert excess_failure_p_value(0, 40, 0.05) == 1.0
    assert excess_failure_p_value(0, 0, 0.05) == 1.0
    # with 40 runs at a 5 % rate: 5 failures are unremarkable, 7 are not
    assert excess_failure_p_value(5, 40, TOLERATED_FAILURE_RATE) > SIGNIFICANCE
    assert excess_failure_p_value(7, 40, TOLERATED_FAILURE_RATE) < SIGNIFICANCE


def sweep_with(verdicts: dict[str, list[bool]]) -> Sweep:
    rows = []
    for name, passed in verdicts.items():
        rows += [dict(chapter="01_equivariance", name=name, offset=3, seed=100 + i, setting="default",
                      value=1.0 if ok else 0.5, passed=ok, threshold=0.95) for i, ok in enumerate(passed)]
    return Sweep(Path("."), [], pd.DataFrame(), pd.DataFrame(rows), [])


def test_pass_rates_judge_each_claim_over_its_runs():
    sweep = sweep_with({"worst_accuracy": [True] * 38 + [False] * 2, "peak_at_k": [True] * 30 + [False] * 10})
    rates = sweep.pass_rates().set_index("name")
    assert rates.loc["worst_accuracy", "holds"] and not rates.loc["peak_at_k", "holds"]
    assert rates.loc["peak_at_k", "passed"] == 30 and rates.loc["peak_at_k", "runs"] == 40
    low, high = rates.loc["worst_accuracy", ["ci_low", "ci_high"]]
    assert low < 0.95 < high <= 1.0
    assert rates.loc["worst_accuracy", "comparison"] == ">="  # from the claims data, not the table
    failures = sweep.evidence_failures()
    assert len(failures) == 12 and set(failures.name) == {"worst_accuracy", "peak_at_k"}
    assert failure_lines(failures.head(1)) == ["01_equivariance k=3 (default) seed 138: worst_accuracy = 0.5"]


def test_setting_names_the_grid_values_other_than_the_offset():
    overrides = json.dumps(dict(seeds=4, offsets=[3], dim=32))
    assert setting_of(overrides, {"04_dilution_law": ["dim", "offsets"]}, "04_dilution_law") == "dim=32"
    assert setting_of(overrides, {"01_equivariance": ["offsets"]}, "01_equivariance") == "default"


def test_the_failure_test_states_its_power_and_ten_runs_are_too_few():
    """The test's power to flag a claim failing on 30 % of runs: low at ten runs, high at forty; a "holds" below the
    bar is counted as underpowered."""
    from lengthgen.chapters.robustness import MIN_POWER, detection_power

    assert detection_power(10) < MIN_POWER < detection_power(40)
    assert detection_power(0) == 0.0 and detection_power(40, failure_rate=1.0) == pytest.approx(1.0)
    assert detection_power(40, failure_rate=TOLERATED_FAILURE_RATE) <= SIGNIFICANCE  # at the tolerated rate: its level
    rates = sweep_with({"worst_accuracy": [True] * 10}).pass_rates().set_index("name")
    assert rates.loc["worst_accuracy", "holds"] and rates.loc["worst_accuracy", "power"] < MIN_POWER


def test_seeds_looked_at_before_a_claim_was_registered_do_not_count_as_held_out(monkeypatch):
    """A run on an inspected seed (the claim's register names it) is left out of its pass rate, and counted."""
    import lengthgen.chapters.robustness as robustness

    monkeypatch.setattr(robustness, "inspected_seeds",
                        lambda chapter, name: frozenset(range(100, 110)) if name == "worst_accuracy" else frozenset())
    rates = sweep_with({"worst_accuracy": [False] * 10 + [True] * 30,
                        "peak_at_k": [True] * 40}).pass_rates().set_index("name")
    assert rates.loc["worst_accuracy", "runs"] == 30 and rates.loc["worst_accuracy", "passed"] == 30
    assert rates.loc["worst_accuracy", "excluded"] == 10 and rates.loc["peak_at_k", "excluded"] == 0
