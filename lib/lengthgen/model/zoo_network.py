"""Chapter 11's runs: the book's decoder with any encoding of the zoo, on the full-sequence tasks.

The decoder and its encodings are :mod:`lengthgen.model.transformer`'s, with attention written out (so that every
encoding, bias encodings included, goes through the same softmax) and the APE table drawn last (so that its size,
the longest evaluated sequence, moves no other parameter's initial draw). ``randomized`` draws sorted random
positions from ``0 .. random_span - 1`` for every training batch and evaluation batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch

from .seeding import generator
from .sequence_tasks import SequenceTask, check_task, sequence_batch, sequence_length, training_batch
from .tasks import IGNORE
from .transformer import NetworkRunConfig, Transformer, TransformerConfig


def zoo_config(**settings: object) -> TransformerConfig:
    """The decoder's configuration for chapter 11: explicit attention, the APE table drawn last."""
    return TransformerConfig(**{"attention": "explicit", "ape_init_first": False, **settings})


@dataclass(frozen=True)
class ZooNetworkRunConfig(NetworkRunConfig):
    """The decoder with an encoding of the zoo on a full-sequence task, trained on instance sizes ``1 .. train_size``."""

    model: TransformerConfig = field(default_factory=zoo_config)
    task: SequenceTask = "copy"  # type: ignore[assignment]
    train_size: int = 16

    init_stream: ClassVar[str] = "zoo-network-init"
    data_stream: ClassVar[str] = "zoo-network-data"

    def __post_init__(self) -> None:
        check_task(self.task, self.train_size, self.model.vocab)
        if self.train_length != sequence_length(self.task, self.train_size, self.offset):
            object.__setattr__(self, "train_length", sequence_length(self.task, self.train_size, self.offset))

    def sample_batch(self, gen: torch.Generator) -> tuple[torch.Tensor | tuple[torch.Tensor, ...], torch.Tensor]:
        """Sizes ``1 .. train_size``; for ``randomized`` the inputs are ``(tokens, positions)``."""
        tokens, targets = training_batch(self.task, self.batch, self.train_size, self.vocab, self.offset, gen)
        if self.model.encoding != "randomized":
            return tokens, targets
        return (tokens, random_positions(self.batch, tokens.shape[1], self.model.random_span, gen)), targets


def random_positions(batch: int, length: int, span: int, gen: torch.Generator) -> torch.Tensor:
    """``(batch, length)`` sorted samples without replacement from ``0 .. span - 1``."""
    if length > span:
        raise ValueError(f"random_span {span} is shorter than a sequence of {length} tokens")
    return torch.stack([torch.randperm(span, generator=gen)[:length].sort().values for _ in range(batch)])


@torch.no_grad()
def exact_match(model: Transformer, cfg: ZooNetworkRunConfig, sizes: list[int], batch: int) -> list[dict]:
    """Per size: the share of ``batch`` fresh instances answered entirely right (``exact``) and of answers right
    (``token``), from the run's evaluation stream (one per size; randomized positions drawn from it too)."""
    device = next(model.parameters()).device
    rows = []
    for size in sizes:
        gen = generator(cfg.seed, f"{cfg.eval_stream}-size-{size}")
        tokens, targets = sequence_batch(cfg.task, batch, size, cfg.vocab, cfg.offset, gen)
        positions = None
        if cfg.model.encoding == "randomized":
            positions = random_positions(batch, tokens.shape[1], cfg.model.random_span, gen).to(device)
        predicted = model(tokens.to(device), positions).argmax(-1).cpu()
        answered = targets != IGNORE
        right = (predicted == targets) | ~answered
        rows.append(dict(size=size, exact=float(right.all(1).double().mean()),
                         token=float((right & answered).sum() / answered.sum()), n=batch))
    return rows
