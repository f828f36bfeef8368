"""Runs that share nothing by accident: a lock per rerun folder, a relative --out resolved once, a sweep that stops its
workers and kernels on SIGTERM, and a Dask cluster whose scheduler and workers live in other folders (one of them
killed mid-run) while every record still lands, sealed, in the client's sweep folder. Loopback addresses only."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from lengthgen.book import rerun
from lengthgen.book.paths import REPO_ROOT
from lengthgen.book.sweep import expand, load_spec, read_manifest, run_sweep, sealed

TINY = "{seeds: 1, steps: 20, length_factor: 2, eval_batch: 8, workers: 1, device: cpu}"
SLOW = "{seeds: 1, steps: 100000, length_factor: 2, eval_batch: 8, workers: 1, device: cpu}"  # runs until stopped


def write_spec(folder: Path, offsets: list[int], fixed: str = TINY, workers: int = 1) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "spec.yaml"
    grid = [[k] for k in offsets]
    spec.write_text(f"name: t\nworkers: {workers}\nchapters:\n  01_equivariance:\n    fixed: {fixed}\n"
                    f"    grid: {{offsets: {grid}}}\n")
    return spec


def kernels_under(process: psutil.Process) -> list[psutil.Process]:
    try:
        return [p for p in process.children(recursive=True) if "ipykernel" in " ".join(p.cmdline())]
    except psutil.Error:
        return []


def wait_for(condition, timeout: float, step: float = 0.2) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(step)
    return False


def test_a_second_identical_rerun_is_refused_while_the_first_holds_its_folder(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    with rerun.run_lock(out) as held:
        assert held
        code = rerun.main(["book/01_equivariance.ipynb", "-y", TINY, "--out", str(out)])
    assert code == 3 and "in use by another run" in capsys.readouterr().err
    assert not (out / "01_equivariance.json").exists()


def test_a_relative_out_puts_notebook_and_record_together(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert rerun.main(["book/01_equivariance.ipynb", "-y", TINY, "-p", "offsets", "[3]", "--out", "rel"]) in (0, 1)
    assert {p.name for p in (tmp_path / "rel").iterdir()} >= {"01_equivariance.ipynb", "01_equivariance.json"}
    assert not list((tmp_path / "rel").glob(".*.partial.ipynb"))


def test_sigterm_stops_a_sweeps_workers_and_kernels_and_leaves_no_temporary_files(tmp_path):
    spec = write_spec(tmp_path / "sweep", [3, 5], fixed=SLOW, workers=2)
    temp, runtime = tmp_path / "tmp", tmp_path / "runtime"
    temp.mkdir()
    env = dict(os.environ, TMPDIR=str(temp), JUPYTER_RUNTIME_DIR=str(runtime))
    process = subprocess.Popen([sys.executable, "-m", "lengthgen.book.sweep", str(spec)], cwd=REPO_ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sweep = psutil.Process(process.pid)
    try:
        assert wait_for(lambda: len(kernels_under(sweep)) == 2, 120), "the sweep never started its kernels"
        family = sweep.children(recursive=True)
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) != 0
        _, alive = psutil.wait_procs(family, timeout=30)
        assert not alive, f"still running after SIGTERM: {[p.cmdline()[:3] for p in alive]}"
    finally:
        for child in sweep.children(recursive=True) if sweep.is_running() else []:
            child.kill()
        process.kill()
    assert not list(temp.glob("sweep-*")), "a run's temporary folder outlived the sweep"
    assert not list(runtime.glob("kernel-*.json")), "a kernel's connection file outlived the sweep"
    assert not list((tmp_path / "sweep" / "runs").glob("*.json"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dask_workers_in_other_folders_return_every_record_to_the_client_even_when_one_is_killed(tmp_path):
    """A scheduler and two workers, each started in a folder of its own (as on a cluster); one worker is killed while
    it runs a chapter. Every run's record lands in the client's sweep folder, sealed; nothing lands beside the workers;
    the killed run is retried on the other worker or reported, never half-written."""
    folders = {name: tmp_path / name for name in ("scheduler", "worker_a", "worker_b", "client")}
    for folder in folders.values():
        folder.mkdir()
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    dask = str(Path(sys.executable).with_name("dask"))
    started = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                                cwd=folders["scheduler"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        for name in ("worker_a", "worker_b"):
            started.append(subprocess.Popen(
                [dask, "worker", address, "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                 "--local-directory", str(folders[name]), "--name", name],
                cwd=folders[name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        assert wait_for(lambda: _workers(address) == 2, 90), "the workers never joined"
        spec = write_spec(folders["client"], [3, 5], fixed="{seeds: 1, steps: 400, length_factor: 2, eval_batch: 8, "
                                                          "workers: 1, device: cpu}")
        victim = psutil.Process(started[1].pid)
        killed = threading.Event()

        def kill_mid_run() -> None:
            if wait_for(lambda: bool(kernels_under(victim)), 120):
                for child in victim.children(recursive=True):
                    child.kill()
                victim.kill()
                killed.set()

        threading.Thread(target=kill_mid_run, daemon=True).start()
        done = run_sweep(spec, scheduler=address, progress=False)
        assert killed.is_set(), "the worker was never caught mid-run"
    finally:
        for process in started:
            process.kill()
    folder = folders["client"]
    keys = {run.key for run in expand(load_spec(spec))}
    assert set(done) == keys
    manifest = read_manifest(folder)
    stored = {p.stem for p in (folder / "runs").glob("*.json")}
    assert stored == set(manifest) and stored <= keys, "a record that is not sealed, or not of the spec"
    for key in keys:  # the killed worker's run was retried on the other one: nothing lost, nothing half-written
        assert sealed(folder, key) and done[key] in ("ok", "claims failed"), f"{key}: {done[key]}"
    for name in ("scheduler", "worker_a", "worker_b"):
        assert not (folders[name] / "runs").exists() and not list(folders[name].rglob("01_equivariance*")), name
    for key in stored:
        assert json.loads((folder / "runs" / f"{key}.json").read_text())["key"] == key


def _workers(address: str) -> int:
    from dask.distributed import Client

    try:
        with Client(address, timeout="5s") as client:
            return len(client.scheduler_info()["workers"])
    except OSError:
        return 0


@pytest.mark.parametrize("address", ["http://127.0.0.1:8786", "tcp://127.0.0.1", "127.0.0.1:8786"])
def test_a_scheduler_address_of_the_wrong_form_is_refused_before_connecting(address, tmp_path, capsys):
    from lengthgen.book import sweep

    spec = write_spec(tmp_path / "s", [3])
    assert sweep.main([str(spec), "--scheduler", address]) == 2
    assert "is not a Dask scheduler address" in capsys.readouterr().err


def test_a_server_that_is_not_a_scheduler_is_refused(tmp_path, capsys):
    from lengthgen.book import sweep

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def answer() -> None:
        conn, _ = server.accept()
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        conn.close()

    threading.Thread(target=answer, daemon=True).start()
    spec = write_spec(tmp_path / "s", [3])
    assert sweep.main([str(spec), "--scheduler", f"tcp://127.0.0.1:{server.getsockname()[1]}"]) == 2
    assert "does not speak Dask's protocol" in capsys.readouterr().err
    server.close()


def test_tls_needs_its_three_files(tmp_path, capsys):
    from lengthgen.book import sweep

    spec = write_spec(tmp_path / "s", [3])
    assert sweep.main([str(spec), "--scheduler", "tls://127.0.0.1:8786", "--tls-cert", str(spec)]) == 2
    assert "needs --tls-ca-file, --tls-cert and --tls-key" in capsys.readouterr().err
    assert sweep.main([str(spec), "--scheduler", "tcp://127.0.0.1:8786", "--tls-cert", str(spec)]) == 2
    assert "apply to a tls:// scheduler only" in capsys.readouterr().err
