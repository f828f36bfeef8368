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
    for name in ("sanity_failures", "excess_failures", "evidence_runs_failed"):
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
    for name in ("sanity_failures", "excess_failures", "evidence_runs_failed"):
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
    asserted = [dict(name=name, value=0.0, passed=True) for key in ("lbpe", "scale-hint") for name in rows[key].checks]

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
    assert reason("scale-hint", rpe_learned=3) == ("reproduces", "all 6 checks pass")
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
