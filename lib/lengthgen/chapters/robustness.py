"""Chapter 7 (``07_robustness``): the single-head claims on held-out seeds and settings, from a committed sweep.

The chapter reads ``data/sweeps/<sweep_name>/`` and never reruns it. Only the runs the spec
lists *now* count: a run's key hashes its parameters, the chapter's code fingerprint and its
notebook hash, so a run made by older code or an older notebook is missing, not shown.

Chapters 1-5 state each piece of evidence for every run (one seed at one setting). Over the
sweep, a claim's failures are counted and tested against a tolerated failure rate with an
exact one-sided binomial test; its pass fraction is shown with an exact (Clopper-Pearson)
interval. Proof and sanity checks, which hold whatever was learned, must never fail.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..analysis.stats import binomial_interval, excess_failure_p_value
from ..book.parameters import ChapterParameters, ParameterError, parameter
from ..book.paths import SWEEPS_DIR
from ..book.records import load_record
from ..book.rerun import checked_parameters
from ..book.sweep import Run, expand, load_spec, per_run_table, results_table
from ..claims import claims_of, inspected_seeds
from .committed import SIGNIFICANCE, TOLERATED_FAILURE_RATE

PASS_CONFIDENCE = 0.95  # the exact interval shown around each pass fraction
CAUGHT_FAILURE_RATE = 0.3  # a claim failing in three runs of ten does not hold; the test should catch it ...
MIN_POWER = 0.8  # ... with at least this probability, or its "holds" is called underpowered


def detection_power(trials: int, failure_rate: float = CAUGHT_FAILURE_RATE) -> float:
    """The chance that the held-out failure test (at the tolerated rate and significance) flags a claim whose runs fail
    independently at ``failure_rate``: what a "holds" over ``trials`` runs can rule out."""
    from scipy.stats import binom

    flagged = next((c for c in range(trials + 1)
                    if excess_failure_p_value(c, trials, TOLERATED_FAILURE_RATE) < SIGNIFICANCE), None)
    return 0.0 if flagged is None else float(binom.sf(flagged - 1, trials, failure_rate))


@dataclass(frozen=True)
class Parameters(ChapterParameters):
    """Chapter 7's parameters."""

    chapter = "07_robustness"
    data_inputs = ("data/sweeps",)
    sweep_name: str = parameter("folder under data/sweeps/ holding spec.yaml, results.csv and per_run.csv")

    def check(self) -> None:
        super().check()
        folder = SWEEPS_DIR / self.sweep_name
        if not all((folder / name).is_file() for name in ("spec.yaml", "results.csv", "per_run.csv")):
            known = sorted(p.parent.name for p in SWEEPS_DIR.glob("*/spec.yaml"))
            raise ParameterError(f"parameter 'sweep_name' = {self.sweep_name!r} names no committed sweep "
                                 f"(a folder with spec.yaml, results.csv and per_run.csv): must be one of {known}")


@dataclass
class Sweep:
    """A committed sweep: the spec's runs, and the checks and per-run verdicts of those that are present."""

    folder: Path
    expected: list[Run]
    results: pd.DataFrame  # one row per present run and check, with offset, seeds and setting columns
    per_run: pd.DataFrame  # one row per present run, per-run claim, offset and seed
    missing: list[str]  # keys of spec runs absent from the table (never run, or made by other code)
    unjudged: tuple[tuple[str, str], ...] = ()  # (chapter, claim) pairs with per-run verdicts but no run judged

    def worker_seconds(self) -> float:
        """Wall time the present runs took, summed over runs (from their records)."""
        present = set(self.results.key)
        return sum(load_record(path).get("wall_time_s") or 0.0 for path in (self.folder / "runs").glob("*.json")
                   if path.stem in present)

    @property
    def asserted(self) -> pd.DataFrame:
        rows = self.results[self.results.passed.notna()].copy()
        rows["passed"] = rows.passed.astype(str).str.lower() == "true"
        return rows

    @property
    def reported(self) -> pd.DataFrame:
        return self.results[self.results.passed.isna()]

    def runs(self) -> pd.DataFrame:
        """One row per run: chapter, setting, offset, seeds, status, key."""
        return (self.results.groupby("key").agg(chapter=("chapter", "first"), setting=("setting", "first"),
                                                 offset=("offset", "first"), seeds=("seeds", "first"),
                                                 seed_start=("seed_start", "first"), status=("status", "first"))
                .reset_index().sort_values(["chapter", "setting", "offset"]).reset_index(drop=True))

    def guard_failures(self, role: str) -> pd.DataFrame:
        """Checks of one role (``proof`` or ``sanity``) that fail in some run: chapter, setting, check and value."""
        asserted = self.asserted
        rows = asserted[(asserted.role == role) & ~asserted.passed]
        return rows[["chapter", "setting", "offset", "name", "claim", "value", "comparison", "threshold"]]

    def proof_failures(self) -> pd.DataFrame:
        """Proof checks that fail in some run (they verify theorems: they must not)."""
        return self.guard_failures("proof")

    def sanity_failures(self) -> pd.DataFrame:
        """Sanity checks that fail in some run (a guard on a measurement tripped; the run's evidence is suspect)."""
        return self.guard_failures("sanity")

    def evidence_failures(self) -> pd.DataFrame:
        """Every per-run verdict that fails: chapter, setting, offset, seed, claim and the value it measured."""
        rows = self.per_run[~self.per_run.passed]
        return rows[["chapter", "setting", "offset", "seed", "name", "value"]].reset_index(drop=True)

    def pass_rates(self) -> pd.DataFrame:
        """One row per per-run claim: runs, passes, the pass fraction with its exact interval, the failure test, and
        the values' mean, spread and range over runs."""
        rows = []
        groups = dict(list(self.per_run.groupby(["chapter", "name"], sort=True)))
        for key in self.unjudged:  # a claim no run qualified for: zero runs, which never hold
            groups.setdefault(key, self.per_run.iloc[:0])
        for (chapter, name), group in sorted(groups.items()):
            claim = claims_of(chapter)[name]
            inspected = group.seed.isin(inspected_seeds(chapter, name))  # looked at before registration: not held out
            group = group[~inspected]
            n, passed = len(group), int(group.passed.sum())
            low, high = binomial_interval(passed, n, PASS_CONFIDENCE) if n else (float("nan"), float("nan"))
            p_value = excess_failure_p_value(n - passed, n, TOLERATED_FAILURE_RATE)
            finite = group.value[group.value.abs() < float("inf")]
            rows.append(dict(chapter=chapter, name=name, claim=claim.statement, runs=n, passed=passed,
                             fraction=passed / n if n else float("nan"), ci_low=low, ci_high=high, p_value=p_value,
                             holds=bool(n) and p_value >= SIGNIFICANCE, power=detection_power(n), excluded=int(inspected.sum()),
                             mean=finite.mean(), std=finite.std(), min=group.value.min(),
                             max=group.value.max(), comparison=claim.comparison,
                             threshold=float(group.threshold.iloc[0]) if n else float("nan")))
        return pd.DataFrame(rows)

    def seeds_reused(self) -> int:
        """Runs of the sweep whose seeds overlap the seeds of their chapter's own defaults."""
        defaults = {chapter: set(checked_parameters(chapter, {}).seed_list) for chapter in self.results.chapter.unique()}
        runs = self.runs()
        return int(sum(bool(set(range(r.seed_start, r.seed_start + r.seeds)) & defaults[r.chapter])
                       for r in runs.itertuples()))


def offset_of(overrides: str) -> int:
    """The target offset of a single-offset run, from its overrides."""
    values = json.loads(overrides)["offsets"]
    if len(values) != 1:
        raise ValueError(f"a robustness run must have one offset, got {values}")
    return int(values[0])


def setting_of(overrides: str, grid: dict[str, list[str]], chapter: str) -> str:
    """The run's grid values other than the offset, as ``name=value`` (``default`` when there are none)."""
    values = json.loads(overrides)
    names = [name for name in grid.get(chapter, []) if name != "offsets"]
    return ", ".join(f"{name}={values[name]}" for name in names) or "default"


def thresholds(per_run: pd.DataFrame) -> pd.Series:
    """Each per-run row's registered threshold, at its run's parameters."""
    cache: dict[tuple[str, str, str], float] = {}

    def lookup(row: pd.Series) -> float:
        key = (row.chapter, row["name"], row.overrides)
        if key not in cache:
            parameters = checked_parameters(row.chapter, json.loads(row.overrides))
            cache[key] = claims_of(row.chapter)[row["name"]].threshold_for(parameters)
        return cache[key]

    return per_run.apply(lookup, axis=1) if len(per_run) else pd.Series(dtype=float)


def records_agree(folder: Path, name: str, table: pd.DataFrame, index: list[str]) -> pd.DataFrame:
    """``table`` (from the run records, judged now) as its CSV would read back; raises if the committed CSV ``name``
    states another value for any of its rows (a CSV edited by hand, or not rewritten after its records changed)."""
    table = pd.read_csv(io.StringIO(table.to_csv(index=False))) if len(table) else table
    stored = pd.read_csv(folder / name)
    stored = stored[stored.key.isin(set(table.key))] if len(table) else stored.iloc[:0]
    mine = table.set_index(index).value if len(table) else pd.Series(dtype=float)
    theirs = stored.set_index(index).value
    joined = pd.concat([mine.rename("records"), theirs.rename("csv")], axis=1)
    differs = joined[~((joined.records == joined.csv) | (joined.records.isna() & joined.csv.isna()))]
    if len(differs):
        raise RuntimeError(f"{folder / name} disagrees with the run records in {folder / 'runs'} at "
                           f"{len(differs)} row(s), first {differs.index[0]}: records {differs.records.iloc[0]}, "
                           f"CSV {differs.csv.iloc[0]}; rewrite it from the records with "
                           f"`make sweep SPEC={folder.relative_to(SWEEPS_DIR.parents[1])}/spec.yaml`")
    return table


def load_sweep(name: str) -> Sweep:
    """Read a committed sweep's run records (judged against the current claims), keeping only the runs its spec lists
    now; its CSVs must state the same values."""
    folder = SWEEPS_DIR / name
    spec = load_spec(folder / "spec.yaml")
    expected = expand(spec)
    grid = {chapter: sorted((entry or {}).get("grid", {}) or {}) for chapter, entry in spec["chapters"].items()}
    keys = {run.key for run in expected}
    tables = []
    for table in (records_agree(folder, "results.csv", results_table(folder, keys), ["key", "name"]),
                  records_agree(folder, "per_run.csv", per_run_table(folder, keys), ["key", "name", "offset", "seed"])):
        table = table.copy()
        table["setting"] = [setting_of(o, grid, c) for o, c in zip(table.overrides, table.chapter, strict=True)]
        tables.append(table)
    results, per_run = tables
    if len(results) == 0:
        raise RuntimeError(f"the committed sweep {folder} holds none of the {len(keys)} runs its spec lists now (made by "
                           f"other code or notebooks, or never run): regenerate it with "
                           f"`make sweep SPEC={folder.relative_to(SWEEPS_DIR.parents[1])}/spec.yaml ARGS=--prune`")
    results["offset"] = results.overrides.map(offset_of)
    results["seeds"] = results.overrides.map(lambda o: json.loads(o)["seeds"])
    results["seed_start"] = results.overrides.map(lambda o: json.loads(o).get("seed_start", 0))
    judged = per_run.passed.map(lambda v: isinstance(v, bool) or str(v).lower() in ("true", "false"))
    every_claim = set(zip(per_run.chapter, per_run["name"], strict=True))
    per_run = per_run[judged].copy()  # a run a claim does not judge (it did not pass the claim's given) is left out
    unjudged = tuple(sorted(every_claim - set(zip(per_run.chapter, per_run["name"], strict=True))))
    per_run["passed"] = per_run.passed.astype(str).str.lower() == "true"
    per_run["threshold"] = thresholds(per_run)
    missing = sorted(keys - set(results.key))
    return Sweep(folder, expected, results, per_run, missing, unjudged)


def failure_lines(failures: pd.DataFrame) -> list[str]:
    """One line per failing verdict of the sweep (evidence for one seed, or a proof or sanity check of a run)."""
    lines = []
    for r in failures.itertuples():
        seed = f" seed {int(r.seed)}" if "seed" in failures and r.seed == r.seed else ""
        lines.append(f"{r.chapter} k={r.offset} ({r.setting}){seed}: {r.name} = {r.value:.4g}")
    return lines


def hijack_law_gains(sweep: Sweep) -> pd.DataFrame:
    """Chapter 1's first-hijack law against a per-offset constant, one row per held-out run (offset, setting, gain)."""
    rows = sweep.reported[(sweep.reported.chapter == "01_equivariance") & (sweep.reported.name == "hijack_law_gain")]
    return rows[["offset", "setting", "value"]].astype({"value": float}).rename(columns={"value": "gain"})


def pooled_share(sweep: Sweep, chapter: str, hits: str, trials: str) -> dict[str, float]:
    """A count reported by every held-out run of a chapter, pooled over the runs: share, exact 95 % interval, trials."""
    rows = sweep.reported[sweep.reported.chapter == chapter]
    total = lambda name: int(rows[rows.name == name].value.astype(float).sum())  # noqa: E731 - sum over runs
    n, k = total(trials), total(hits)
    low, high = binomial_interval(k, n, 0.95) if n else (math.nan, math.nan)
    return dict(share=k / n if n else math.nan, low=low, high=high, hits=k, trials=n)


def dilution_shares(sweep: Sweep) -> dict[str, dict[str, float]]:
    """Chapter 4's in-range law and its predicted delay under logit scaling, pooled over the held-out runs."""
    chapter = "04_dilution_law"
    return dict(in_range=pooled_share(sweep, chapter, "in_range_within_runs", "in_range_runs"),
                in_range_constant=pooled_share(sweep, chapter, "in_range_constant_within_runs", "in_range_constant_runs"),
                delay=pooled_share(sweep, chapter, "delay_within_runs", "delay_judged"),
                delay_zero=pooled_share(sweep, chapter, "delay_zero_within_runs", "delay_zero_judged"),
                delayed=pooled_share(sweep, chapter, "delayed_runs", "delay_runs"))


def claim_values(sweep: Sweep) -> dict[str, object]:
    """Every claim's value: the sweep's completeness and its failures by role."""
    gains = hijack_law_gains(sweep)
    shares = dilution_shares(sweep)
    runs = sweep.runs()
    return dict(missing_runs=len(sweep.missing), error_runs=int(runs.status.str.startswith("error").sum()),
                seeds_reused=sweep.seeds_reused(), proof_failures=len(sweep.proof_failures()),
                sanity_failures=len(sweep.sanity_failures()), excess_failures=int((~sweep.pass_rates().holds).sum()),
                underpowered=int((sweep.pass_rates().power < MIN_POWER).sum()),
                evidence_runs_failed=len(sweep.evidence_failures()),
                hijack_law_gain_max=float(gains.gain.max()) if len(gains) else float("nan"),
                **{f"{name}_share": share["share"] for name, share in shares.items()})


def record_details(sweep: Sweep) -> dict[str, object]:
    """What the chapter's record carries besides its checks: pass rates, every failing run, runs per chapter."""
    failing, sanity, proofs = sweep.evidence_failures(), sweep.sanity_failures(), sweep.proof_failures()
    return dict(pass_rates=sweep.pass_rates().to_dict("records"),
                sweep_failures=[*failing.assign(kind="evidence").to_dict("records"),
                                *sanity.assign(kind="sanity").to_dict("records"),
                                *proofs.assign(kind="proof").to_dict("records")],
                runs_per_chapter=sweep.runs().groupby("chapter").size().to_dict(),
                hijack_law_gains=hijack_law_gains(sweep).to_dict("records"), dilution_shares=dilution_shares(sweep))
