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
model: sample a batch of the task per replica, ``model.loss`` of the model's output, Adam or
plain SGD, an optional linear warm-up of the learning rate. :func:`train` is one replica.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from tqdm import tqdm

from .config import Config
from .seeding import generator, resolve_device
from .tasks import Task, task_batch

Optimizer = Literal["adam", "sgd"]


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


def make_optimizer(cfg: RunConfig, parameters: list[nn.Parameter]) -> torch.optim.Optimizer:
    """Adam (no weight decay) or plain SGD (no momentum) at ``cfg.lr``."""
    if cfg.optimizer == "adam":
        return torch.optim.Adam(parameters, lr=cfg.lr)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(parameters, lr=cfg.lr)
    raise ValueError(f"optimizer must be 'adam' or 'sgd', got {cfg.optimizer!r}")


def stack_key(cfg: RunConfig) -> RunConfig:
    """What runs trained together must share: everything in their configuration but the seed."""
    return cfg.with_(seed=0)


def train(cfg: RunConfig, progress: bool = False, snapshots: Sequence[int] = ()) -> TrainedRun:
    """Train one run: :func:`train_together` with a single replica."""
    return train_together([cfg], progress, snapshots)[0]


def train_together(configs: Sequence[RunConfig], progress: bool = False, snapshots: Sequence[int] = ()) -> list[TrainedRun]:
    """Train runs that differ only in their seed as one stacked model, and return each as its own trained model.

    Every replica keeps its own initialization, its own data stream and its own loss; their
    parameters are stacked along a leading axis and one step of the loop runs all of them
    through ``torch.func.vmap`` (so small matrix products become batched ones). The loss
    minimized is the sum of the replicas' losses, whose gradient with respect to a replica's
    parameters is that replica's own gradient; Adam and SGD act elementwise. Each step draws a
    batch from every replica's data stream, computes ``model.loss(model(inputs), targets)`` and
    takes one optimizer step; with ``warmup_fraction > 0`` the learning rate rises linearly over
    the first ``floor(steps * warmup_fraction)`` steps. After each step listed in ``snapshots`` every
    replica's parameters are copied into its run's ``snapshots``.
    """
    configs = list(configs)
    keys = {stack_key(cfg) for cfg in configs}
    if len(keys) != 1:
        raise ValueError("runs trained together must differ only in their seed")
    cfg = configs[0]
    device = resolve_device(cfg.device)
    models = [c.build_model().to(device) for c in configs]
    initial = [{name: p.detach().clone() for name, p in model.named_parameters()} for model in models]
    params, buffers = stack_module_state(models)
    template = models[0]

    def replica_loss(p: dict, b: dict, inputs: tuple[torch.Tensor, ...], targets: torch.Tensor) -> torch.Tensor:
        return template.loss(functional_call(template, (p, b), inputs), targets)

    batched_loss = vmap(replica_loss)  # functorch has no batching rule for CPU flash attention: it loops, correctly
    gens = [generator(c.seed, c.data_stream) for c in configs]
    opt = make_optimizer(cfg, list(params.values()))
    schedule = None
    if cfg.warmup_fraction > 0:
        warmup = max(1, math.floor(cfg.steps * cfg.warmup_fraction))
        schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / warmup))
    losses: torch.Tensor | None = None  # filled on the device, in the loss's dtype: no host sync per step
    kept: dict[int, dict[str, torch.Tensor]] = {}
    desc = f"{type(cfg).__name__} x{len(configs)}"
    warnings.filterwarnings("ignore", message="There is a performance drop because we have not yet implemented the batching rule")
    for step in tqdm(range(cfg.steps), disable=not progress, desc=desc, leave=False):
        batches = [c.sample_batch(g) for c, g in zip(configs, gens, strict=True)]
        parts = [b[0] if isinstance(b[0], tuple) else (b[0],) for b in batches]
        inputs = tuple(torch.stack(column).to(device) for column in zip(*parts, strict=True))
        targets = torch.stack([b[1] for b in batches]).to(device)
        loss = batched_loss(params, buffers, inputs, targets)  # (replicas,)
        opt.zero_grad(set_to_none=False)
        loss.sum().backward()
        opt.step()
        if schedule is not None:
            schedule.step()
        if losses is None:
            losses = torch.empty(cfg.steps, len(configs), dtype=loss.dtype, device=device)
        losses[step] = loss.detach()  # a copy: keeping ``loss`` itself would keep its whole storage alive
        if step + 1 in snapshots:
            kept[step + 1] = {name: p.detach().cpu().clone() for name, p in params.items()}
    runs = []
    with torch.no_grad():
        for i, (c, model) in enumerate(zip(configs, models, strict=True)):
            for name, p in model.named_parameters():
                p.copy_(params[name][i])
            model.eval()
            curve = [] if losses is None else losses[:, i].tolist()
            taken = {step: {name: p[i] for name, p in state.items()} for step, state in kept.items()}
            runs.append(TrainedRun(c, model, curve, initial[i], taken))
    return runs
