"""The chapter harness, the claims data and the claims summary's audit of records."""

import json
from pathlib import Path

import pandas as pd
import pytest

import lengthgen.claims.paper as claims_summary_paper
from lengthgen.book import bookcache, harness
from lengthgen.book.audit import SUMMARY, audit, current_defaults
from lengthgen.book.fingerprint import code_cells, code_fingerprint, import_closure, notebook_hash
from lengthgen.book.parameters import parameters_of
from lengthgen.book.paths import BOOK_DIR, REPO_ROOT
from lengthgen.book.records import ChapterRecord
from lengthgen.book.rerun import checked_parameters, run_key
from lengthgen.book.sweep import store
from lengthgen.chapters import claims_summary
from lengthgen.claims import ROLES, claims_of, find

REPORTED = [c.name for c in claims_of("07_robustness").values() if c.role == "reported"]  # chapter 7's reports


@pytest.fixture(autouse=True)
def quiet_glue(monkeypatch):
    glued = {}
    monkeypatch.setattr(harness, "glue", lambda name, value, display=False: glued.update({name: value}))
    return glued


def robustness(folder: Path) -> harness.Chapter:
    return harness.Chapter("07_robustness", {"sweep_name": "single_head", "_records_folder": str(folder), "In": []})


def test_chapter_deletes_its_record_at_start_and_writes_it_at_finish(tmp_path, quiet_glue):
    old = tmp_path / "07_robustness.json"
    old.write_text("{}")
    chapter = robustness(tmp_path)
    assert not old.exists(), "a chapter that stops before its claim check must leave no record"
    assert quiet_glue["thr_missing_runs"] == 0
    for name in ("missing_runs", "error_runs", "seeds_reused", "proof_failures"):
        chapter.check(name, 0)
    for name in REPORTED:
        chapter.report(name, 3)
    record = chapter.finish()
    data = json.loads(old.read_text())
    assert data["code_fingerprint"] == code_fingerprint("07_robustness") == record.code_fingerprint
    assert data["notebook_hash"] == notebook_hash(BOOK_DIR / "07_robustness.ipynb")
    assert data["parameters"] == {"sweep_name": "single_head"} and data["created_utc"].endswith("+00:00")
    assert "wall_time" in quiet_glue and data["machine"]["torch"]


def test_failed_claim_is_recorded_then_raised(tmp_path):
    chapter = robustness(tmp_path)
    chapter.check("missing_runs", 2)
    for name in ("error_runs", "seeds_reused", "proof_failures"):
        chapter.check(name, 0)
    for name in REPORTED:
        chapter.report(name, 0)
    with pytest.raises(AssertionError, match="missing_runs"):
        chapter.finish()
    assert json.loads((tmp_path / "07_robustness.json").read_text())["checks"][0]["passed"] is False


def test_claims_must_be_registered_and_used_as_registered(tmp_path):
    chapter = robustness(tmp_path)
    with pytest.raises(KeyError, match="not registered"):
        chapter.check("made_up", 1.0)
    with pytest.raises(ValueError, match="registered as reported"):
        chapter.check("evidence_runs_failed", 1)
    with pytest.raises(ValueError, match="registered with a threshold"):
        chapter.report("missing_runs", 1)
    with pytest.raises(AssertionError, match="never checked"):
        chapter.finish()


def test_bad_parameters_stop_the_harness_before_any_work(tmp_path):
    (tmp_path / "07_robustness.json").write_text("{}")
    with pytest.raises(Exception, match="names no committed sweep"):
        harness.Chapter("07_robustness", {"sweep_name": "nope", "_records_folder": str(tmp_path)})


def test_claims_data_is_complete_and_consistent():
    notebooks = {p.stem: "\n".join(code_cells(p)) for p in BOOK_DIR.glob("[0-9][0-9]_*.ipynb")}
    for chapter in notebooks:
        claims = list(claims_of(chapter).values())
        names = [c.name for c in claims]
        assert len(names) == len(set(names)), chapter
        p = parameters_of(chapter).from_values(current_defaults(chapter))
        for claim in claims:
            assert claim.role in ROLES and claim.reason, (chapter, claim.name)
            assert (claim.role == "reported") == (not claim.comparison), (chapter, claim.name)
            if claim.comparison:
                assert claim.threshold_for(p) == claim.threshold_for(p)  # a number, not NaN
            judged_whole = "chapter.judge(" in notebooks[chapter]  # judge() refuses a registered claim missing
            used = judged_whole or f'"{claim.name}"' in notebooks[chapter] or "fix_margin_" in claim.name
            assert used, f"{chapter}: registered claim {claim.name} is never checked or reported by the notebook"
    assert find("01_equivariance", "toeplitz_f32").threshold_text == "10 L eps_32"


def test_judge_checks_every_registered_claim_by_its_kind(tmp_path):
    chapter = robustness(tmp_path)
    with pytest.raises(KeyError, match="registered claims without a measured value"):
        chapter.judge({})


def passing_checks(record: ChapterRecord, chapter: str, failing: str = "") -> None:
    """A check for every registered asserted claim of the chapter that holds (``failing``: NaN, which holds for none)."""
    p = parameters_of(chapter).from_values(current_defaults(chapter))
    for c in claims_of(chapter).values():
        if not c.comparison:
            continue
        bar = c.threshold_for(p)
        value = float("nan") if c.name == failing else {"<": bar - 1, ">": bar + 1}.get(c.comparison, bar)
        if c.per_run:  # one run, at the bar
            record.details.setdefault("per_run", {})[c.name] = [dict(offset=1, seed=0, value=value, passed=True)]
            record.check(c.name, c.statement, 0.0, "==", 0.0, c.role)
        else:
            record.check(c.name, c.statement, value, c.comparison, bar, c.role)


def write_record(folder: Path, chapter: str, **changes) -> None:
    record = ChapterRecord(chapter, current_defaults(chapter))
    passing_checks(record, chapter)
    record.code_fingerprint = code_fingerprint(chapter)
    record.notebook_hash = notebook_hash(BOOK_DIR / f"{chapter}.ipynb")
    for key, value in changes.items():
        setattr(record, key, value)
    record.save(folder / f"{chapter}.json")


def test_audit_accepts_current_records_and_names_every_other_kind(tmp_path):
    chapters = [c for c in bookcache.toc_chapters() if c != SUMMARY]
    for chapter in chapters:
        write_record(tmp_path, chapter)
    result = audit(tmp_path)
    assert result.chapters == chapters and not (result.missing or result.stale or result.foreign)
    assert len(result.records) == len(chapters) and result.failed.empty
    (tmp_path / chapters[2]).with_suffix(".json").unlink()  # failed before its claim check
    write_record(tmp_path, chapters[0], code_fingerprint="0" * 64)  # made by other code
    write_record(tmp_path, chapters[1], parameters={**current_defaults(chapters[1]), "seeds": 1})  # a manual rerun
    (tmp_path / "05_deleted_chapter.json").write_text(json.dumps(dict(chapter="05_deleted_chapter", checks=[])))
    bad = ChapterRecord(chapters[3], current_defaults(chapters[3]))
    failing = next(c for c in claims_of(chapters[3]).values() if c.comparison and not c.per_run)
    passing_checks(bad, chapters[3], failing=failing.name)
    bad.code_fingerprint, bad.notebook_hash = code_fingerprint(chapters[3]), notebook_hash(BOOK_DIR / f"{chapters[3]}.ipynb")
    bad.save(tmp_path / f"{chapters[3]}.json")
    result = audit(tmp_path)
    assert result.missing == [chapters[2]]
    assert set(result.stale) == {chapters[0], chapters[1]}
    assert "other code" in result.stale[chapters[0]] and "other parameters" in result.stale[chapters[1]]
    assert result.foreign == ["05_deleted_chapter"]
    assert list(result.failed.name) == [failing.name]  # judged against the registered claim, not the stored flag


def test_code_fingerprint_ignores_docstrings_and_comments_not_code(tmp_path):
    from lengthgen.book.fingerprint import code_text

    a, b, c = (tmp_path / f"{name}.py" for name in "abc")
    a.write_text('"""Doc."""\ndef f(x):\n    """Doc."""\n    return x + 1  # why\n')
    b.write_text('"""Another doc."""\n\n\ndef f(x):\n    # another comment\n    return x + 1\n')
    c.write_text("def f(x):\n    return x + 2\n")
    assert code_text(a) == code_text(b) != code_text(c)


def test_import_closure_follows_relative_imports():
    files = {p.relative_to(REPO_ROOT).as_posix() for p in import_closure(["from lengthgen.chapters.carrier import wrap"],
                                                                            REPO_ROOT / "lib")}
    assert "lib/lengthgen/chapters/carrier.py" in files and "lib/lengthgen/model/heads.py" in files
    assert "lib/lengthgen/chapters/__init__.py" in files and "lib/lengthgen/__init__.py" in files
    assert "lib/lengthgen/model/transformer.py" not in files  # a single-head chapter does not depend on the transformer
    assert "lib/lengthgen/chapters/dilution_law.py" not in files
    chapter_one = {p.name for p in import_closure(code_cells(BOOK_DIR / "01_equivariance.ipynb"), REPO_ROOT / "lib")}
    assert "transfer.py" not in chapter_one, "a chapter's fingerprint must not cover other chapters' code or claims"


def test_per_run_claims_record_every_runs_verdict(tmp_path):
    import pandas as pd

    chapter = harness.Chapter("01_equivariance", {**current_defaults("01_equivariance"), "_records_folder": str(tmp_path)})
    with pytest.raises(ValueError, match="per run"):
        chapter.check("peak_at_k", 0)
    runs = pd.DataFrame(dict(offset=[3, 3, 9], seed=[0, 1, 0], value=[0.99, 0.9, float("nan")]))
    assert not chapter.check_runs("worst_accuracy", runs)
    verdicts = chapter.record.details["per_run"]["worst_accuracy"]
    assert [v["passed"] for v in verdicts] == [True, False, False], "a NaN never passes"
    assert chapter.record.checks[-1].value == 2 and chapter.record.checks[-1].threshold == 0
    with pytest.raises(ValueError, match="not registered per run"):
        chapter.check_runs("toeplitz_f64", runs)


def test_dashboard_limits_read_thresholds_from_the_record_and_qualify_only_when_they_fire():
    """Chapter 12's rows: a limit whose threshold is a function of the record (FIRE against LBPE, plain offsets'
    learned runs against the page's seeds) fires only past it, and a missing check never fires."""
    rows = {claim.key: claim for claim in claims_summary_paper.PAPER_CLAIMS}
    asserted = [dict(name=name, value=0.0, passed=True, role="evidence") for key in ("lbpe", "scale-hint")
                for name in (*rows[key].checks, *rows[key].guards)]
    asserted.append(dict(name="held_out_hint_learned_where_rpe_grows", value=9.0, passed=None))  # enough to judge

    def reason(key: str, **values: float) -> tuple[str, str]:
        checks = asserted + [dict(name=name, value=value, passed=None) for name, value in values.items()]
        record = dict(parameters=dict(seeds=3, tasks=["reversal", "mode"], schemes=["rpe", "rpe_scale_hint"]), checks=checks)
        return claims_summary_paper.judge(rows[key], {"12_sequential_complexity": record})

    assert "FIRE" in reason("lbpe", held_out_lbpe_generalizes=0.9, held_out_fire_generalizes=1.0)[1]
    assert "FIRE" not in reason("lbpe", held_out_lbpe_generalizes=0.9, held_out_fire_generalizes=0.5)[1]
    assert "FIRE" not in reason("lbpe", held_out_fire_generalizes=1.0)[1]  # LBPE's share missing: nothing to compare
    assert reason("lbpe", held_out_lbpe_generalizes=0.5)[1].startswith("only a share of 0.50")
    assert "1 of 3 runs" in reason("scale-hint", rpe_learned=1)[1]  # mode has no position head: 3 runs, not 6
    assert claims_summary_paper.plain_offset_runs(dict(parameters=dict(seeds=3, tasks=["copy"], schemes=["lbpe"]))) == 0
    assert reason("scale-hint", rpe_learned=3) == ("reproduces", "all 4 checks pass")
    sanity_only = [dict(check, role="sanity") for check in asserted]
    record = dict(parameters=dict(seeds=3, tasks=["mode"], schemes=["rpe"]), checks=sanity_only + [
        dict(name="held_out_hint_learned_where_rpe_grows", value=9.0, passed=None)])
    assert claims_summary_paper.judge(rows["scale-hint"], {"12_sequential_complexity": record})[1].endswith(
        "it rests on sanity checks only, which hold by construction for any head that learned")
    assert claims_summary_paper.HELD_OUT_SHARE == claims_of("12_sequential_complexity")[
        "held_out_hint_generalizes"].threshold


def test_sweep_wall_times_list_every_committed_run_with_its_wall_time():
    """The summary's table of sweep runs holds exactly the runs each committed sweep's results.csv aggregates (the
    spec's current runs), each current, with a positive wall time and settings that tell it from its chapter's others."""
    runs = claims_summary.sweep_wall_times()
    assert set(runs.sweep) == {p.parent.name for p in claims_summary.SWEEPS_DIR.glob("*/spec.yaml")}
    for sweep, rows in runs.groupby("sweep"):
        listed = set(pd.read_csv(claims_summary.SWEEPS_DIR / sweep / "results.csv", dtype=str).key)
        assert set(rows.key) == listed, f"{sweep}: the table's runs are not the sweep's current runs"
    assert runs.current.all() and (runs.wall_time_s > 0).all()
    assert not runs.duplicated(["sweep", "chapter", "settings"]).any()


def test_sweep_wall_times_mark_stale_runs_and_sum_per_sweep(tmp_path):
    """A record made by other code is shown as not current; settings name only what varies between a chapter's runs;
    the totals divide the summed time by the spec's workers."""
    folder = tmp_path / "demo"
    (folder / "runs").mkdir(parents=True)
    (folder / "spec.yaml").write_text("name: demo\nworkers: 2\nchapters:\n  03_carrier:\n    fixed: {seeds: 4}\n"
                                      "    grid: {offsets: [[3], [5]]}\n")
    overrides = dict(offsets=[3], seeds=4)
    current = run_key("03_carrier", checked_parameters("03_carrier", overrides))  # what the spec's first run is now
    for key, offset, wall in ((current, 3, 60.0), ("b", 5, 180.0)):  # "b": a key made by other code
        record = dict(key=key, chapter="03_carrier", overrides=dict(overrides, offsets=[offset]), wall_time_s=wall,
                      machine=dict(processor="cpu"), checks=[], parameters={}, status="ok")
        store(folder, key, record)  # as a sweep writes it: sealed in the manifest
    runs = claims_summary.sweep_wall_times(tmp_path).sort_values("settings")
    assert list(runs.settings) == ["offsets=3", "offsets=5"]
    assert list(runs.current) == [True, False]
    totals = claims_summary.sweep_time_totals(runs).iloc[0]
    assert (totals.runs, totals.current, totals.workers) == (2, 1, 2)
    assert totals.total_min == pytest.approx(4.0) and totals.elapsed_min == pytest.approx(2.0)
    assert (totals.median_s, totals.max_s) == (120.0, 180.0)


def test_too_few_judged_runs_read_not_testable_and_a_failed_law_still_reads_does_not():
    """SRC's 'only if': with fewer learned runs in growing cells than it needs, the row reads 'not testable here' even
    though its one check holds (a vacuous pass); with enough runs and none generalizing it reproduces; a failed check
    outranks every limit."""
    rows = {claim.key: claim for claim in claims_summary_paper.PAPER_CLAIMS}
    claim = rows["src-only-if"]

    def judged(fails: float, first: float, added: float, added_fails: float = 0) -> tuple[str, str]:
        checks = [dict(name="held_out_growing_fails", value=fails, passed=fails == 0, role="evidence"),
                  dict(name="committed_complete", value=0, passed=True),
                  dict(name="held_out_growing_runs", value=first, passed=None),
                  dict(name="held_out_added_growing_runs", value=added, passed=None),
                  dict(name="held_out_added_growing_fails", value=added_fails, passed=None),
                  dict(name="held_out_added_disagreements", value=added_fails, passed=None)]
        return claims_summary_paper.judge(claim, {"12_sequential_complexity": dict(checks=checks, parameters={})})

    verdict, reason = judged(0, 0, 1)
    assert verdict == "not testable here" and "judged 1 learned run(s)" in reason
    assert judged(0, 2, 1)[0] == "reproduces"  # first and added tasks count together
    assert judged(0, 2, 1, added_fails=1)[0] == "partly"
    assert judged(1, 0, 0)[0] == "does not"
    nothing = [dict(name="held_out_growing_fails", value=0, passed=True, role="evidence"),
               dict(name="committed_complete", value=0, passed=True)]
    vacuous = claims_summary_paper.judge(claim, {"12_sequential_complexity": dict(checks=nothing, parameters={})})
    assert vacuous[0] == "not testable here"  # the counts of judged runs missing: never a pass
    assert rows["src-if"].replaces == claim.replaces == "src-conjecture"
    with pytest.raises(ValueError, match="severity"):
        claims_summary_paper.Limit("x", "y", ">", 0, "text", severity="maybe")


def test_the_changed_verdicts_list_moves_splits_additions_and_removals():
    """Against a release, a claim whose verdict moved, a claim split from a released one, a new claim and a released
    claim that is gone each give one row; an unchanged verdict gives none."""
    paper = claims_summary_paper
    release = dict(version="0.0.1", commit="0" * 40, claims={
        "equivariance": dict(claim="c", verdict="does not", number="n"),
        "pinning": dict(claim="c", verdict="not run", number="no record"),
        "src-conjecture": dict(claim="src", verdict="partly", number="n"),
        "gone": dict(claim="old", verdict="partly", number="n")})
    rows = {row["key"]: row for row in paper.verdict_changes({}, release)}
    assert rows["equivariance"]["was"]["verdict"] == "does not" and rows["equivariance"]["now"]["verdict"] == "not run"
    assert "pinning" not in rows  # not run then and now: unchanged
    assert rows["src-if"]["note"].startswith("split from") and rows["src-only-if"]["was"]["claim"] == "src"
    assert rows["carrier"]["note"] == "new" and rows["gone"]["note"] == "removed" and rows["gone"]["now"] is None


def test_a_release_snapshot_precedes_this_version_and_names_only_known_claims():
    """The changed-verdicts page compares with the newest older release; its claims are today's or ones a claim
    replaces, and a snapshot of a fake build has one entry per claim."""
    from lengthgen import __version__

    paper = claims_summary_paper
    before = paper.previous_release(__version__)
    assert before is not None and paper.version_tuple(before["version"]) < paper.version_tuple(__version__)
    known = {c.key for c in paper.PAPER_CLAIMS} | {c.replaces for c in paper.PAPER_CLAIMS}
    assert set(before["claims"]) <= known and len(before["commit"]) == 40
    snapshot = paper.verdict_snapshot({}, "9.9.9", "f" * 40)
    assert set(snapshot["claims"]) == {c.key for c in paper.PAPER_CLAIMS}
    assert {entry["verdict"] for entry in snapshot["claims"].values()} == {"not run"}
    assert paper.version_tuple("0.10.1") > paper.version_tuple("0.9.9")


def test_the_verdict_rules_count_the_checks_behind_them():
    """The landing page's rules say how many evidence checks and held-out tests this build's verdicts rest on."""
    paper = claims_summary_paper
    claim = paper.PAPER_CLAIMS[0]
    records = {claim.chapter: dict(checks=[dict(name=name, role="evidence") for name in claim.checks]),
               "07_robustness": dict(details=dict(pass_rates=[{}] * 7))}
    rules = " ".join(paper.verdict_rules(records))
    assert f"rest on {len(claim.checks)} of the chapters' evidence checks" in rules and "any of the 7 held-out tests" in rules
    assert f"at most {7 * paper.SIGNIFICANCE:.2f}" in rules
    assert all(len(sentence.split()) <= 40 for sentence in paper.verdict_rules(records))


def test_the_package_door_holds_no_code_so_leaving_it_out_of_run_keys_hides_nothing(tmp_path):
    """``lengthgen/__init__.py`` (the module map and the version) and ``pyproject.toml``'s version line are outside every
    run's measurement key, so a version bump stales no sweep; that is safe only while the door holds a docstring and the
    version and nothing else. A changed pin still changes the key."""
    import ast
    import shutil

    from lengthgen.book import fingerprint

    door = REPO_ROOT / fingerprint.PACKAGE_DOOR
    body = ast.parse(door.read_text()).body
    assert isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)  # the docstring
    assert len(body) == 2 and isinstance(body[1], ast.Assign) and body[1].targets[0].id == "__version__"
    assert door in import_closure(code_cells(BOOK_DIR / "01_equivariance.ipynb"), REPO_ROOT / "lib")  # imported ...
    root = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "lib", root / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copytree(BOOK_DIR, root / "book", ignore=shutil.ignore_patterns("_build", ".ipynb_checkpoints"))
    for pin in fingerprint.PINS:
        shutil.copy(REPO_ROOT / pin, root / pin)
    before = fingerprint.measurement_fingerprint("01_equivariance", root)
    version = body[1].value.value
    for path in (root / fingerprint.PACKAGE_DOOR, root / "pyproject.toml"):  # ... and yet a new version moves no key
        path.write_text(path.read_text().replace(f'"{version}"', '"99.0.0"'))
    assert fingerprint.measurement_fingerprint("01_equivariance", root) == before
    (root / "pyproject.toml").write_text((root / "pyproject.toml").read_text() + "\n# a new pin\n")
    assert fingerprint.measurement_fingerprint("01_equivariance", root) != before


def test_the_headline_figure_draws_rope_and_ape_from_the_records_or_nothing():
    """The landing page's figure: None without chapter 2's curves or chapter 11's exact match; with both, inline SVG and
    a caption whose numbers come from the rows."""
    from lengthgen.book import headline

    assert headline.headline_figure({}) is None
    head = dict(parameters=dict(train_length=8, vocab=16), details=dict(accuracy=[
        dict(encoding=e, offset=3, seed=s, length=n, accuracy=a, n=1) for s in (0, 1)
        for e, curve in (("RoPE", (1.0, 1.0, 0.9)), ("APE", (1.0, 0.1, 0.05))) for n, a in zip((8, 16, 32), curve, strict=True)]))
    network = dict(parameters=dict(train_size=10), details=dict(exact_match=[
        dict(encoding=e, task="shift", seed=s, size=n, exact=a, n=1, token=a) for s in (0, 1)
        for e, curve in (("rope", (1.0, 0.8, 0.2)), ("ape", (1.0, 0.0, 0.0)), ("nope", (0.3, 0.0, 0.0)))
        for n, a in zip((10, 15, 20), curve, strict=True)]))
    assert headline.headline_figure({headline.HEAD: head}) is None
    svg, caption = headline.headline_figure({headline.HEAD: head, headline.NETWORK: network})
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "0.90 at 4T for RoPE" in caption and "0.10 at 2T for APE" in caption  # APE: the first length past T
    assert "exact match is 0.00 at 1.5N for APE" in caption and "0.80 at 1.5N and 0.20 at 2N for RoPE" in caption
    assert "2 RoPE and 2 APE runs" in caption and "(2 and 2 seeds)" in caption


def test_a_held_out_rate_without_power_qualifies_the_claim():
    """A claim whose checks hold on held-out runs too few to flag a 30 % failure rate reads 'partly', and says so."""
    paper = claims_summary_paper
    claim = next(c for c in paper.PAPER_CLAIMS if c.key == "equivariance")
    record = dict(checks=[dict(name=name, value=0.0, passed=True, role="evidence") for name in claim.checks])

    def verdict(power: float) -> tuple[str, str]:
        rates = [dict(chapter=claim.chapter, name="worst_accuracy", holds=True, passed=10, runs=10, power=power)]
        return paper.judge(claim, {claim.chapter: record, "07_robustness": dict(details=dict(pass_rates=rates))})

    assert verdict(0.35) == ("partly", "too few held-out runs to call worst_accuracy held (10 runs, power 0.35)")
    assert verdict(0.95)[0] == "reproduces"
