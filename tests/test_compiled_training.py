"""The compiled trainer (``backend="compiled"``): the same science as the eager one, and it never crashes.

Compilation changes the order of floating-point operations (fused kernels, attention written out), so a
compiled run is not bitwise the eager run of its seed: its first losses agree within float tolerance, and
its trained networks agree within a margin registered here before it was first measured.
"""

from __future__ import annotations

import logging
import math
import os
import statistics
from pathlib import Path

import pytest
import torch
from scipy import stats

from lengthgen.book.parameters import ParameterError
from lengthgen.chapters.transfer import Parameters
from lengthgen.model import training
from lengthgen.model.evaluation import length_sweep
from lengthgen.model.training import Stack, train_together
from lengthgen.model.transformer import Attention, NetworkRunConfig, TransformerConfig

TINY = NetworkRunConfig(model=TransformerConfig(vocab=8, dim=16, heads=2, max_length=48), train_length=12, offset=2,
                        steps=20, batch=8)

# Registered before the first paired measurement: ten seeds of chapter 6's network on shift (k = 5, T = 32, 400
# steps), each trained eagerly and compiled. Equivalence (two one-sided tests at 5 %): the 90 % t-interval of the
# mean paired difference in in-range accuracy lies within +-EQUIVALENCE_MARGIN. Two points of accuracy: far less
# than what separates a network that learned (>= 0.95) from one that did not, so a trainer that changed what the
# networks learn would fail it, while rounding alone should not move learned networks that much.
EQUIVALENCE_CELL = NetworkRunConfig(model=TransformerConfig(vocab=64, dim=64, layers=2, heads=4), task="shift", offset=5,
                                    train_length=32, batch=16, steps=400)
EQUIVALENCE_SEEDS = range(10)
EQUIVALENCE_MARGIN = 0.02
LEARNED = 0.95  # in-range accuracy of a network that learned shift (chapter 6's floor)


@pytest.fixture(autouse=True)
def compiling_allowed(monkeypatch):
    """Every test starts in a process where no compilation has failed (a fallback test sets the flag)."""
    monkeypatch.setattr(training.CompiledLoss, "failed", False)


def test_a_compiled_stack_trains_the_eager_runs_within_float_tolerance():
    eager = train_together([TINY.with_(seed=s) for s in (0, 1)])
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = train_together([TINY.with_(seed=s, backend="compiled") for s in (0, 1)])
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # it compiled: no quiet fallback to eager
    for e, c in zip(eager, compiled, strict=True):
        assert c.backend == "compiled" and e.backend == "eager"
        for name, value in e.initial_state.items():
            assert torch.equal(value, c.initial_state[name]), name  # the same seed, the same initialization
        assert c.losses == pytest.approx(e.losses, rel=1e-4, abs=1e-5)
        assert c.losses != e.losses  # the compiled code ran: its rounding differs from the eager step's
        assert c.losses[-1] < c.losses[0]  # and it trains


def test_compiled_attention_is_the_fused_attention_written_out(monkeypatch):
    """The written-out attention that compilation uses is the fused kernel's function: checked without compiling (large
    queries and keys, so that a wrong scale, mask or softmax axis shows) and through the compiler."""
    attention = Attention(TransformerConfig(vocab=8, dim=16, heads=2))
    with torch.no_grad():
        attention.qkv.weight.normal_(0, 1.0, generator=torch.Generator().manual_seed(1))
    x = torch.randn(3, 20, 16, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    attention = attention.double()
    fused = attention(x, None, None)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert torch.allclose(attention(x, None, None), fused, rtol=1e-10, atol=1e-12)
    monkeypatch.undo()
    run = train_together([TINY])[0]
    tokens = torch.randint(0, 8, (3, 20), generator=torch.Generator().manual_seed(0))
    compiled = torch.compile(run.model, dynamic=False, fullgraph=True)(tokens)
    assert torch.allclose(run.model(tokens), compiled, rtol=1e-4, atol=1e-5)


def test_a_compile_failure_falls_back_to_eager_with_one_line(monkeypatch, caplog, tmp_path):
    def broken(*args, **kwargs):
        raise RuntimeError("no C++ compiler found\nsecond line of detail")

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cold"))
    monkeypatch.setattr(torch, "compile", broken)
    with caplog.at_level(logging.WARNING, logger="lengthgen"):
        (run,) = train_together([TINY.with_(backend="compiled")])
    lines = [r.getMessage() for r in caplog.records if r.name == "lengthgen"]
    assert len(lines) == 1 and "eager" in lines[0] and "no C++ compiler found" in lines[0] and "\n" not in lines[0]
    assert run.backend == "eager"
    assert run.losses == train_together([TINY])[0].losses  # exactly the eager run
    with caplog.at_level(logging.WARNING, logger="lengthgen"):
        (again,) = train_together([TINY.with_(backend="compiled", seed=1)])
    assert again.backend == "eager" and len([r for r in caplog.records if r.name == "lengthgen"]) == 1  # said once


def test_a_failure_of_the_first_compiled_backward_redoes_the_step_eagerly(monkeypatch, caplog, tmp_path):
    class Broken(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):  # noqa: ANN001, ANN205
            return x.clone()

        @staticmethod
        def backward(ctx, grad):  # noqa: ANN001, ANN205
            raise RuntimeError("backward compilation failed")

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cold"))
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: lambda *args: Broken.apply(fn(*args)))
    with caplog.at_level(logging.WARNING, logger="lengthgen"):
        (run,) = train_together([TINY.with_(backend="compiled")])
    assert run.backend == "eager" and len([r for r in caplog.records if r.name == "lengthgen"]) == 1
    assert run.losses == train_together([TINY])[0].losses


def test_a_corrupt_compile_cache_is_rebuilt_not_trusted(monkeypatch, tmp_path, caplog):
    """A failure on the book's own filled cache retries once in a fresh folder beside it; nothing is deleted."""
    cache = tmp_path / ".cache" / "compiled"
    (cache / "fxgraph").mkdir(parents=True)
    (cache / "fxgraph" / "entry").write_bytes(b"\x00 not a compiled graph")
    monkeypatch.setattr(training, "COMPILE_CACHE", cache)
    monkeypatch.setattr(training, "OWN_CACHE", True)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    calls = []

    def fake_compile(fn, **kwargs):  # fails on the corrupt folder, as a broken cache would
        calls.append(os.environ["TORCHINDUCTOR_CACHE_DIR"])
        if calls[-1] == str(cache):
            raise RuntimeError("cannot load the cached graph")
        return fn

    monkeypatch.setattr(torch, "compile", fake_compile)
    with caplog.at_level(logging.WARNING, logger="lengthgen"):
        stack = Stack([TINY.with_(backend="compiled")])
        stack.step()
    assert len(calls) == 2 and calls[1] != str(cache) and Path(calls[1]).parent == cache.parent
    assert (cache / "fxgraph" / "entry").exists()  # not trusted, not deleted
    assert stack.backend == "compiled" and not [r for r in caplog.records if r.name == "lengthgen"]


def test_a_folder_the_user_chose_is_never_replaced(monkeypatch, tmp_path, caplog):
    mine = tmp_path / "my-cache"
    (mine / "entry").parent.mkdir(parents=True)
    (mine / "entry").write_text("someone else's compiled code")
    monkeypatch.setattr(training, "OWN_CACHE", False)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(mine))
    calls = []

    def failing(fn, **kwargs):
        calls.append(kwargs)
        raise RuntimeError("unsupported platform")

    monkeypatch.setattr(torch, "compile", failing)
    with caplog.at_level(logging.WARNING, logger="lengthgen"):
        (run,) = train_together([TINY.with_(backend="compiled")])
    assert len(calls) == 1 and run.backend == "eager" and (mine / "entry").read_text() == "someone else's compiled code"
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(mine)


def test_an_unknown_backend_stops_before_any_work():
    with pytest.raises(ValueError, match="backend must be one of"):
        Stack([TINY.with_(backend="jit")])
    good = dict(seeds=1, vocab=8, dim=16, layers=2, heads=2, offsets=[2], train_length=12, steps=20, batch=8, lr=3e-3,
                length_factor=4, eval_batch=8, kernel_batch=2, retrieval_mass=0.0, null_draws=100, compare_heads=1,
                fixed_turns=1.0, mask_batch=16, committed_sweep="", workers=1, device="cpu", seed_start=0)
    with pytest.raises(ParameterError, match="'backend'.*'eager', 'compiled'"):
        Parameters.from_values({**good, "backend": "jit"})


def test_the_compile_cache_is_the_repositorys_ignored_folder():
    assert training.COMPILE_CACHE.parent.name == ".cache"
    ignored = (training.COMPILE_CACHE.parents[1] / ".gitignore").read_text().splitlines()
    assert "/.cache/" in ignored


def in_range_accuracy(runs: list[training.TrainedRun]) -> list[float]:
    """Each run's in-range accuracy at its training length (256 fresh sequences)."""
    out = []
    for run in runs:
        sweep = length_sweep(run.model, run.config, [run.config.train_length], 256)
        out.append(float(sweep[sweep.metric == "in_range"].accuracy.iloc[0]))
    return out


def test_ten_paired_seeds_learn_the_same_cell_eager_and_compiled():
    """A sanity check, not a test of sameness: both trainers learn the cell (every network reaches in-range accuracy
    1.000 on it, so the registered margin holds by a difference of 0). That they compute the same function is what the
    first test checks; beyond the training length paired twins differ (benchmarks/README.md)."""
    eager = in_range_accuracy(train_together([EQUIVALENCE_CELL.with_(seed=s) for s in EQUIVALENCE_SEEDS]))
    compiled_runs = train_together([EQUIVALENCE_CELL.with_(seed=s, backend="compiled") for s in EQUIVALENCE_SEEDS])
    assert {run.backend for run in compiled_runs} == {"compiled"}
    compiled = in_range_accuracy(compiled_runs)
    assert min(eager) >= LEARNED and min(compiled) >= LEARNED  # a cell both trainers learn: equivalence means something
    diffs = [c - e for c, e in zip(compiled, eager, strict=True)]
    mean, sd = statistics.mean(diffs), statistics.stdev(diffs)
    half = stats.t.ppf(0.95, len(diffs) - 1) * sd / math.sqrt(len(diffs))
    assert -EQUIVALENCE_MARGIN < mean - half and mean + half < EQUIVALENCE_MARGIN, (eager, compiled)
