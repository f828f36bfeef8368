"""Reruns and sweeps: validation before any work, resumable sweeps, the Dask path, the committed sweep."""

import shutil
from pathlib import Path

import pandas as pd
import pytest

from lengthgen.params import ParameterError
from lengthgen.paths import DATA_DIR
from lengthgen.rerun import checked_parameters, default_parameters, main, notebook_path, parse_overrides, run_key
from lengthgen.sweep import execute_run, expand, load_spec, results_table, run_sweep, write_results

TINY = "{seeds: 1, steps: 20, length_factor: 2, eval_batch: 8}"


def test_unknown_parameter_stops_before_any_work(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["book/01_equivariance.ipynb", "-p", "offsett", "3", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "unknown parameter(s) ['offsett']" in err and "valid parameters" in err and "'offset'" in err
    assert not out.exists()


def test_bad_value_stops_with_the_chapters_validation_error(tmp_path, capsys):
    assert main(["book/04_dilution_law.ipynb", "-p", "offsets", "[3, 40]", "--out", str(tmp_path / "r")]) == 2
    assert "every offset must be in [1, train_length - 1] = [1, 31]" in capsys.readouterr().err
    assert main(["book/intro.md"]) == 2


def test_parameters_parse_merge_and_key():
    assert parse_overrides([["offsets", "[7]"], ["lr", "0.5"]], "seeds: 3") == dict(offsets=[7], lr=0.5, seeds=3)
    defaults = default_parameters(notebook_path("03_carrier"))
    assert defaults["offsets"] == [3, 5, 9]
    merged = checked_parameters("03_carrier", dict(seeds=2))
    assert merged["seeds"] == 2 and merged["offsets"] == [3, 5, 9]
    assert run_key("03_carrier", merged) == run_key("03_carrier", dict(merged))
    assert run_key("03_carrier", merged) != run_key("03_carrier", {**merged, "seeds": 3})
    with pytest.raises(ParameterError):
        checked_parameters("03_carrier", dict(energy=2.0))


def test_rerun_writes_notebook_record_and_parameters(tmp_path):
    out = tmp_path / "run"
    assert main(["book/01_equivariance.ipynb", "-y", TINY, "-p", "offset", "3", "--out", str(out)]) in (0, 1)
    assert {p.name for p in out.iterdir()} >= {"01_equivariance.ipynb", "01_equivariance.json", "parameters.json"}


def write_spec(folder: Path, offsets: list[int]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "spec.yaml"
    chapters = f"chapters:\n  01_equivariance:\n    fixed: {TINY}\n    grid: {{offset: {offsets}}}\n"
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
    assert table.key.nunique() == 3 and set(table.param_offset) == {3, 5, 7}
    assert not list((tmp_path / "tiny" / "runs").glob(".*tmp"))


def test_sweep_on_a_dask_local_cluster(tmp_path):
    from dask.distributed import LocalCluster

    spec = write_spec(tmp_path / "dask", [4])
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None) as cluster:
        done = run_sweep(spec, scheduler=cluster.scheduler_address, progress=False)
    assert len(done) == 1 and next(iter(done.values())) in ("ok", "claims failed")
    assert len(results_table(tmp_path / "dask")) > 0


def test_a_slice_of_the_committed_sweep_reproduces_exactly(tmp_path):
    folder = DATA_DIR / "sweeps" / "single_head"
    committed = pd.read_csv(folder / "results.csv")
    runs = {run.key: run for run in expand(load_spec(folder / "spec.yaml"))}
    run = next(r for r in runs.values() if r.chapter == "03_carrier" and r.overrides["offsets"] == [3])
    assert run.key in set(committed.key), "the committed table lacks the run this test reproduces"
    shutil.copy(folder / "spec.yaml", tmp_path / "spec.yaml")
    key, status = execute_run(run, str(tmp_path))
    assert key == run.key and status in ("ok", "claims failed")
    fresh = pd.read_csv(write_results(tmp_path))  # through the same CSV round trip as the committed table
    old = committed[committed.key == run.key].dropna(axis=1, how="all").reset_index(drop=True)
    assert len(fresh) == len(old) > 0
    pd.testing.assert_frame_equal(fresh[old.columns], old, check_dtype=False, check_exact=True)
