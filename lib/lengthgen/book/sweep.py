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
its results record as ``runs/<key>.json`` next to the spec, written atomically by the client
(a worker returns the record; it never writes into the sweep's folder, which a cluster node may
not share), and seals it in ``manifest.json`` with a digest of its whole content: every reader
refuses a record the manifest does not seal (an edited value, a record copied in), naming the
file. The manifest catches an edit that forgets it; an edit of both a record and its manifest
entry shows only in the committed history. ``key`` hashes what produces the run's measurements:
the chapter's stable name, full parameters, the chapter's measurement fingerprint (not its
claims, which readers apply afresh) and its notebook hash (:func:`lengthgen.book.rerun.run_key`).
Rerunning an interrupted sweep executes only the runs without a sealed record and loses nothing;
after a change to the measurement code or the notebook a chapter runs, every affected run has a
new key and runs again. ``results.csv`` aggregates the records
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
import contextlib
import ctypes
import fcntl
import hashlib
import itertools
import json
import multiprocessing
import os
import signal
import socket
import struct
import sys
import tempfile
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from . import fingerprint
from .judging import rejudge
from .parameters import ParameterError, parse_yaml
from .paths import notebook_path
from .records import RecordFileError, load_record, plain, write_json_atomically
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


SPEC_KEYS = ("name", "workers", "chapters")
CHAPTER_KEYS = ("fixed", "grid", "points")


def load_spec(path: Path) -> dict:
    """A sweep spec (YAML, with the strict number rules of command-line values), its shape checked
    (:func:`check_spec`)."""
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ParameterError(f"{path}: cannot read the spec ({err.strerror})") from err
    spec = parse_yaml(text, where=str(path))
    check_spec(spec, str(path))
    return spec


def check_spec(spec: Any, where: str) -> None:
    """Refuse, naming the key and what it must be, a spec of any other shape: unknown keys at the top or in a chapter,
    an unknown chapter, ``workers`` that is not a positive integer, a grid axis without values, points that are not
    parameter mappings. (Parameter names and values are the chapter's to check, in :func:`expand`.)"""
    from .parameters import parameters_of

    if not isinstance(spec, dict) or not isinstance(spec.get("chapters"), dict) or not spec["chapters"]:
        raise ParameterError(f"{where}: a sweep spec is a mapping with a non-empty 'chapters' mapping")
    unknown = sorted(set(map(str, spec)) - set(SPEC_KEYS))
    if unknown:
        raise ParameterError(f"{where}: unknown key(s) {unknown}; a spec has {list(SPEC_KEYS)}")
    workers = spec.get("workers", 1)
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ParameterError(f"{where}: 'workers' must be an integer >= 1, got {workers!r}")
    if not isinstance(spec.get("name", ""), str):
        raise ParameterError(f"{where}: 'name' must be a string, got {spec['name']!r}")
    for chapter, entry in spec["chapters"].items():
        try:
            parameters_of(str(chapter))
        except (ValueError, ImportError) as err:
            raise ParameterError(f"{where}: {chapter!r} is not a chapter of the book ({err})") from err
        entry = {} if entry is None else entry
        if not isinstance(entry, dict):
            raise ParameterError(f"{where}: chapter {chapter!r} must map to {list(CHAPTER_KEYS)}, got {entry!r}")
        unknown = sorted(set(map(str, entry)) - set(CHAPTER_KEYS))
        if unknown:
            raise ParameterError(f"{where}: chapter {chapter!r} has unknown key(s) {unknown}; "
                                 f"a chapter has {list(CHAPTER_KEYS)}")
        for key in ("fixed", "grid"):
            if not isinstance(entry.get(key) or {}, dict):
                raise ParameterError(f"{where}: {chapter!r}: '{key}' must be a mapping of parameter names, "
                                     f"got {entry[key]!r}")
        for name, values in (entry.get("grid") or {}).items():
            if not isinstance(values, list) or not values:
                raise ParameterError(f"{where}: {chapter!r}: grid axis {name!r} must be a non-empty list of values, "
                                     f"got {values!r}")
        points = entry.get("points") or []
        if not isinstance(points, list) or not all(isinstance(point, dict) and point for point in points):
            raise ParameterError(f"{where}: {chapter!r}: 'points' must be a list of parameter mappings")


def expand(spec: dict) -> list[Run]:
    """Every run of the spec, validated before anything executes (the code and notebook fingerprints computed once)."""
    runs = []
    for chapter, entry in spec["chapters"].items():
        entry = entry or {}
        fixed, grid = entry.get("fixed", {}) or {}, entry.get("grid", {}) or {}
        points = entry.get("points", []) or []
        if not isinstance(points, list) or not all(isinstance(point, dict) for point in points):
            raise ParameterError(f"{chapter}: 'points' must be a list of parameter mappings")
        for name, values in grid.items():
            if not isinstance(values, list) or not values:
                raise ParameterError(f"{chapter}: grid axis {name!r} must be a non-empty list of values, got {values!r}")
        names = sorted(grid)
        grid_points = ([dict(zip(names, values, strict=True)) for values in itertools.product(*(grid[n] for n in names))]
                       if grid or not points else [])
        prints: list[str] = []  # the chapter's fingerprints, computed once for all its runs
        for point in grid_points + points:
            overrides = {**fixed, **point}
            parameters = checked_parameters(chapter, overrides)
            if not prints:
                prints += [fingerprint.measurement_fingerprint(chapter), fingerprint.notebook_hash(notebook_path(chapter))]
            runs.append(Run(chapter, overrides, run_key(chapter, parameters, *prints)))
    keys = [r.key for r in runs]
    if len(set(keys)) != len(keys):
        raise ParameterError("the spec lists the same run twice")
    return runs


def execute_run(run: Run) -> tuple[str, str, dict | None]:
    """Execute one run with one thread; returns ``(key, status, record)`` for the client to store.

    Runs in a worker process (local pool or Dask worker, possibly one of several threads, on a
    machine that need not share the client's folders): the record travels back with the result
    and only the client writes it (:func:`store`). The run's own temporary folder reaches the
    chapter as an argument and is removed afterwards. A record comes back whenever the chapter
    wrote one, also when its claims failed (status ``"claims failed"``). The single-thread
    settings are the same for every run, so setting them here is safe under threads.
    """
    os.environ.update(SINGLE_THREAD_ENV)
    with tempfile.TemporaryDirectory(prefix=f"sweep-{run.key}-") as tmp:
        status = "ok"
        try:
            record_file = execute(run.chapter, run.overrides, Path(tmp))
        except Exception as err:  # noqa: BLE001 - the chapter's error is reported, the sweep goes on
            record_file = Path(tmp) / f"{run.chapter}.json"
            status = "claims failed" if record_file.exists() else f"error: {getattr(err, 'ename', type(err).__name__)}"
        if not record_file.exists():
            return run.key, status, None
        record = load_record(record_file)
    record.update(key=run.key, overrides=plain(run.overrides), status=status)
    return run.key, status, record


# -- the manifest: what the sweep wrote, so that an edited, added or lost record is caught on every read ------------

MANIFEST = "manifest.json"


class RecordError(RuntimeError):
    """A stored run record that is not what its sweep wrote (edited, foreign, unreadable)."""


def record_digest(record: dict) -> str:
    """SHA-256 of a run record's whole content as canonical JSON: any edited value, parameter or field changes it."""
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def read_manifest(folder: Path) -> dict[str, str]:
    """The sweep's manifest: each stored run's key and the digest of the record the sweep wrote for it."""
    path = Path(folder) / MANIFEST
    if not path.exists():
        return {}
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise RecordError(f"{path} is not valid JSON ({err})") from err
    if not isinstance(manifest, dict):
        raise RecordError(f"{path} is not a manifest (a JSON object of run keys and digests)")
    return manifest


@contextlib.contextmanager
def manifest_lock(folder: Path) -> Iterator[None]:
    """Hold the sweep folder's manifest lock: two clients storing into one folder never lose each other's seals."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    with open(Path(folder) / ".manifest.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def update_manifest(folder: Path, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
    """Read, change and write the manifest under its lock."""
    with manifest_lock(folder):
        write_json_atomically(Path(folder) / MANIFEST, dict(sorted(change(read_manifest(folder)).items())))


def store(folder: Path, key: str, record: dict) -> Path:
    """Write a run's record under the sweep's folder and seal it in the manifest (both atomically; the client only)."""
    path = Path(folder) / "runs" / f"{key}.json"
    write_json_atomically(path, record)
    digest = record_digest(load_record(path))
    update_manifest(folder, lambda manifest: {**manifest, key: digest})
    return path


def sealed(folder: Path, key: str, manifest: dict[str, str] | None = None) -> bool:
    """Whether the run ``key`` has a stored record that is the one the sweep wrote."""
    path = Path(folder) / "runs" / f"{key}.json"
    manifest = read_manifest(folder) if manifest is None else manifest
    if key not in manifest or not path.exists():
        return False
    try:
        return record_digest(load_record(path)) == manifest[key]
    except RecordFileError:
        return False


def checked_record(path: Path, manifest: dict[str, str]) -> dict:
    """A stored run record, refused (:class:`RecordError`, naming the file) unless the sweep's manifest seals it."""
    try:
        record = load_record(path)
    except RecordFileError as err:
        raise RecordError(str(err)) from err
    if path.stem not in manifest:
        raise RecordError(f"{path} is not in its sweep's {MANIFEST}: a record the sweep did not write (copied in, or "
                          f"left by an interrupted run); delete it or rerun the sweep")
    if record_digest(record) != manifest[path.stem] or record.get("key") != path.stem:
        raise RecordError(f"{path} differs from the record its sweep wrote (its digest in {MANIFEST} does not match): "
                          f"edited by hand? Restore it from git, or rerun the run")
    return record


def run_columns(record: dict) -> dict:
    """The columns that identify a run in the sweep's tables: key, chapter, status, fingerprints, overrides."""
    row = dict(key=record["key"], chapter=record["chapter"], status=record["status"],
               code_fingerprint=record["code_fingerprint"][:16], notebook_hash=record["notebook_hash"][:16],
               overrides=json.dumps(record["overrides"], sort_keys=True))
    row.update({f"param_{k}": json.dumps(v) if isinstance(v, list) else v for k, v in record["overrides"].items()})
    return row


def stored_records(folder: Path, keys: set[str] | None, complete: bool = True) -> Iterable[dict]:
    """The stored run records of a sweep folder whose key is in ``keys`` (default: all), in key order, each checked
    against the sweep's manifest (:func:`checked_record`) and judged against the current claims
    (:func:`lengthgen.book.judging.rejudge`), never by its stored verdicts.

    Every record file of the folder is vetted, read or not: one the manifest does not seal stops the reader, naming
    it. With ``complete`` (the default), so does a key of ``keys`` without a record, naming the run's settings."""
    manifest = read_manifest(folder)
    paths = sorted((folder / "runs").glob("*.json"))
    for path in paths:
        if keys is not None and path.stem not in keys:
            checked_record(path, manifest)
    if keys is not None and complete and (absent := sorted(keys - {path.stem for path in paths})):
        raise RecordError(missing_message(folder, absent))
    for path in paths:
        if keys is None or path.stem in keys:
            yield rejudge(checked_record(path, manifest))


def missing_message(folder: Path, keys: list[str]) -> str:
    """Which runs a sweep folder lacks, by key and settings, and how to make them."""
    try:
        settings = {run.key: f"{run.chapter} {json.dumps(run.overrides, sort_keys=True)}"
                    for run in expand(load_spec(folder / "spec.yaml"))}
    except (ParameterError, OSError):
        settings = {}
    named = "; ".join(f"{key} ({settings.get(key, 'settings unknown')})" for key in keys[:5])
    more = f" and {len(keys) - 5} more" if len(keys) > 5 else ""
    return (f"{folder} lacks the record of {len(keys)} run(s) its spec lists: {named}{more}. Run them with "
            f"`make sweep SPEC={folder}/spec.yaml` (or restore them from git)")


def ordered(table: pd.DataFrame, last: list[str], sort: list[str]) -> pd.DataFrame:
    """Identifying columns first, then the parameters, then ``last``; sorted by ``sort``."""
    if not len(table):
        return table
    params = sorted(c for c in table.columns if c.startswith("param_"))
    first = ["key", "chapter", "status", "code_fingerprint", "notebook_hash", "overrides", *params]
    return table[first + last].sort_values(sort).reset_index(drop=True)


def results_table(folder: Path, keys: set[str] | None = None, complete: bool = True) -> pd.DataFrame:
    """One row per (run, check) of the stored records whose key is in ``keys`` (default: all), sorted; with
    ``complete``, a key without a record is an error (:func:`stored_records`).

    Wall times and creation times are left out, so the rows of a run are reproducible.
    """
    return checks_table(stored_records(folder, keys, complete))


def checks_table(records: Iterable[dict]) -> pd.DataFrame:
    """One row per (run, check) of ``records``, sorted by chapter, key and claim."""
    rows = [{**run_columns(record), **check} for record in records for check in record["checks"]]
    return ordered(pd.DataFrame(rows), ["name", "claim", "role", "value", "comparison", "threshold", "passed"],
                   ["chapter", "key", "name"])


def per_run_table(folder: Path, keys: set[str] | None = None, complete: bool = True) -> pd.DataFrame:
    """One row per (run, per-run claim, offset, seed): the value and verdict every seed of every run got."""
    rows = []
    for record in stored_records(folder, keys, complete):
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
    tables = (("results.csv", results_table(folder, keys, complete=False)),
              ("per_run.csv", per_run_table(folder, keys, complete=False)))
    for name, table in tables:
        handle, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")  # unique: sweeps may overlap
        os.close(handle)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the tables are for everyone who reads the sweep
        try:
            table.to_csv(tmp, index=False)
            os.replace(tmp, folder / name)
        finally:
            Path(tmp).unlink(missing_ok=True)
    return folder / "results.csv"


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _worker_start() -> None:
    """In each local worker process: stop cleanly on SIGTERM (the chapter's kernel shut down, its temporary folder
    removed), and receive SIGTERM when the sweep's process dies, even by SIGKILL (Linux)."""
    signal.signal(signal.SIGTERM, _stop)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the worker stops after its current run instead
        pass


PR_SET_PDEATHSIG = 1  # prctl option: the signal a process gets when its parent dies


def _failed(run: Run, err: BaseException) -> tuple[str, str, None]:
    """A run whose worker died or could not return (reported; nothing of it is stored, and a resumed sweep reruns it)."""
    return run.key, f"error: worker lost ({type(err).__name__}: {err})".splitlines()[0][:300], None


def _local(runs: list[Run], workers: int) -> Iterable[tuple[str, str, dict | None]]:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_start) as pool:
        futures = {pool.submit(execute_run, run): run for run in runs}
        try:
            for future in as_completed(futures):
                try:
                    yield future.result()
                except Exception as err:  # noqa: BLE001 - a worker killed mid-run breaks the pool: report each run
                    yield _failed(futures[future], err)
        except BaseException:  # SIGTERM, Ctrl-C, or the caller stopped: no worker (and so no kernel) outlives the sweep
            for process in list(getattr(pool, "_processes", {}).values()):
                process.terminate()
            pool.shutdown(wait=True, cancel_futures=True)
            raise


DASK_SCHEMES = ("tcp", "tls")


def check_scheduler(address: str, timeout: float = 5.0) -> None:
    """Refuse, with one clear line, an address that is not ``tcp://HOST:PORT`` or ``tls://HOST:PORT``, or (for tcp) a
    server that does not greet like a Dask scheduler: one that sends nothing, or begins with a length no Dask handshake
    has. (A Dask comm writes its handshake first; reading another server's bytes as a frame count once made the client
    ask for exabytes.)"""
    parsed = urllib.parse.urlsplit(address)
    if parsed.scheme not in DASK_SCHEMES or not parsed.hostname or parsed.port is None or parsed.path not in ("", "/"):
        raise ParameterError(f"--scheduler {address!r} is not a Dask scheduler address: must be tcp://HOST:PORT or "
                             f"tls://HOST:PORT (for TLS add --tls-ca-file, --tls-cert and --tls-key)")
    if parsed.scheme == "tls":
        return  # the TLS handshake itself refuses a server that is not one
    try:
        with socket.create_connection((parsed.hostname, parsed.port), timeout=timeout) as conn:
            head = b""
            while len(head) < 8:
                chunk = conn.recv(8 - len(head))
                if not chunk:
                    break
                head += chunk
    except TimeoutError as err:
        raise ParameterError(f"--scheduler {address}: the server sent nothing in {timeout:g} s; "
                             "it is not a Dask scheduler") from err
    except OSError as err:
        raise ParameterError(f"--scheduler {address}: cannot connect ({err.strerror or err})") from err
    if len(head) < 8 or not 0 < struct.unpack("<Q", head)[0] < 2**20:  # a handshake is a few hundred bytes
        raise ParameterError(f"--scheduler {address}: the server does not speak Dask's protocol "
                             f"(it began with {head[:8]!r})")


def _dask(runs: list[Run], scheduler: str, security: object = None) -> Iterable[tuple[str, str, dict | None]]:
    from dask.distributed import Client
    from dask.distributed import as_completed as dask_completed

    check_scheduler(scheduler)
    with Client(scheduler, security=security, timeout="30s") as client:
        futures = client.map(execute_run, runs, pure=False)
        by_key = {future.key: run for future, run in zip(futures, runs, strict=True)}
        for future in dask_completed(futures):
            try:
                yield future.result()
            except Exception as err:  # noqa: BLE001 - a worker lost too often (KilledWorker): report the run
                yield _failed(by_key[future.key], err)


def prune(folder: Path, runs: list[Run]) -> list[Path]:
    """Delete stored run records that are not runs of the spec any more (stale keys); returns what was deleted."""
    current = {run.key for run in runs}
    stale = [path for path in sorted((folder / "runs").glob("*.json")) if path.stem not in current]
    for path in stale:
        path.unlink()
    if set(read_manifest(folder)) - current:
        update_manifest(folder, lambda manifest: {k: v for k, v in manifest.items() if k in current})
    return stale


def rekey(spec_path: Path, verified_by: str) -> dict[str, str]:
    """Carry every stored run over to the key its settings have under the current code, and seal it; returns
    ``{old key: new key}``.

    Only for a change of code that measures the same numbers, verified first on one machine by rerunning runs before
    and after the change and comparing every value exactly (the README's maintainer section). Each moved record keeps
    the key it had and what verified the move in ``rekeyed_from``; a parameter added to the chapter since the run was
    made (whose default reproduces the old code path) enters its parameters at the value the verified code runs, and
    ``rekeyed_from`` lists it. A record already under its current key is sealed as it is. Records of settings the spec
    no longer lists are left alone (``--prune`` removes them).
    """
    if not verified_by.strip():
        raise ParameterError("--rekey needs what verified the change (a commit), e.g. --rekey 1a2b3c4")
    folder = sweep_folder(spec_path)
    runs = {(run.chapter, json.dumps(plain(run.overrides), sort_keys=True)): run for run in expand(load_spec(spec_path))}
    manifest = read_manifest(folder)
    paths = sorted((folder / "runs").glob("*.json"))
    # a sealed sweep has every record vetted; only a sweep from before manifests (none at all) is taken as it is
    records = {path: checked_record(path, manifest) if manifest else load_record(path) for path in paths}
    targets: dict[str, Path] = {}
    for path, record in records.items():
        run = runs.get((record["chapter"], json.dumps(record["overrides"], sort_keys=True)))
        if run is not None and targets.setdefault(run.key, path) != path:
            raise ParameterError(f"{targets[run.key].name} and {path.name} are records of the same settings; "
                                 f"delete the one that is not current (make sweep ... ARGS=--prune), then re-key")
    moved = {}
    for path, record in records.items():
        run = runs.get((record["chapter"], json.dumps(record["overrides"], sort_keys=True)))
        if run is None or (run.key == path.stem and path.stem in manifest):
            continue
        if run.key != path.stem:
            full = plain(checked_parameters(run.chapter, run.overrides).as_dict())
            added = {name: value for name, value in full.items() if name not in record["parameters"]}
            move = dict(key=path.stem, verified_by=verified_by, **({"added_parameters": added} if added else {}))
            record["rekeyed_from"] = [*record.get("rekeyed_from", []), move]
            record["parameters"] = {**record["parameters"], **added}  # a parameter added since: at the verified value
            record["key"] = run.key
            moved[path.stem] = run.key
        store(folder, run.key, record)
        if run.key != path.stem:
            path.unlink()
    update_manifest(folder, lambda manifest: {k: v for k, v in manifest.items()
                                              if (folder / "runs" / f"{k}.json").exists()})
    write_results(folder, {run.key for run in runs.values()})
    return moved


def run_sweep(spec_path: Path, scheduler: str | None = None, workers: int | None = None, max_runs: int | None = None,
              progress: bool = True, security: object = None) -> dict[str, str]:
    """Execute the missing runs of a spec (at most ``max_runs``), then rewrite ``results.csv`` from its current runs.

    Returns ``{key: status}`` of the runs executed now.
    """
    folder = sweep_folder(spec_path)
    spec = load_spec(spec_path)
    runs = expand(spec)
    manifest = read_manifest(folder)
    missing = [r for r in runs if not sealed(folder, r.key, manifest)]
    if max_runs is not None:
        missing = missing[:max_runs]
    (folder / "runs").mkdir(parents=True, exist_ok=True)
    done: dict[str, str] = {}
    if missing:
        stream = (_dask(missing, scheduler, security) if scheduler
                  else _local(missing, workers or int(spec.get("workers", 1))))
        main_thread = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _stop) if main_thread else None
        try:
            for key, status, record in tqdm(stream, total=len(missing), disable=not progress,
                                            desc=f"sweep {spec.get('name', '')}"):
                if record is not None:
                    store(folder, key, record)
                done[key] = status
        finally:
            if main_thread:
                signal.signal(signal.SIGTERM, previous)
    write_results(folder, {run.key for run in runs})
    return done


def tls_security(scheduler: str | None, ca_file: Path | None, cert: Path | None, key: Path | None) -> object:
    """Dask's security settings for a ``tls://`` scheduler (all three files, each readable), else None."""
    given = [f for f in (ca_file, cert, key) if f is not None]
    if not (scheduler or "").startswith("tls://"):
        if given:
            raise ParameterError("--tls-ca-file, --tls-cert and --tls-key apply to a tls:// scheduler only")
        return None
    if len(given) != 3:
        raise ParameterError("a tls:// scheduler needs --tls-ca-file, --tls-cert and --tls-key")
    for name, path in (("--tls-ca-file", ca_file), ("--tls-cert", cert), ("--tls-key", key)):
        if not Path(path).is_file():
            raise ParameterError(f"{name} {path}: no such file")
    from distributed.security import Security

    return Security(tls_ca_file=str(ca_file), tls_client_cert=str(cert), tls_client_key=str(key),
                    require_encryption=True)


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lengthgen.book.sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", type=Path)
    parser.add_argument("--scheduler", help="address of a Dask scheduler, tcp://HOST:PORT or tls://HOST:PORT. Dask "
                        "ships work to its workers as pickles: whoever can reach the scheduler runs code as you, so "
                        "keep it on a trusted network or use tls:// with the three options below")
    parser.add_argument("--tls-ca-file", type=Path, help="TLS: the certificate authority that signed the cluster's "
                        "certificates (with tls:// only)")
    parser.add_argument("--tls-cert", type=Path, help="TLS: this client's certificate")
    parser.add_argument("--tls-key", type=Path, help="TLS: this client's private key")
    parser.add_argument("--workers", type=positive_int, help="local worker processes (default: the spec's 'workers')")
    parser.add_argument("--max-runs", type=positive_int, help="execute at most this many missing runs, then stop")
    parser.add_argument("--list", action="store_true", help="list the runs and whether each is done, execute nothing")
    parser.add_argument("--prune", action="store_true", help="delete stored runs that the spec no longer lists, then continue")
    parser.add_argument("--rekey", metavar="COMMIT", help="carry stored runs over to their current keys, marked as "
                        "verified by COMMIT (only after checking that the code change moved no number), then stop")
    args = parser.parse_args(argv)
    try:
        runs = expand(load_spec(args.spec))
    except ParameterError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    folder = sweep_folder(args.spec)
    if args.rekey is not None:
        try:
            moved = rekey(args.spec, args.rekey)
        except ParameterError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(f"re-keyed {len(moved)} run(s) of {folder}; every stored run of the spec is sealed in {MANIFEST}")
        return 0
    if args.prune:
        for path in prune(folder, runs):
            print(f"pruned stale run {path.name}")
    if args.list:
        for run in runs:
            state = "done" if sealed(folder, run.key) else "missing"
            print(f"{run.key}  {state:8} {run.chapter} {run.overrides}")
        return 0
    try:
        security = tls_security(args.scheduler, args.tls_ca_file, args.tls_cert, args.tls_key)
        done = run_sweep(args.spec, args.scheduler, args.workers, args.max_runs, progress=True, security=security)
    except (ParameterError, RecordError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    failed = {k: s for k, s in done.items() if s.startswith("error")}
    print(f"executed {len(done)} run(s); {len(failed)} stopped with an error")
    for key, status in failed.items():
        print(f"  {key}: {status}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
