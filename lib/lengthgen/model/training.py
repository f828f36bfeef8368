"""Run configurations and the one training loop every model of the book uses.

A run is a pure function of its configuration, the seed included: the initialization, every
training batch and every evaluation batch come from separate seeded ``torch.Generator``
streams (see :mod:`lengthgen.model.seeding`). One :class:`RunConfig` base holds what every run
shares (seed, task, lengths, optimizer, device); each model module adds a subclass next to its
model, which builds it:

* :class:`lengthgen.model.heads.HeadRunConfig`: a single position-only head;
* :class:`lengthgen.model.heads.LinearRunConfig`: the linear rotary kernel of chapter 5;
* :class:`lengthgen.model.transformer.NetworkRunConfig`: the small transformer.

:func:`train_together` runs the loop for all of them, several seeds at once as one stacked
model (a :class:`Stack`): sample a batch of the task per replica, ``model.loss`` of the model's
output, Adam or plain SGD, an optional linear warm-up of the learning rate. :func:`train` is one
replica. ``RunConfig.backend`` says how a step computes: ``eager`` (the default) or ``compiled``
(``torch.compile``, cached on disk; it changes rounding, so a compiled run is not bitwise the
eager one, and it falls back to eager where compilation fails).
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from tqdm import tqdm

from .config import Config
from .seeding import generator, resolve_device
from .tasks import Task, task_batch

Optimizer = Literal["adam", "sgd"]
Backend = Literal["eager", "compiled"]
BACKENDS: tuple[str, ...] = ("eager", "compiled")
COMPILE_CACHE = Path(__file__).resolve().parents[3] / ".cache" / "compiled"  # the repository's, shared by workers
RECOMPILE_LIMIT = 64  # architectures one process may compile (a chapter trains a few dozen at most)
OWN_CACHE = "TORCHINDUCTOR_CACHE_DIR" not in os.environ  # a folder the user chose is never replaced
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(COMPILE_CACHE))  # before torch writes its default there
log = logging.getLogger("lengthgen")


@dataclass(frozen=True)
class RunConfig(Config):
    """What every training run has: a seed, a task at a training length, an optimizer and a device."""

    seed: int = 0
    task: Task = "shift"
    offset: int = 5
    train_length: int = 32
    steps: int = 1000
    batch: int = 64
    lr: float = 1e-2
    optimizer: Optimizer = "adam"
    warmup_fraction: float = 0.0  # linear learning-rate warm-up over this share of the steps (0: none)
    device: str = "cpu"  # "cpu", "cuda", "cuda:N" or "auto"
    backend: Backend = "eager"  # "compiled": the stacked loss through torch.compile (cached on disk), else eager

    init_stream: ClassVar[str] = "init"  # random stream of the initialization
    data_stream: ClassVar[str] = "train-data"  # random stream of the training batches

    @property
    def vocab(self) -> int:
        raise NotImplementedError

    @property
    def eval_stream(self) -> str:
        """Prefix of the random stream that evaluation at each length draws from."""
        return "eval"

    def build_model(self) -> nn.Module:
        """The freshly initialized model of this run, on the CPU."""
        raise NotImplementedError

    def sample_batch(self, gen: torch.Generator) -> tuple[torch.Tensor | tuple[torch.Tensor, ...], torch.Tensor]:
        """One CPU training batch ``(inputs, targets)`` of the task at the training length (inputs: one tensor, or a
        tuple of tensors the model takes as its arguments)."""
        return task_batch(self.task, self.batch, self.train_length, self.vocab, self.offset, gen)


@dataclass
class TrainedRun:
    """A trained model with its configuration, its loss at every step, its initial parameters, and snapshots of its
    parameters after the steps that were asked for (``{step: {name: tensor}}``)."""

    config: RunConfig
    model: nn.Module
    losses: list[float]
    initial_state: dict[str, torch.Tensor]
    snapshots: dict[int, dict[str, torch.Tensor]] = field(default_factory=dict)
    backend: str = "eager"  # the backend that trained it: "eager" where compilation failed and the loop fell back


def make_optimizer(cfg: RunConfig, parameters: list[nn.Parameter]) -> torch.optim.Optimizer:
    """Adam (no weight decay) or plain SGD (no momentum) at ``cfg.lr``."""
    if cfg.optimizer == "adam":
        return torch.optim.Adam(parameters, lr=cfg.lr)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(parameters, lr=cfg.lr)
    raise ValueError(f"optimizer must be 'adam' or 'sgd', got {cfg.optimizer!r}")


class CompiledLoss:
    """A stacked loss through ``torch.compile`` that falls back to the eager loss if compilation fails.

    Compiled code is cached in :data:`COMPILE_CACHE` (unless ``$TORCHINDUCTOR_CACHE_DIR`` names another folder),
    shared by worker processes, so an architecture compiles once per machine. A failure on the book's own cache,
    already filled, is taken for a corrupt cache, which is not trusted: the compilation is tried once more in a
    fresh folder beside it (nothing is deleted). A second failure, a failure on a folder the user chose, or any
    failure of the first backward pass (:meth:`fall_back`, called by :class:`Stack`) logs one line and trains
    eagerly; so does every later compiled stack of the process. :attr:`backend` says which ran.
    """

    failed = False  # a compilation failed in this process: later stacks train eagerly without trying again

    def __init__(self, loss: Callable[..., torch.Tensor]) -> None:
        self.eager = loss
        self.call: Callable[..., torch.Tensor] | None = self.eager if CompiledLoss.failed else None
        self.backend = "eager" if CompiledLoss.failed else "compiled"
        self.proven = CompiledLoss.failed  # whether a compiled forward and backward pass have run

    def __call__(self, *args: object) -> torch.Tensor:
        if self.call is not None:
            return self.call(*args)
        folder = Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR", str(COMPILE_CACHE)))
        warm = folder.is_dir() and any(folder.iterdir())
        try:
            return self._compile(args)
        except Exception as err:  # noqa: BLE001 -- any failure of the compiler falls back, never a crash
            failure = err
        if warm and OWN_CACHE and folder.resolve() == COMPILE_CACHE.resolve():
            COMPILE_CACHE.parent.mkdir(parents=True, exist_ok=True)
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="rebuilt-", dir=COMPILE_CACHE.parent)
            torch._dynamo.reset()
            try:
                return self._compile(args)
            except Exception as err:  # noqa: BLE001
                failure = err
        self.fall_back(failure)
        return self.eager(*args)

    def fall_back(self, failure: BaseException) -> None:
        """Train eagerly from now on, in this stack and every later one of the process, saying so in one line."""
        inner = getattr(failure, "inner_exception", None) or failure
        reason = next((line for line in str(inner).splitlines() if line.strip()), "")
        log.warning("torch.compile failed (%s: %s); training with the eager backend", type(inner).__name__, reason)
        CompiledLoss.failed = True
        self.call, self.backend, self.proven = self.eager, "eager", True

    def _compile(self, args: tuple[object, ...]) -> torch.Tensor:
        # every stack's loss is the same vmap wrapper to dynamo: one compilation per architecture, many per process,
        # and past the limit a failure (then one line and eager), never a silent eager run
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
        torch._dynamo.config.fail_on_recompile_limit_hit = True
        compiled = torch.compile(self.eager, dynamic=False)
        out = compiled(*args)
        self.call = compiled
        return out


def stack_key(cfg: RunConfig) -> RunConfig:
    """What runs trained together must share: everything in their configuration but the seed."""
    return cfg.with_(seed=0)


def train(cfg: RunConfig, progress: bool = False, snapshots: Sequence[int] = ()) -> TrainedRun:
    """Train one run: :func:`train_together` with a single replica."""
    return train_together([cfg], progress, snapshots)[0]


def train_together(configs: Sequence[RunConfig], progress: bool = False, snapshots: Sequence[int] = ()) -> list[TrainedRun]:
    """Train runs that differ only in their seed as one :class:`Stack`, ``steps`` steps, and return each run."""
    stack = Stack(configs, snapshots)
    desc = f"{type(stack.cfg).__name__} x{len(stack.configs)}"
    for _ in tqdm(range(stack.cfg.steps), disable=not progress, desc=desc, leave=False):
        stack.step()
    return stack.runs()


class Stack:
    """Runs that differ only in their seed, trained as one stacked model: each step trains every replica.

    Every replica keeps its own initialization, its own data stream and its own loss; their
    parameters are stacked along a leading axis and a step runs all of them through
    ``torch.func.vmap`` (so small matrix products become batched ones), eagerly or, with
    ``backend="compiled"``, through ``torch.compile`` (:class:`CompiledLoss`). The loss minimized is
    the sum of the replicas' losses, whose gradient with respect to a replica's parameters is that
    replica's own gradient; Adam and SGD act elementwise. Each step draws a batch from every
    replica's data stream, computes ``model.loss(model(inputs), targets)`` and takes one optimizer
    step; with ``warmup_fraction > 0`` the learning rate rises linearly over the first
    ``floor(steps * warmup_fraction)`` steps. After each step listed in ``snapshots`` every
    replica's parameters are copied into its run's ``snapshots``.
    """

    def __init__(self, configs: Sequence[RunConfig], snapshots: Sequence[int] = ()) -> None:
        self.configs = list(configs)
        if len({stack_key(c) for c in self.configs}) != 1:
            raise ValueError("runs trained together must differ only in their seed")
        self.cfg = cfg = self.configs[0]
        if cfg.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {cfg.backend!r}")
        self.device = resolve_device(cfg.device)
        self.models = [c.build_model().to(self.device) for c in self.configs]
        self.initial = [{name: p.detach().clone() for name, p in m.named_parameters()} for m in self.models]
        self.params, self.buffers = stack_module_state(self.models)
        template = self.models[0]

        def replica_loss(p: dict, b: dict, inputs: tuple[torch.Tensor, ...], targets: torch.Tensor) -> torch.Tensor:
            return template.loss(functional_call(template, (p, b), inputs), targets)

        self.loss: Callable[..., torch.Tensor] = vmap(replica_loss)  # CPU flash attention has no batching rule: it loops
        if cfg.backend == "compiled":
            self.loss = CompiledLoss(self.loss)
        self.gens = [generator(c.seed, c.data_stream) for c in self.configs]
        self.opt = make_optimizer(cfg, list(self.params.values()))
        self.schedule = None
        if cfg.warmup_fraction > 0:
            warmup = max(1, math.floor(cfg.steps * cfg.warmup_fraction))
            self.schedule = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda step: min(1.0, (step + 1) / warmup))
        self.snapshots = set(snapshots)
        self.losses: list[torch.Tensor] = []  # on the device, in the loss's dtype: no host sync per step
        self.kept: dict[int, dict[str, torch.Tensor]] = {}
        warnings.filterwarnings("ignore", message="There is a performance drop because we have not yet implemented the "
                                "batching rule")

    @property
    def backend(self) -> str:
        """The backend that trains: ``"eager"`` where compilation failed and the stack fell back."""
        return self.loss.backend if isinstance(self.loss, CompiledLoss) else "eager"

    def step(self) -> None:
        """One optimizer step of every replica on a fresh batch from its own data stream."""
        batches = [c.sample_batch(g) for c, g in zip(self.configs, self.gens, strict=True)]
        parts = [b[0] if isinstance(b[0], tuple) else (b[0],) for b in batches]
        inputs = tuple(torch.stack(column).to(self.device) for column in zip(*parts, strict=True))
        targets = torch.stack([b[1] for b in batches]).to(self.device)
        if isinstance(self.loss, CompiledLoss) and not self.loss.proven:
            loss = self.first_compiled_pass(inputs, targets)
        else:
            loss = self.loss(self.params, self.buffers, inputs, targets)  # (replicas,)
            self.opt.zero_grad(set_to_none=False)
            loss.sum().backward()
        self.opt.step()
        if self.schedule is not None:
            self.schedule.step()
        self.losses.append(loss.detach().clone())  # a copy: never a view keeping a larger buffer alive
        if len(self.losses) in self.snapshots:
            self.kept[len(self.losses)] = {name: p.detach().cpu().clone() for name, p in self.params.items()}

    def first_compiled_pass(self, inputs: tuple[torch.Tensor, ...], targets: torch.Tensor) -> torch.Tensor:
        """The first compiled forward and backward pass, whose backward compiles lazily: if it fails, the step is
        redone eagerly (:meth:`CompiledLoss.fall_back`), never a crash."""
        assert isinstance(self.loss, CompiledLoss)
        try:
            loss = self.loss(self.params, self.buffers, inputs, targets)
            self.opt.zero_grad(set_to_none=False)
            loss.sum().backward()
        except Exception as err:  # noqa: BLE001 -- a failure of the compiled backward falls back too
            if self.loss.backend == "eager":
                raise  # the eager loss itself failed: a real error, not the compiler's
            self.loss.fall_back(err)
            loss = self.loss(self.params, self.buffers, inputs, targets)
            self.opt.zero_grad(set_to_none=False)
            loss.sum().backward()
        self.loss.proven = True
        return loss

    def runs(self) -> list[TrainedRun]:
        """Each replica as its own trained model (in evaluation mode), with its loss curve and snapshots."""
        curves = torch.stack(self.losses).T.tolist() if self.losses else [[] for _ in self.configs]
        runs = []
        with torch.no_grad():
            for i, (c, model) in enumerate(zip(self.configs, self.models, strict=True)):
                for name, p in model.named_parameters():
                    p.copy_(self.params[name][i])
                model.eval()
                taken = {step: {name: p[i] for name, p in state.items()} for step, state in self.kept.items()}
                runs.append(TrainedRun(c, model, curves[i], self.initial[i], taken, self.backend))
        return runs
