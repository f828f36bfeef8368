"""Parameter sweeps over chapters: ``python -m lengthgen.book.sweep SPEC.yaml [--scheduler ADDRESS]``.

A spec (YAML, with the strict number rules of :func:`lengthgen.book.parameters.parse_yaml`)
lists chapters, each with fixed parameters and a grid; every point of every grid is one run::

    name: single_head
    workers: 2                    # local worker processes
    chapters:
      01_equivariance:
        fixed: {seeds: 10, workers: 1}
        grid: {offsets: [[3], [5], [7], [9]]}
        points: [{offsets: [11], seeds: 3}]   # optional: single runs beside the grid

``points`` lists runs whose settings do not form a grid with the others (another task at another
number of steps, say): each is one run, its values on top of ``fixed``.

Each run executes the chapter through papermill with one torch thread per worker and stores
its results record as ``runs/<key>.json`` next to the spec, written atomically. ``key``
hashes what produces the run: chapter, full parameters, the chapter's code fingerprint and its
notebook hash (:func:`lengthgen.book.rerun.run_key`). Rerunning an interrupted sweep executes
only the missing runs and loses nothing; after a change to the code or the notebook a chapter
runs, every affected run has a new key and runs again. ``results.csv`` aggregates the records
of the spec's current runs only (one row per run and claim), and ``per_run.csv`` the verdicts of
claims stated for every run (one row per run, claim, offset and seed); ``--prune`` deletes the
others.
Each run's record folder reaches the chapter as an argument, so a multi-threaded Dask worker can
run several chapters at once. Chapters take a ``device`` parameter like any other
(``fixed: {device: cuda}`` in a spec).

Backends: a local process pool (default), or a Dask distributed cluster with
``--scheduler tcp://HOST:PORT`` (with dask-jobqueue the same command drives SLURM or PBS
workers).
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import sys
import tempfile
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from .parameters import ParameterError, parse_yaml
from .records import load_record, plain, write_json_atomically
from .rerun import checked_parameters, execute, run_key

SINGLE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


@dataclass(frozen=True)
class Run:
    """One point of a sweep."""

    chapter: str
    overrides: dict[str, Any]
    key: str

    def record_path(self, folder: Path) -> Path:
        return folder / "runs" / f"{self.key}.json"


def load_spec(path: Path) -> dict:
    """A sweep spec (YAML, with the strict number rules of command-line values)."""
    spec = parse_yaml(Path(path).read_text(), where=str(path))
    if not isinstance(spec, dict) or not isinstance(spec.get("chapters"), dict):
        raise ParameterError(f"{path}: a sweep spec needs a 'chapters' mapping")
    return spec


def expand(spec: dict) -> list[Run]:
    """Every run of the spec, validated before anything executes (the code and notebook fingerprints computed once)."""
    runs = []
    for chapter, entry in spec["chapters"].items():
        entry = entry or {}
        fixed, grid = entry.get("fixed", {}) or {}, entry.get("grid", {}) or {}
        points = entry.get("points", []) or []
        if not isinstance(points, list) or not all(isinstance(point, dict) for point in points):
            raise ParameterError(f"{chapter}: 'points' must be a list of parameter mappings")
        names = sorted(grid)
        grid_points = ([dict(zip(names, values, strict=True)) for values in itertools.product(*(grid[n] for n in names))]
                       if grid or not points else [])
        for point in grid_points + points:
            overrides = {**fixed, **point}
            parameters = checked_parameters(chapter, overrides)
            runs.append(Run(chapter, overrides, run_key(chapter, parameters)))
    keys = [r.key for r in runs]
    if len(set(keys)) != len(keys):
        raise ParameterError("the spec lists the same run twice")
    return runs


def execute_run(run: Run, folder: str) -> tuple[str, str]:
    """Execute one run with one thread and store its record; returns ``(key, status)``.

    Runs in a worker process (local pool or Dask worker, possibly one of several threads). The
    run's own temporary folder reaches the chapter as an argument. A record is stored whenever
    the chapter wrote one, also when its claims failed (status ``"claims failed"``). The
    single-thread settings are the same for every run, so setting them here is safe under threads.
    """
    os.environ.update(SINGLE_THREAD_ENV)
    out = Path(folder)
    with tempfile.TemporaryDirectory(prefix=f"sweep-{run.key}-") as tmp:
        status = "ok"
        try:
            record_file = execute(run.chapter, run.overrides, Path(tmp))
        except Exception as err:  # noqa: BLE001 - the chapter's error is reported, the sweep goes on
            record_file = Path(tmp) / f"{run.chapter}.json"
            status = "claims failed" if record_file.exists() else f"error: {getattr(err, 'ename', type(err).__name__)}"
        if not record_file.exists():
            return run.key, status
        record = load_record(record_file)
    record.update(key=run.key, overrides=plain(run.overrides), status=status)
    write_json_atomically(run.record_path(out), record)
    return run.key, status


def run_columns(record: dict) -> dict:
    """The columns that identify a run in the sweep's tables: key, chapter, status, fingerprints, overrides."""
    row = dict(key=record["key"], chapter=record["chapter"], status=record["status"],
               code_fingerprint=record["code_fingerprint"][:16], notebook_hash=record["notebook_hash"][:16],
               overrides=json.dumps(record["overrides"], sort_keys=True))
    row.update({f"param_{k}": json.dumps(v) if isinstance(v, list) else v for k, v in record["overrides"].items()})
    return row


def stored_records(folder: Path, keys: set[str] | None) -> Iterable[dict]:
    """The stored run records of a sweep folder whose key is in ``keys`` (default: all), in key order."""
    for path in sorted((folder / "runs").glob("*.json")):
        if keys is None or path.stem in keys:
            yield load_record(path)


def ordered(table: pd.DataFrame, last: list[str], sort: list[str]) -> pd.DataFrame:
    """Identifying columns first, then the parameters, then ``last``; sorted by ``sort``."""
    if not len(table):
        return table
    params = sorted(c for c in table.columns if c.startswith("param_"))
    first = ["key", "chapter", "status", "code_fingerprint", "notebook_hash", "overrides", *params]
    return table[first + last].sort_values(sort).reset_index(drop=True)


def results_table(folder: Path, keys: set[str] | None = None) -> pd.DataFrame:
    """One row per (run, check) of the stored records whose key is in ``keys`` (default: all), sorted.

    Wall times and creation times are left out, so the rows of a run are reproducible.
    """
    rows = [{**run_columns(record), **check} for record in stored_records(folder, keys) for check in record["checks"]]
    return ordered(pd.DataFrame(rows), ["name", "claim", "role", "value", "comparison", "threshold", "passed"],
                   ["chapter", "key", "name"])


def per_run_table(folder: Path, keys: set[str] | None = None) -> pd.DataFrame:
    """One row per (run, per-run claim, offset, seed): the value and verdict every seed of every run got."""
    rows = []
    for record in stored_records(folder, keys):
        for name, verdicts in record.get("details", {}).get("per_run", {}).items():
            rows += [{**run_columns(record), "name": name, **verdict} for verdict in verdicts]
    return ordered(pd.DataFrame(rows), ["name", "offset", "seed", "value", "passed"],
                   ["chapter", "key", "name", "offset", "seed"])


def sweep_folder(spec_path: Path) -> Path:
    """The folder of a sweep: the spec's own folder for ``spec.yaml``, else a folder named like the spec."""
    spec_path = Path(spec_path)
    return spec_path.parent if spec_path.name == "spec.yaml" else spec_path.parent / spec_path.stem


def write_results(folder: Path, keys: set[str] | None = None) -> Path:
    """Rewrite ``results.csv`` and ``per_run.csv`` from the records of ``keys`` (default: every stored record),
    each atomically; returns the path of ``results.csv``."""
    for name, table in (("results.csv", results_table(folder, keys)), ("per_run.csv", per_run_table(folder, keys))):
        tmp = folder / f".{name}.tmp"
        table.to_csv(tmp, index=False)
        os.replace(tmp, folder / name)
    return folder / "results.csv"


def _local(runs: list[Run], folder: Path, workers: int) -> Iterable[tuple[str, str]]:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        futures = [pool.submit(execute_run, run, str(folder)) for run in runs]
        for future in as_completed(futures):
            yield future.result()


def _dask(runs: list[Run], folder: Path, scheduler: str) -> Iterable[tuple[str, str]]:
    from dask.distributed import Client
    from dask.distributed import as_completed as dask_completed

    with Client(scheduler) as client:
        futures = client.map(execute_run, runs, folder=str(folder), pure=False)
        for future in dask_completed(futures):
            yield future.result()


def prune(folder: Path, runs: list[Run]) -> list[Path]:
    """Delete stored run records that are not runs of the spec any more (stale keys); returns what was deleted."""
    current = {run.key for run in runs}
    stale = [path for path in sorted((folder / "runs").glob("*.json")) if path.stem not in current]
    for path in stale:
        path.unlink()
    return stale


def run_sweep(spec_path: Path, scheduler: str | None = None, workers: int | None = None, max_runs: int | None = None,
              progress: bool = True) -> dict[str, str]:
    """Execute the missing runs of a spec (at most ``max_runs``), then rewrite ``results.csv`` from its current runs.

    Returns ``{key: status}`` of the runs executed now.
    """
    folder = sweep_folder(spec_path)
    spec = load_spec(spec_path)
    runs = expand(spec)
    missing = [r for r in runs if not r.record_path(folder).exists()]
    if max_runs is not None:
        missing = missing[:max_runs]
    (folder / "runs").mkdir(parents=True, exist_ok=True)
    done: dict[str, str] = {}
    if missing:
        stream = (_dask(missing, folder, scheduler) if scheduler
                  else _local(missing, folder, workers or int(spec.get("workers", 1))))
        for key, status in tqdm(stream, total=len(missing), disable=not progress, desc=f"sweep {spec.get('name', '')}"):
            done[key] = status
    write_results(folder, {run.key for run in runs})
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lengthgen.book.sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", type=Path)
    parser.add_argument("--scheduler", help="address of a Dask scheduler, e.g. tcp://127.0.0.1:8786")
    parser.add_argument("--workers", type=int, help="local worker processes (default: the spec's 'workers')")
    parser.add_argument("--max-runs", type=int, help="execute at most this many missing runs, then stop")
    parser.add_argument("--list", action="store_true", help="list the runs and whether each is done, execute nothing")
    parser.add_argument("--prune", action="store_true", help="delete stored runs that the spec no longer lists, then continue")
    args = parser.parse_args(argv)
    try:
        runs = expand(load_spec(args.spec))
    except ParameterError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    folder = sweep_folder(args.spec)
    if args.prune:
        for path in prune(folder, runs):
            print(f"pruned stale run {path.name}")
    if args.list:
        for run in runs:
            state = "done" if run.record_path(folder).exists() else "missing"
            print(f"{run.key}  {state:8} {run.chapter} {run.overrides}")
        return 0
    done = run_sweep(args.spec, args.scheduler, args.workers, args.max_runs, progress=True)
    failed = {k: s for k, s in done.items() if s.startswith("error")}
    print(f"executed {len(done)} run(s); {len(failed)} stopped with an error")
    for key, status in failed.items():
        print(f"  {key}: {status}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
