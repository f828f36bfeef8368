"""Training a single head on the fixed-offset retrieval task.

Every run is a pure function of its :class:`RunConfig` (seed included): the
initialization, every training batch and every evaluation batch come from
separate seeded ``torch.Generator`` streams (see :mod:`lengthgen.seeding`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Literal

import torch
from torch import nn
from tqdm import tqdm

from .encodings import full_band_frequencies
from .heads import ApeHead, PositionOnlyHead, RopeHead
from .seeding import generator
from .tasks import IGNORE, offset_targets, sample_tokens

HeadKind = Literal["rope", "ape"]


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one single-head training run."""

    kind: HeadKind = "rope"
    dim: int = 64
    vocab: int = 64
    train_length: int = 32
    offset: int = 5
    batch: int = 64
    steps: int = 1000
    lr: float = 1e-2
    seed: int = 0
    rope_base: float = 10_000.0
    rope_convention: str = "half"
    rope_full_band: bool = False  # frequencies pi * base^(-2m/d) instead of base^(-2m/d)
    qk_init_std: float = 0.1
    table_init_std: float = 0.02
    max_length: int = 512  # APE table rows (only the first train_length are ever trained)

    def with_(self, **changes: object) -> RunConfig:
        """A copy with some fields changed."""
        return replace(self, **changes)

    def as_dict(self) -> dict:
        return asdict(self)


def build_head(cfg: RunConfig) -> PositionOnlyHead:
    """The freshly initialized head of a run (initialization stream of ``cfg.seed``)."""
    gen = generator(cfg.seed, "init")
    if cfg.kind == "rope":
        freqs = full_band_frequencies(cfg.dim, cfg.rope_base) if cfg.rope_full_band else None
        return RopeHead(cfg.dim, cfg.vocab, gen, cfg.qk_init_std, cfg.rope_base, cfg.rope_convention, freqs)
    if cfg.kind == "ape":
        return ApeHead(cfg.dim, cfg.vocab, cfg.max_length, gen, cfg.table_init_std)
    raise ValueError(f"kind must be 'rope' or 'ape', got {cfg.kind!r}")


@dataclass
class TrainedRun:
    """A trained head, its config, the loss curve and the initial parameters."""

    config: RunConfig
    head: PositionOnlyHead
    losses: list[float]
    initial_state: dict[str, torch.Tensor]


def train(cfg: RunConfig, progress: bool = False) -> TrainedRun:
    """Train a head with Adam (no weight decay) on fresh batches of length ``train_length``.

    The loss is cross-entropy over the query positions ``t`` in ``[offset, train_length)``.
    """
    head = build_head(cfg)
    initial = {name: p.detach().clone() for name, p in head.named_parameters()}
    data_gen = generator(cfg.seed, "train-data")
    opt = torch.optim.Adam(head.parameters(), lr=cfg.lr)
    losses: list[float] = []
    for _ in tqdm(range(cfg.steps), disable=not progress, desc=f"{cfg.kind} seed {cfg.seed}", leave=False):
        tokens = sample_tokens(cfg.batch, cfg.train_length, cfg.vocab, data_gen)
        targets = offset_targets(tokens, cfg.offset)
        logits = head(tokens)
        loss = nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab), targets.reshape(-1), ignore_index=IGNORE)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    head.eval()
    return TrainedRun(cfg, head, losses, initial)


def train_many(configs: list[RunConfig], progress: bool = True) -> list[TrainedRun]:
    """Train several runs one after another, with one progress bar over runs."""
    return [train(cfg) for cfg in tqdm(configs, disable=not progress, desc="training runs")]
