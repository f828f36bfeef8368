"""Claims as one line of data each, a register per chapter that must agree with them, and claim tables judged when the
book is built (from the records' values and the claims as they are now)."""

import dataclasses
import math
import re
import shutil

import pytest
import yaml
from lengthgen_testing import copy_repository

import lengthgen.claims as claims_layer
from lengthgen.book import bookcache, fingerprint
from lengthgen.book.sphinx_claims import judged_rows, overview_row, revision_rows
from lengthgen.claims import claims_of, register_of, register_path, register_problems, registered_text, unrevised_changes

CHAPTERS = bookcache.toc_chapters()
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_register_agrees_with_its_claims_data(chapter):
    assert register_problems(chapter) == []


def test_claims_are_one_line_of_data_each():
    """Statement, reason and threshold text fit in 300 characters; a reason is one sentence (longer arguments and the
    revisions live in the register)."""
    for chapter in CHAPTERS:
        for claim in claims_of(chapter).values():
            for field in ("statement", "reason", "threshold_text"):
                text = getattr(claim, field)
                assert len(text) <= 300, f"{chapter}: {claim.name}.{field} is {len(text)} characters"
            assert len(SENTENCE_END.split(claim.reason.strip())) == 1, f"{chapter}: {claim.name}'s reason is not one sentence"
            assert not hasattr(claim, "revised")


def test_a_threshold_changed_without_the_register_is_refused():
    claims = dict(claims_of("06_transfer"))
    claims["masking_restores"] = dataclasses.replace(claims["masking_restores"], threshold=0.7)
    problems = register_problems("06_transfer", claims)
    assert len(problems) == 1 and "'evidence: >= 0.8' in register" in problems[0] and "revision" in problems[0]
    claims = dict(claims_of("06_transfer"))
    claims["masking_restores"] = dataclasses.replace(claims["masking_restores"], role="sanity")  # a relabelling too
    assert register_problems("06_transfer", claims)
    del claims["masking_restores"]
    assert any("which the claims data does not" in p for p in register_problems("06_transfer", claims))


def test_a_register_entry_must_say_why_and_must_not_replace_a_value_by_itself(tmp_path, monkeypatch):
    shutil.copytree(claims_layer.REGISTER_DIR, tmp_path / "register")
    monkeypatch.setattr(claims_layer, "REGISTER_DIR", tmp_path / "register")
    path = tmp_path / "register" / "transfer.yaml"
    register = yaml.safe_load(path.read_text())
    register["masking_restores"]["revisions"] = [dict(was="evidence: >= 0.8", why="")]
    path.write_text(yaml.safe_dump(register))
    problems = register_problems("06_transfer")
    assert any("does not say why" in p for p in problems) and any("by itself" in p for p in problems)
    register["masking_restores"]["revisions"] = [dict(was="evidence: >= 0.5", why="raised after a review")]
    register["masking_restores"]["notes"] = "a field the register does not know"
    path.write_text(yaml.safe_dump(register))
    assert [p for p in register_problems("06_transfer") if "unknown fields" in p] and len(register_problems("06_transfer")) == 1


def test_registered_text_names_the_role_the_comparison_and_the_threshold():
    equivariance = claims_of("01_equivariance")
    assert registered_text(equivariance["toeplitz_f32"]) == "proof: <= f32_toeplitz"
    assert registered_text(equivariance["worst_accuracy"]).startswith("evidence, per run: ")
    assert registered_text(equivariance["hijack_bias"]) == "reported"


def robustness_record(**values: float) -> dict:
    """A chapter 7 record whose every asserted check holds, but for the values given."""
    checks = []
    for claim in claims_of("07_robustness").values():
        value = values.get(claim.name, 0.0)
        checks.append(dict(name=claim.name, claim=claim.statement, value=value, comparison=claim.comparison,
                           threshold=0.0 if claim.comparison else math.nan, passed=True if claim.comparison else None,
                           role=claim.role))
    from lengthgen.book.audit import current_defaults
    from lengthgen.book.paths import notebook_path

    return dict(chapter="07_robustness", parameters=current_defaults("07_robustness"), checks=checks, details={},
                code_fingerprint=fingerprint.code_fingerprint("07_robustness"),
                notebook_hash=fingerprint.notebook_hash(notebook_path("07_robustness")))


def test_the_claim_table_is_judged_from_the_values_not_the_stored_verdicts():
    rows, problems = judged_rows("07_robustness", robustness_record())
    assert problems == [] and {r["verdict"] for r in rows} == {"holds", "reported"}
    assert [r["name"] for r in rows] == list(claims_of("07_robustness"))
    record = robustness_record(missing_runs=2.0)  # stored as passed: judged again, it fails
    rows, problems = judged_rows("07_robustness", record)
    assert {r["name"]: r["verdict"] for r in rows}["missing_runs"] == "fails"
    assert len(problems) == 1 and "missing_runs" in problems[0]
    rows, problems = judged_rows("07_robustness", robustness_record(error_runs=math.nan))
    assert {r["name"]: r["verdict"] for r in rows}["error_runs"] == "not judged" and len(problems) == 1
    record = robustness_record()
    record["checks"] = [c for c in record["checks"] if c["name"] != "seeds_reused"]  # registered after the run
    rows, problems = judged_rows("07_robustness", record)
    assert {r["name"]: r["verdict"] for r in rows}["seeds_reused"] == "not measured" and len(problems) == 1


def test_the_claim_table_shows_the_current_wording(monkeypatch):
    module = claims_layer.importlib.import_module(claims_layer.claims_module("07_robustness"))
    reworded = tuple(dataclasses.replace(c, reason="Reworded after the run.") for c in module.CLAIMS)
    monkeypatch.setattr(module, "CLAIMS", reworded)
    rows, _ = judged_rows("07_robustness", robustness_record())
    assert {r["reason"] for r in rows} == {"Reworded after the run."}


def test_the_revisions_page_lists_every_revision_of_every_register():
    rows = revision_rows(CHAPTERS)
    expected = sum(len(entry.get("revisions") or []) for c in CHAPTERS for entry in register_of(c).values())
    assert len(rows) == expected >= 60


def test_rewording_a_claim_is_a_warm_rebuild_and_a_threshold_re_executes(tmp_path, monkeypatch):
    """The book cache: rewording a claim (or its register) only has the pages that show it read again; changing a
    threshold re-executes them; nothing else moves."""
    root = copy_repository(tmp_path)
    for name in ("_toc.yml", "_config.yml"):
        shutil.copy(fingerprint.REPO_ROOT / name, root / name)
    monkeypatch.setattr(bookcache, "unexecuted", lambda root, build=None: [])  # every page has a cached execution
    monkeypatch.setattr(bookcache, "forget", lambda notebook, build: None)
    build = tmp_path / "build"
    assert bookcache.refresh(root, build)["wiped"]
    quiet = bookcache.refresh(root, build)
    assert quiet["stale"] == quiet["reworded"] == []
    claims = root / "lib/lengthgen/claims/carrier.py"
    text = claims.read_text()
    claims.write_text(text.replace('"The ', '"Rewritten: the ', 1))
    reworded = bookcache.refresh(root, build)
    assert reworded["stale"] == [] and sorted(reworded["reworded"]) == ["03_carrier", "07_robustness"]
    register = root / "lib/lengthgen/claims/register/transfer.yaml"
    register.write_text(register.read_text() + "# a note\n")
    assert sorted(bookcache.refresh(root, build)["reworded"]) == ["06_transfer", "07_robustness"]  # 7 judges all sweeps
    claims.write_text(text.replace('"<=", 0,', '"<=", 1,', 1))
    changed = bookcache.refresh(root, build)
    assert sorted(changed["stale"]) == ["03_carrier", "07_robustness"]


def build_page(tmp_path, record: dict, monkeypatch) -> tuple[int, str]:
    """Build a one-page Sphinx project whose page shows chapter 7's claims from ``record``: (exit code, its HTML)."""
    import json

    from sphinx.cmd.build import build_main

    source = tmp_path / "src"
    source.mkdir(parents=True)
    from lengthgen.book import paths

    (tmp_path / "record.json").write_text(json.dumps(record))
    (tmp_path / "07_robustness.json").write_text(json.dumps(record))
    monkeypatch.setattr(paths, "RECORDS_DIR", tmp_path)  # where {verdict} reads the chapter's record
    (source / "conf.py").write_text("extensions = ['myst_parser', 'lengthgen.book.sphinx_claims']\n")
    (source / "index.md").write_text(f"# Claims\n\n```{{claims}} 07_robustness\n:record: {tmp_path / 'record.json'}\n```\n")
    (source / "verdicts.md").write_text("# Verdicts\n\nMissing runs: {verdict}`07_robustness:missing_runs` "
                                        "({verdict}`07_robustness:missing_runs:value`).\n")
    (source / "index.md").write_text((source / "index.md").read_text() + "\n```{toctree}\nverdicts\n```\n")
    code = build_main([str(source), str(tmp_path / "html"), "-b", "html", "-W", "--keep-going", "-q", "-E"])
    pages = [tmp_path / "html" / name for name in ("index.html", "verdicts.html")]
    return code, "".join(page.read_text() for page in pages if page.exists())


def test_a_page_renders_its_claim_table_and_provenance_and_a_failure_fails_the_build(tmp_path, monkeypatch):
    code, html = build_page(tmp_path / "ok", robustness_record(), monkeypatch)
    assert code == 0 and "claims-table" in html and "Provenance: full arguments and revisions" in html
    assert all(claim.statement.split(" (")[0][:40] in html.replace("&#8217;", "'") for claim in
               claims_of("07_robustness").values())
    assert "Missing runs: <strong>holds</strong> (<strong>0</strong>)" in html  # the {verdict} role, judged now
    code, html = build_page(tmp_path / "failing", robustness_record(missing_runs=3.0), monkeypatch)
    assert "<strong>fails</strong> (<strong>3</strong>)" in html
    assert code != 0, "a claim that fails on the record must fail the build"


def test_the_landing_page_counts_each_chapters_verdicts_from_its_record():
    claims = claims_of("07_robustness").values()
    evidence = sum(c.role == "evidence" for c in claims)
    guards = sum(c.role in ("proof", "sanity") for c in claims)
    row = overview_row("07_robustness", judged_rows("07_robustness", robustness_record())[0])
    assert row["evidence"] == (f"{evidence} of {evidence}" if evidence else "—")
    assert row["guards"] == f"{guards} of {guards}" and row["reported"] == str(sum(c.role == "reported" for c in claims))
    demoted = [n for n, e in register_of("07_robustness").items() if e["registered"] == "reported" and e.get("revisions")]
    assert row["demoted"] == str(len(demoted))
    failing = judged_rows("07_robustness", robustness_record(missing_runs=1.0))[0]
    assert overview_row("07_robustness", failing)["guards"] == f"{guards - 1} of {guards}"
    assert overview_row("07_robustness", None)["evidence"] == "no current record"


def test_a_record_that_is_not_current_is_refused_by_name(tmp_path, monkeypatch):
    import json

    from lengthgen.book import paths
    from lengthgen.book.sphinx_claims import judged_record

    monkeypatch.setattr(paths, "RECORDS_DIR", tmp_path)
    record = robustness_record()
    (tmp_path / "07_robustness.json").write_text(json.dumps(record))
    rows, problems = judged_record("07_robustness")
    assert rows and problems == []
    for edit, why in ((dict(code_fingerprint="other"), "other code"), (dict(notebook_hash="other"), "notebook"),
                      (dict(parameters={**record["parameters"], "sweep_name": "zoo"}), "other parameters")):
        (tmp_path / "07_robustness.json").write_text(json.dumps({**record, **edit}))
        rows, problems = judged_record("07_robustness")
        assert not rows and why in problems[-1]
    (tmp_path / "07_robustness.json").unlink()
    assert "no record" in judged_record("07_robustness")[1][-1]


def test_a_per_run_check_with_no_run_is_not_judged_and_never_passes(tmp_path, monkeypatch):
    import pandas as pd

    from lengthgen.book import glue as glue_module
    from lengthgen.book import harness
    from lengthgen.book.audit import current_defaults
    from lengthgen.book.judging import rejudge

    monkeypatch.setattr(harness, "glue", lambda *args, **kwargs: None)
    monkeypatch.setattr(glue_module, "glue", lambda *args, **kwargs: None)
    chapter = harness.Chapter("01_equivariance", {**current_defaults("01_equivariance"), "_records_folder": str(tmp_path)})
    assert chapter.check_runs("peak_at_k", pd.DataFrame(columns=["offset", "seed", "value"])) is False
    stored = chapter.record.checks[-1]
    assert math.isnan(stored.value) and stored.passed is False
    stored_pass = dict(name="peak_at_k", claim="", value=0.0, comparison="==", threshold=0.0, passed=True, role="evidence")
    record = dict(chapter="01_equivariance", parameters=current_defaults("01_equivariance"),
                  details=dict(per_run={"peak_at_k": []}), checks=[stored_pass])
    judged = {c["name"]: c for c in rejudge(record)["checks"]}["peak_at_k"]
    assert math.isnan(judged["value"]) and judged["passed"] is False  # stored as a pass: judged again, not judged
    rows, problems = judged_rows("01_equivariance", record)
    assert {r["name"]: r["verdict"] for r in rows}["peak_at_k"] == "not judged" and any("peak_at_k" in p for p in problems)


def test_a_registered_value_changed_without_a_revision_is_named():
    before = dict(a=dict(registered="evidence: >= 0.8"), b=dict(registered="sanity: == 0"))
    quiet = dict(a=dict(registered="evidence: >= 0.7"), b=dict(registered="sanity: == 0"))
    revised = dict(a=dict(registered="evidence: >= 0.7", revisions=[dict(was="evidence: >= 0.8", why="a review")]),
                   b=dict(registered="reported"))
    assert unrevised_changes(before, quiet) == ["a"] and unrevised_changes(before, revised) == ["b"]


def test_every_registered_value_changed_since_its_register_was_first_committed_has_a_revision():
    """The register's history is the repository's: a threshold or role that differs from the register as first
    committed must have gained a revision since (a clone without history skips this)."""
    import subprocess

    from lengthgen.book.paths import REPO_ROOT

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True).stdout

    checked = 0
    for chapter in CHAPTERS:
        path = register_path(chapter).relative_to(REPO_ROOT)
        added = git("log", "--diff-filter=A", "--format=%H", "--", str(path)).split()
        if not added:
            continue
        first = yaml.safe_load(git("show", f"{added[-1]}:{path}")) or {}
        assert unrevised_changes(first, register_of(chapter)) == [], f"{chapter}: changed without a revision"
        checked += 1
    if not checked:
        pytest.skip("no committed register in this clone's history")


def test_inspected_seeds_are_a_list_of_seeds_and_read_back(tmp_path, monkeypatch):
    """A register may name the seeds looked at before a claim was registered; anything but a list of seeds is a problem."""
    import lengthgen.claims as claims

    assert claims.inspected_seeds("02_absolute_pinning", "chance_bound") == frozenset(range(100, 110))
    assert claims.inspected_seeds("02_absolute_pinning", "argmax_in_range") == frozenset()
    register = claims.register_of("02_absolute_pinning")
    register["chance_bound"]["inspected_seeds"] = "100-109"
    monkeypatch.setattr(claims, "register_of", lambda chapter: register)
    assert any("inspected_seeds must be a list" in p for p in claims.register_problems("02_absolute_pinning"))


def test_a_given_names_an_earlier_asserted_per_run_claim_of_the_same_chapter():
    """A per-run claim judged given another reads that one's verdicts: it must exist, be per run and asserted, come
    first in the chapter's claims (the harness judges in order), and not itself depend on a given (no chains)."""
    from lengthgen.book import bookcache
    from lengthgen.book.paths import REPO_ROOT

    seen = 0
    for chapter in bookcache.toc_chapters(REPO_ROOT):
        try:
            claims = list(claims_of(chapter).values())
        except KeyError:
            continue
        names = [c.name for c in claims]
        for i, claim in enumerate(claims):
            if not claim.given:
                continue
            seen += 1
            assert claim.per_run, f"{chapter}: {claim.name} has a given but is not per run"
            assert claim.given in names[:i], f"{chapter}: {claim.name} is given {claim.given!r}, not an earlier claim"
            given = claims[names.index(claim.given)]
            assert given.per_run and given.comparison and not given.given, f"{chapter}: {claim.name}'s given"
    assert seen, "no claim is judged given another"
