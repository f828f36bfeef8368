"""Measurement apart from judgement: run keys that ignore the claims, verdicts recomputed from stored values, sealed
records that cannot be edited or lost without the book saying so, and runs carried over to new keys."""

import dataclasses
import importlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from lengthgen_testing import copy_repository

from lengthgen.book import fingerprint
from lengthgen.book.judging import rejudge
from lengthgen.book.parameters import ParameterError
from lengthgen.book.paths import REPO_ROOT, SWEEPS_DIR
from lengthgen.book.records import load_record
from lengthgen.book.rerun import checked_parameters, run_key
from lengthgen.book.sweep import (
    MANIFEST,
    RecordError,
    expand,
    load_spec,
    read_manifest,
    rekey,
    results_table,
    sealed,
    store,
    stored_records,
)
from lengthgen.chapters import robustness
from lengthgen.claims import claims_module, claims_of, register_of

SWEEPS = sorted(p.parent.name for p in SWEEPS_DIR.glob("*/spec.yaml"))


def copy_sweep(tmp_path: Path, name: str) -> Path:
    shutil.copytree(SWEEPS_DIR / name, tmp_path / name)
    return tmp_path / name


def edit_first_record(folder: Path, change: float) -> Path:
    """Change the first check value of the folder's first record by hand (digest left as it was); returns its path."""
    path = sorted((folder / "runs").glob("*.json"))[0]
    record = json.loads(path.read_text())
    record["checks"][0]["value"] += change
    path.write_text(json.dumps(record, indent=1, sort_keys=True))
    return path


@pytest.mark.parametrize("sweep", SWEEPS)
def test_every_committed_run_is_sealed_current_and_judged_again_equals_itself(sweep):
    """Every run the spec lists has a record under its current key that the manifest seals, and judging its values
    against the current claims gives back exactly the stored values, thresholds and verdicts (nothing was edited
    since; a statement may have been reworded)."""
    folder = SWEEPS_DIR / sweep
    manifest = read_manifest(folder)
    runs = expand(load_spec(folder / "spec.yaml"))
    assert all(sealed(folder, run.key, manifest) for run in runs), f"{sweep}: a run is missing, stale or unsealed"
    assert set(manifest) == {p.stem for p in (folder / "runs").glob("*.json")}
    def verdicts(record: dict, revised: set[str]) -> str:  # all but the wording and the judgement of revised claims
        per_run_names = set(record.get("details", {}).get("per_run", {}))
        judgement = {"role", "comparison", "threshold", "passed"}

        def kept(check: dict, key: str) -> bool:  # a per-run check's value is its count of failing runs: a judgement
            moved = check["name"] in revised and (key in judgement or (key == "value" and check["name"] in per_run_names))
            return key != "claim" and not moved

        checks = [{k: v for k, v in check.items() if kept(check, k)} for check in record["checks"]]
        per_run = {name: [{k: v for k, v in run.items() if not (name in revised and k == "passed")} for run in runs]
                   for name, runs in record.get("details", {}).get("per_run", {}).items()}
        rest = {k: v for k, v in record.items() if k not in ("checks", "details", "status")}
        details = {k: v for k, v in record.get("details", {}).items() if k != "per_run"}
        return json.dumps([checks, per_run, rest, details], sort_keys=True)

    for path in sorted((folder / "runs").glob("*.json")):
        record = load_record(path)
        register = register_of(record["chapter"])
        revised = {name for name, entry in register.items() if entry.get("revisions")}  # judged anew: on record why
        judged = rejudge(record)
        assert verdicts(judged, revised) == verdicts(record, revised), path.name
        claims = claims_of(record["chapter"])
        for name, runs in judged.get("details", {}).get("per_run", {}).items():  # the revised ones judged consistently
            claim = claims.get(name)
            if claim is None or not claim.comparison:
                continue
            counted = [run["passed"] for run in runs if run["passed"] is not None]
            check = next(c for c in judged["checks"] if c["name"] == name)
            assert (check["value"] == len(counted) - sum(counted)) if counted else check["value"] != check["value"]
            assert claim.given or len(counted) == len(runs), f"{path.name}: {name} leaves runs unjudged without a given"


def test_rewording_a_claim_moves_no_key_and_re_renders_the_page_warm(tmp_path):
    """A claim's statement and reason are prose: no run key and no page execution moves; only the prose fingerprint
    does, so the book cache has Sphinx read the page again over its cached execution."""
    root = copy_repository(tmp_path)
    chapters = ("03_carrier", "06_transfer", "07_robustness")
    fingerprints = (fingerprint.measurement_fingerprint, fingerprint.code_fingerprint, fingerprint.prose_fingerprint)
    before = {c: [f(c, root) for f in fingerprints] for c in chapters}
    claims = root / "lib/lengthgen/claims/carrier.py"
    text = claims.read_text()
    edited = text.replace('"The ', '"Rewritten: the ', 1).replace('"largest ', '"the largest ', 1)
    assert edited != text
    claims.write_text(edited)
    register = root / "lib/lengthgen/claims/register/carrier.yaml"
    register.write_text(register.read_text() + "# a note\n")
    after = {c: [f(c, root) for f in fingerprints] for c in chapters}
    assert after["06_transfer"] == before["06_transfer"], "chapter 6 neither shows nor judges chapter 3's claims"
    for chapter in ("03_carrier", "07_robustness"):  # chapter 7 judges chapter 3's runs in the robustness sweep
        assert after[chapter][:2] == before[chapter][:2], f"{chapter}: rewording must not re-execute the page"
        assert after[chapter][2] != before[chapter][2], f"{chapter}: the page shows the claims: it must be read again"


def test_changing_a_threshold_re_executes_the_pages_that_judge_it_and_moves_no_key(tmp_path):
    root = copy_repository(tmp_path)
    chapters = ("03_carrier", "07_robustness", "01_equivariance")
    before = {c: (fingerprint.measurement_fingerprint(c, root), fingerprint.code_fingerprint(c, root)) for c in chapters}
    claims = root / "lib/lengthgen/claims/carrier.py"
    text = claims.read_text()
    edited = text.replace('"<=", 0,', '"<=", 1,', 1)
    assert edited != text
    claims.write_text(edited)
    after = {c: (fingerprint.measurement_fingerprint(c, root), fingerprint.code_fingerprint(c, root)) for c in chapters}
    assert all(after[c][0] == before[c][0] for c in chapters), "a threshold is judgement: no run key moves"
    assert after["03_carrier"][1] != before["03_carrier"][1] and after["07_robustness"][1] != before["07_robustness"][1]
    assert after["01_equivariance"][1] == before["01_equivariance"][1]


def test_no_measurement_code_imports_a_chapters_claims_module():
    """Chapter 12's measurement reads its held-out checks' names through ``claims_of``; no notebook's import closure
    holds a chapter's claims module, so rewording one never re-executes a page (but the summary page, which judges
    every chapter and is executed at every build anyway)."""
    from lengthgen.book.parameters import parameters_of

    for notebook in sorted((REPO_ROOT / "book").glob("[0-9][0-9]_*.ipynb")):
        if parameters_of(notebook.stem).always_execute:
            continue
        closure = fingerprint.import_closure(fingerprint.code_cells(notebook), REPO_ROOT / "lib")
        claims = [p.name for p in closure if p.parent.name == "claims" and p.name != "__init__.py"]
        assert not claims, f"{notebook.name} imports {claims}"


def test_editing_a_module_a_sweeps_runs_import_makes_them_stale(tmp_path):
    """The transformer is measurement code of chapter 6 (its key moves) and not of chapter 1 (its key stays)."""
    root = copy_repository(tmp_path)
    before = {c: fingerprint.measurement_fingerprint(c, root) for c in ("01_equivariance", "06_transfer")}
    module = root / "lib/lengthgen/model/transformer.py"
    module.write_text(module.read_text() + "\nEDITED = 1\n")
    assert fingerprint.measurement_fingerprint("06_transfer", root) != before["06_transfer"]
    assert fingerprint.measurement_fingerprint("01_equivariance", root) == before["01_equivariance"]
    book = root / "lib/lengthgen/book/plotting.py"  # book machinery draws, it does not measure
    book.write_text(book.read_text() + "\nEDITED = 1\n")
    assert fingerprint.measurement_fingerprint("06_transfer", root) != before["06_transfer"]
    assert fingerprint.measurement_fingerprint("01_equivariance", root) == before["01_equivariance"]


def test_run_keys_name_the_chapter_not_its_file_number(monkeypatch):
    p = checked_parameters("03_carrier", {})
    assert fingerprint.stable_name("03_carrier") == "carrier" and fingerprint.stable_name("odd") == "odd"
    key = run_key("03_carrier", p)
    monkeypatch.setattr(fingerprint, "stable_name", lambda chapter: "renamed")
    assert run_key("03_carrier", p) != key  # the stable name is what the key holds


def test_a_changed_threshold_re_judges_every_stored_run_without_staling_it(monkeypatch):
    folder = SWEEPS_DIR / "single_head"
    keys = {run.key for run in expand(load_spec(folder / "spec.yaml"))}
    table = results_table(folder)
    row = table[table.passed.map(lambda v: v is True) & table.comparison.isin(["<=", "<"])].iloc[0]
    module = importlib.import_module(claims_module(row.chapter))
    claim = next(c for c in module.CLAIMS if c.name == row["name"])
    strict = dataclasses.replace(claim, threshold=float(row.value) - 1.0 - abs(float(row.value)))
    monkeypatch.setattr(module, "CLAIMS", tuple(strict if c is claim else c for c in module.CLAIMS))
    assert {run.key for run in expand(load_spec(folder / "spec.yaml"))} == keys, "a threshold moved a run key"
    again = results_table(folder)
    judged = again[(again.key == row.key) & (again.name == row["name"])].iloc[0]
    assert judged.passed is not None and not judged.passed
    assert judged.threshold == strict.threshold and judged.value == row.value
    record = next(r for r in stored_records(folder, {row.key}))
    assert record["status"] == "claims failed"


def test_a_per_run_claim_is_recounted_from_its_runs_values(monkeypatch):
    folder = SWEEPS_DIR / "single_head"
    record = next(r for r in stored_records(folder, None) if r["details"].get("per_run"))
    name, runs = next(iter(record["details"]["per_run"].items()))
    chapter_claims = importlib.import_module(claims_module(record["chapter"]))
    claim = next(c for c in chapter_claims.CLAIMS if c.name == name)
    flipped = {"<=": ">", "<": ">=", ">=": "<", ">": "<="}[claim.comparison]
    monkeypatch.setattr(chapter_claims, "CLAIMS", tuple(dataclasses.replace(c, comparison=flipped) if c is claim else c
                                                         for c in chapter_claims.CLAIMS))
    judged = rejudge(record)
    check = next(c for c in judged["checks"] if c["name"] == name)
    assert check["value"] == sum(1 for run in judged["details"]["per_run"][name] if run["passed"] is False)
    if all(run["value"] == run["value"] for run in runs):  # without NaN, the flipped comparison fails the others
        assert check["value"] == len(runs) - next(c for c in record["checks"] if c["name"] == name)["value"]


def test_a_claim_no_longer_registered_judges_nothing(monkeypatch):
    record = next(stored_records(SWEEPS_DIR / "single_head", None))
    name = next(c["name"] for c in record["checks"] if c["passed"] is not None)
    module = importlib.import_module(claims_module(record["chapter"]))
    monkeypatch.setattr(module, "CLAIMS", tuple(c for c in module.CLAIMS if c.name != name))
    check = next(c for c in rejudge(record)["checks"] if c["name"] == name)
    assert check["role"] == "unregistered" and check["passed"] is None


def test_a_hand_edited_record_is_refused_by_every_reader(tmp_path):
    folder = copy_sweep(tmp_path, "single_head")
    path = edit_first_record(folder, 0.5)
    with pytest.raises(RecordError, match=path.name):
        results_table(folder)
    assert not sealed(folder, path.stem)  # a resumed sweep runs it again rather than trust it


def test_a_record_copied_into_a_sweep_is_refused(tmp_path):
    folder = copy_sweep(tmp_path, "single_head")
    path = sorted((folder / "runs").glob("*.json"))[0]
    shutil.copy(path, folder / "runs" / "0000000000000000.json")
    with pytest.raises(RecordError, match="0000000000000000.json"):
        list(stored_records(folder, None))


def test_a_deleted_run_re_executes_the_page_that_reads_it_and_is_counted_missing(tmp_path):
    root = copy_repository(tmp_path)
    before = fingerprint.code_fingerprint("06_transfer", root)
    run = sorted((root / "data/sweeps/transfer/runs").glob("*.json"))[0]
    run.unlink()
    assert fingerprint.code_fingerprint("06_transfer", root) != before
    assert fingerprint.measurement_fingerprint("06_transfer", root) == fingerprint.measurement_fingerprint("06_transfer")


def test_chapter_7_judges_the_records_not_the_csv(tmp_path, monkeypatch):
    """Verdicts come from the records: a CSV whose every verdict reads 'passed' changes nothing; a CSV whose value
    differs from its record stops the chapter with a message naming the row."""
    copy_sweep(tmp_path, "single_head")
    monkeypatch.setattr(robustness, "SWEEPS_DIR", tmp_path)
    honest = robustness.load_sweep("single_head")
    csv = tmp_path / "single_head" / "results.csv"
    table = pd.read_csv(csv)
    table["passed"] = table.passed.map(lambda v: v if v != v else True)
    table.to_csv(csv, index=False)
    forged = robustness.load_sweep("single_head")
    assert (forged.asserted.passed == honest.asserted.passed).all() and not honest.asserted.passed.all()
    row = table.value.first_valid_index()  # a finite value (NaN + 1 would still read NaN)
    table.loc[row, "value"] = table.loc[row, "value"] + 1
    table.to_csv(csv, index=False)
    with pytest.raises(RuntimeError, match="disagrees with the run records"):
        robustness.load_sweep("single_head")


def test_rekey_carries_runs_to_their_new_keys_marked_and_sealed(tmp_path, monkeypatch):
    folder = copy_sweep(tmp_path, "zoo")
    old = {p.stem: json.loads(p.read_text()) for p in (folder / "runs").glob("*.json")}
    old_table = pd.read_csv(folder / "results.csv")
    monkeypatch.setattr(fingerprint, "measurement_fingerprint", lambda chapter, root=None: "moved code")
    moved = rekey(folder / "spec.yaml", "abc1234")
    assert set(moved) == set(old) and not set(moved.values()) & set(old)
    for before, after in moved.items():
        record = json.loads((folder / "runs" / f"{after}.json").read_text())
        assert record["rekeyed_from"] == [*old[before].get("rekeyed_from", []), dict(key=before, verified_by="abc1234")]
        assert record["key"] == after and record["checks"] == old[before]["checks"]
    assert set(read_manifest(folder)) == set(moved.values())
    def canonical(table: pd.DataFrame) -> pd.DataFrame:
        return table.drop(columns="key").sort_values(["overrides", "name"]).reset_index(drop=True)

    assert canonical(pd.read_csv(folder / "results.csv")).equals(canonical(old_table))
    assert rekey(folder / "spec.yaml", "abc1234") == {}  # once: a second pass moves nothing
    assert (folder / MANIFEST).exists()


def test_rekey_gives_a_run_a_parameter_added_since_at_its_default_and_says_so(tmp_path, monkeypatch):
    """A parameter added to a chapter after its runs were made (chapter 6's ``backend``, whose default is the code
    path the runs took) enters each moved record's parameters at that value, listed in ``rekeyed_from``."""
    folder = copy_sweep(tmp_path, "transfer")
    for path in sorted((folder / "runs").glob("*.json")):  # the records as they were before the parameter existed
        record = json.loads(path.read_text())
        record["parameters"].pop("backend", None)
        store(folder, path.stem, record)
    monkeypatch.setattr(fingerprint, "measurement_fingerprint", lambda chapter, root=None: "moved code")
    moved = rekey(folder / "spec.yaml", "abc1234")
    assert moved
    for after in moved.values():
        record = json.loads((folder / "runs" / f"{after}.json").read_text())
        assert record["parameters"]["backend"] == "eager"
        assert record["rekeyed_from"][-1] == dict(key=record["rekeyed_from"][-1]["key"], verified_by="abc1234",
                                                  added_parameters={"backend": "eager"})


def test_a_missing_run_stops_its_reader_naming_the_run_and_its_settings(tmp_path):
    folder = copy_sweep(tmp_path, "transfer")
    keys = {run.key for run in expand(load_spec(folder / "spec.yaml"))}
    gone = sorted((folder / "runs").glob("*.json"))[0]
    gone.unlink()
    with pytest.raises(RecordError, match=gone.stem) as err:
        results_table(folder, keys)
    assert "06_transfer" in str(err.value) and "offsets" in str(err.value) and "make sweep" in str(err.value)


def test_an_unsealed_file_stops_every_reader_even_one_that_does_not_read_it(tmp_path):
    folder = copy_sweep(tmp_path, "transfer")
    keys = {run.key for run in expand(load_spec(folder / "spec.yaml"))}
    (folder / "runs" / "ffffffffffffffff.json").write_text(json.dumps(dict(key="ffffffffffffffff", checks=[])))
    with pytest.raises(RecordError, match="ffffffffffffffff.json"):
        results_table(folder, keys)


def test_a_foreign_chapter_record_is_reported_not_deleted(tmp_path, monkeypatch):
    from lengthgen.book import bookcache

    records = tmp_path / "records"
    records.mkdir()
    (records / "05_deleted_chapter.json").write_text("{}")
    monkeypatch.setattr(bookcache, "RECORDS_DIR", records)
    monkeypatch.setattr(bookcache, "forget", lambda notebook, build: None)
    done = bookcache.refresh(REPO_ROOT, build=tmp_path / "build")
    assert done["foreign"] == ["05_deleted_chapter"] and (records / "05_deleted_chapter.json").exists()


def test_a_claim_registered_after_a_run_fails_as_not_measured(monkeypatch):
    record = next(stored_records(SWEEPS_DIR / "transfer", None))
    module = importlib.import_module(claims_module(record["chapter"]))
    template = next(c for c in module.CLAIMS if c.comparison and not c.per_run)
    added = dataclasses.replace(template, name="registered_later")
    monkeypatch.setattr(module, "CLAIMS", (*module.CLAIMS, added))
    check = next(c for c in rejudge(record)["checks"] if c["name"] == "registered_later")
    assert check["passed"] is False and "not measured" in check["claim"]
    per_run = dataclasses.replace(template, per_run=True)  # now stated per run: the stored single value cannot judge it
    monkeypatch.setattr(module, "CLAIMS", tuple(per_run if c is template else c for c in module.CLAIMS))
    check = next(c for c in rejudge(record)["checks"] if c["name"] == template.name)
    assert check["passed"] is False and "not measured" in check["claim"]


def test_rekey_refuses_an_edited_record_and_two_records_of_one_run(tmp_path):
    folder = copy_sweep(tmp_path, "transfer")
    path = edit_first_record(folder, 1.0)
    with pytest.raises(RecordError, match=path.name):
        rekey(folder / "spec.yaml", "abc1234")
    folder = copy_sweep(tmp_path / "again", "transfer")
    (folder / MANIFEST).unlink()  # a sweep from before manifests, holding an old and a new record of one run
    path = sorted((folder / "runs").glob("*.json"))[0]
    shutil.copy(path, folder / "runs" / "0123456789abcdef.json")
    with pytest.raises(ParameterError, match="records of the same settings"):
        rekey(folder / "spec.yaml", "abc1234")


def test_a_page_re_executes_when_a_sweep_its_module_names_changes(tmp_path):
    """Chapter 6 quotes chapter 11's committed copy and reversal runs (FULL_SEQUENCE_SWEEP)."""
    root = copy_repository(tmp_path)
    before = fingerprint.code_fingerprint("06_transfer", root)
    sorted((root / "data/sweeps/zoo_networks/runs").glob("*.json"))[0].unlink()
    assert fingerprint.code_fingerprint("06_transfer", root) != before
