"""Run configurations and the one training loop every model of the book uses.

A run is a pure function of its configuration, the seed included: the initialization, every
training batch and every evaluation batch come from separate seeded ``torch.Generator``
streams (see :mod:`lengthgen.model.seeding`). One :class:`RunConfig` base holds what every run
shares (seed, task, lengths, optimizer, device); each model module adds a subclass next to its
model, which builds it:

* :class:`lengthgen.model.heads.HeadRunConfig`: a single position-only head;
* :class:`lengthgen.model.heads.LinearRunConfig`: the linear rotary kernel of chapter 5;
* :class:`lengthgen.model.transformer.NetworkRunConfig`: the small transformer.

:func:`train` runs the loop for all three: sample a batch of the task, ``model.loss`` of the
model's output, Adam or plain SGD, an optional linear warm-up of the learning rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from torch import nn
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

    def sample_batch(self, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """One CPU training batch ``(inputs, targets)`` of the task at the training length."""
        return task_batch(self.task, self.batch, self.train_length, self.vocab, self.offset, gen)


@dataclass
class TrainedRun:
    """A trained model with its configuration, its loss at every step and its initial parameters."""

    config: RunConfig
    model: nn.Module
    losses: list[float]
    initial_state: dict[str, torch.Tensor]


def make_optimizer(cfg: RunConfig, parameters: list[nn.Parameter]) -> torch.optim.Optimizer:
    """Adam (no weight decay) or plain SGD (no momentum) at ``cfg.lr``."""
    if cfg.optimizer == "adam":
        return torch.optim.Adam(parameters, lr=cfg.lr)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(parameters, lr=cfg.lr)
    raise ValueError(f"optimizer must be 'adam' or 'sgd', got {cfg.optimizer!r}")


def train(cfg: RunConfig, progress: bool = False) -> TrainedRun:
    """Train the configured model on fresh batches of length ``train_length`` and return it in eval mode.

    Each step draws a batch from the run's data stream, computes ``model.loss(model(inputs),
    targets)`` and takes one optimizer step; with ``warmup_fraction > 0`` the learning rate
    rises linearly over the first ``floor(steps * warmup_fraction)`` steps.
    """
    device = resolve_device(cfg.device)
    model = cfg.build_model().to(device)
    initial = {name: p.detach().clone() for name, p in model.named_parameters()}
    gen = generator(cfg.seed, cfg.data_stream)
    opt = make_optimizer(cfg, list(model.parameters()))
    schedule = None
    if cfg.warmup_fraction > 0:
        warmup = max(1, math.floor(cfg.steps * cfg.warmup_fraction))
        schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / warmup))
    losses: torch.Tensor | None = None  # filled on the device, in the loss's dtype: no host sync per step
    for step in tqdm(range(cfg.steps), disable=not progress, desc=f"{type(cfg).__name__} seed {cfg.seed}", leave=False):
        inputs, targets = cfg.sample_batch(gen)
        loss = model.loss(model(inputs.to(device)), targets.to(device))
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        if schedule is not None:
            schedule.step()
        if losses is None:
            losses = torch.empty(cfg.steps, dtype=loss.dtype, device=device)
        losses[step] = loss.detach()  # a copy: keeping ``loss`` itself would keep its whole storage alive
    model.eval()
    return TrainedRun(cfg, model, [] if losses is None else losses.tolist(), initial)
