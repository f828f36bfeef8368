"""Reruns and sweeps: validation before any work, keys that follow the code, resumable sweeps, Dask, the committed sweep."""

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lengthgen.book import fingerprint
from lengthgen.book.parameters import ParameterError
from lengthgen.book.paths import SWEEPS_DIR, notebook_path
from lengthgen.book.rerun import checked_parameters, default_parameters, main, parse_overrides, run_key
from lengthgen.book.sweep import (
    execute_run,
    expand,
    load_spec,
    results_table,
    run_sweep,
    store,
    sweep_folder,
    write_results,
)
from lengthgen.claims import EPS32

TINY = "{seeds: 1, steps: 20, length_factor: 2, eval_batch: 8, workers: 1, device: cpu}"


def test_unknown_parameter_stops_before_any_work(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["book/01_equivariance.ipynb", "-p", "offsett", "3", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "unknown parameter(s) ['offsett']" in err and "valid parameters" in err and "'offsets'" in err
    assert not out.exists()


@pytest.mark.parametrize("args, message", [
    (["book/04_dilution_law.ipynb", "-p", "offsets", "[3, 40]"], "every offset must be in [1, train_length - 1] = [1, 31]"),
    (["book/01_equivariance.ipynb", "-p", "steps", "010"], "'010' has a leading zero"),
    (["book/01_equivariance.ipynb", "-p", "lr", ".nan"], "'lr' = nan is not a finite number"),
    (["book/06_transfer.ipynb", "-p", "heads", "3"], "'heads' = 3 must split dim = 64"),
    (["book/intro.md"], "is not a parameterized chapter"),
])
def test_bad_values_stop_with_the_chapters_validation_error(tmp_path, capsys, args, message):
    assert main([*args, "--out", str(tmp_path / "r")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_describe_lists_parameters(capsys):
    assert main(["book/03_carrier.ipynb", "--describe"]) == 0
    assert "null_draws" in capsys.readouterr().out


def test_parameters_parse_merge_and_key():
    assert parse_overrides([["offsets", "[7]"], ["lr", "1e-3"]], "seeds: 3") == dict(offsets=[7], lr=0.001, seeds=3)
    defaults = default_parameters(notebook_path("03_carrier"))
    assert defaults["offsets"] == [3, 5, 9]
    merged = checked_parameters("03_carrier", dict(seeds=2))
    assert merged.seeds == 2 and merged.offsets == (3, 5, 9)
    assert run_key("03_carrier", merged) == run_key("03_carrier", checked_parameters("03_carrier", dict(seeds=2)))
    assert run_key("03_carrier", merged) != run_key("03_carrier", checked_parameters("03_carrier", dict(seeds=3)))
    with pytest.raises(ParameterError):
        checked_parameters("03_carrier", dict(energy=2.0))


def test_run_key_follows_the_code_and_the_notebook(monkeypatch):
    p = checked_parameters("01_equivariance", {})
    key = run_key("01_equivariance", p)
    monkeypatch.setattr(fingerprint, "measurement_fingerprint", lambda chapter, root=None: "changed library")
    assert run_key("01_equivariance", p) != key
    monkeypatch.undo()
    monkeypatch.setattr(fingerprint, "notebook_hash", lambda path: "changed notebook")
    assert run_key("01_equivariance", p) != key


def test_rerun_writes_notebook_record_and_parameters(tmp_path):
    out = tmp_path / "run"
    assert main(["book/01_equivariance.ipynb", "-y", TINY, "-p", "offsets", "[3]", "--out", str(out)]) in (0, 1)
    assert {p.name for p in out.iterdir()} >= {"01_equivariance.ipynb", "01_equivariance.json", "parameters.json"}
    record = json.loads((out / "01_equivariance.json").read_text())
    assert record["parameters"]["offsets"] == [3] and record["parameters"]["steps"] == 20


def write_spec(folder: Path, offsets: list[int], name: str = "spec.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / name
    grid = [[k] for k in offsets]
    chapters = f"chapters:\n  01_equivariance:\n    fixed: {TINY}\n    grid: {{offsets: {grid}}}\n"
    spec.write_text("name: tiny\nworkers: 2\n" + chapters)
    return spec


def test_interrupted_sweep_resumes_only_missing_runs(tmp_path):
    spec = write_spec(tmp_path / "tiny", [3, 5, 7])
    first = run_sweep(spec, max_runs=1, progress=False)  # "interrupted" after one run
    assert len(first) == 1
    (done_key,) = first
    stored = (tmp_path / "tiny" / "runs" / f"{done_key}.json").read_bytes()
    second = run_sweep(spec, progress=False)
    assert len(second) == 2 and done_key not in second
    assert (tmp_path / "tiny" / "runs" / f"{done_key}.json").read_bytes() == stored  # nothing lost or redone
    assert run_sweep(spec, progress=False) == {}
    table = pd.read_csv(tmp_path / "tiny" / "results.csv")
    assert table.key.nunique() == 3 and set(table.param_offsets) == {"[3]", "[5]", "[7]"}
    verdicts = pd.read_csv(tmp_path / "tiny" / "per_run.csv")
    assert set(verdicts.key) == set(table.key) and set(verdicts.offset) == {3, 5, 7}
    per_run_claims = set(table.name[table.value.notna()]) & set(verdicts.name)
    assert per_run_claims == {"peak_at_k", "worst_accuracy"}
    # a per-run claim's check counts the failing verdicts of its run
    for (key, name), group in verdicts.groupby(["key", "name"]):
        row = table[(table.key == key) & (table.name == name)].iloc[0]
        assert row.value == (~group.passed).sum()
    assert not list((tmp_path / "tiny" / "runs").glob(".*tmp"))


def test_a_spec_lists_single_points_beside_its_grid():
    spec = {"chapters": {"01_equivariance": {"fixed": {"seeds": 1, "steps": 20}, "grid": {"offsets": [[3], [5]]},
                                             "points": [{"offsets": [7], "seeds": 2}]}}}
    runs = expand(spec)
    assert [r.overrides for r in runs] == [{"seeds": 1, "steps": 20, "offsets": [3]},
                                           {"seeds": 1, "steps": 20, "offsets": [5]},
                                           {"seeds": 2, "steps": 20, "offsets": [7]}]
    del spec["chapters"]["01_equivariance"]["grid"]
    assert [r.overrides for r in expand(spec)] == [{"seeds": 2, "steps": 20, "offsets": [7]}]  # no bare fixed run
    spec["chapters"]["01_equivariance"]["points"] = [{"offsets": [1000]}]
    with pytest.raises(ParameterError, match="offsets"):
        expand(spec)  # every point is validated before anything runs
    spec["chapters"]["01_equivariance"]["points"] = {"offsets": [7]}
    with pytest.raises(ParameterError, match="points"):
        expand(spec)


def test_sweep_resumed_after_a_change_reruns_every_affected_run(tmp_path, monkeypatch):
    spec = write_spec(tmp_path / "changed", [3])
    (key,) = run_sweep(spec, progress=False)
    folder = sweep_folder(spec)
    # a change to the library (any module the chapter imports) gives every run a new key
    monkeypatch.setattr(fingerprint, "measurement_fingerprint", lambda chapter, root=None: "edited library")
    (new_key,) = run_sweep(spec, progress=False)
    assert new_key != key
    table = pd.read_csv(folder / "results.csv")
    assert set(table.key) == {new_key}, "results.csv holds only the spec's current runs"
    # a change to the notebook's code cells likewise
    monkeypatch.setattr(fingerprint, "notebook_hash", lambda path: "edited notebook")
    (third,) = run_sweep(spec, progress=False)
    assert third not in (key, new_key)
    assert {p.stem for p in (folder / "runs").glob("*.json")} == {key, new_key, third}
    monkeypatch.undo()
    assert run_sweep(spec, progress=False) == {}  # back at the original code: the original run is still there


def test_multithreaded_dask_worker_keeps_each_runs_record_apart(tmp_path):
    from dask.distributed import LocalCluster

    spec = write_spec(tmp_path / "dask", [3, 4, 6])
    with LocalCluster(n_workers=1, threads_per_worker=3, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        done = run_sweep(spec, scheduler=cluster.scheduler_address, progress=False)
    assert len(done) == 3 and set(done.values()) <= {"ok", "claims failed"}
    runs = {run.key: run for run in expand(load_spec(spec))}
    for key in done:
        record = json.loads((tmp_path / "dask" / "runs" / f"{key}.json").read_text())
        assert record["parameters"]["offsets"] == runs[key].overrides["offsets"], "a run's record went to another run"
    assert len(results_table(tmp_path / "dask")) > 0


def reproduction_rtol(parameters: dict) -> float:
    """Relative tolerance for a value measured on a model trained for ``steps`` Adam steps on another machine.

    Another CPU, BLAS or torch build sums in another order: each float32 dot product of length
    ``dim`` then differs by about ``sqrt(dim) * eps32`` relative. Over ``steps`` updates these
    perturbations add up at most linearly when training is not chaotic, so parameters, and the
    smooth measurements made from them, agree to ``steps * sqrt(dim) * eps32`` relative.
    """
    return parameters["steps"] * math.sqrt(parameters["dim"]) * EPS32


def test_a_slice_of_the_committed_sweep_reproduces(tmp_path):
    """Verdicts exactly; values to :func:`reproduction_rtol`; proof checks (rounding residuals) by verdict only.

    Integer-valued checks (counts) must agree exactly. Bitwise agreement holds on one machine
    (tests/test_heads_and_training.py), not across CPUs and BLAS builds, so it is not asked here.
    """
    folder = SWEEPS_DIR / "single_head"
    committed = pd.read_csv(folder / "results.csv")
    runs = {run.key: run for run in expand(load_spec(folder / "spec.yaml"))}
    run = next(r for r in runs.values() if r.chapter == "03_carrier" and r.overrides["offsets"] == [3])
    assert run.key in set(committed.key), "the committed table lacks the run this test reproduces (regenerate the sweep)"
    shutil.copy(folder / "spec.yaml", tmp_path / "spec.yaml")
    key, status, record = execute_run(run)
    assert key == run.key and status in ("ok", "claims failed")
    store(tmp_path, key, record)
    fresh = pd.read_csv(write_results(tmp_path)).set_index("name")  # through the same CSV round trip
    old = committed[committed.key == run.key].set_index("name")
    assert sorted(fresh.index) == sorted(old.index)
    parameters = checked_parameters(run.chapter, run.overrides).as_dict()
    rtol = reproduction_rtol(parameters)
    for name, row in old.iterrows():
        new = fresh.loc[name]
        assert str(new.passed) == str(row.passed), f"{name}: verdict {row.passed} -> {new.passed}"
        if row.role == "proof":
            continue
        if float(row.value).is_integer() and row.comparison == "==":
            assert new.value == row.value, name
        else:
            assert np.isclose(new.value, row.value, rtol=rtol, atol=1e-12), (
                f"{name}: {row.value} -> {new.value} (rtol {rtol:.1e})")
    # every seed's verdict on every per-run claim, and the value behind it
    fresh_runs = pd.read_csv(tmp_path / "per_run.csv").set_index(["name", "offset", "seed"]).sort_index()
    old_runs = pd.read_csv(folder / "per_run.csv")
    old_runs = old_runs[old_runs.key == run.key].set_index(["name", "offset", "seed"]).sort_index()
    assert list(fresh_runs.index) == list(old_runs.index) and len(old_runs)
    assert (fresh_runs.passed == old_runs.passed).all()
    assert np.allclose(fresh_runs.value, old_runs.value, rtol=rtol, atol=1e-12, equal_nan=True)
