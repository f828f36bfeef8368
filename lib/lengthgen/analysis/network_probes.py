"""What chapters 6 and 13 read off a trained network's attention: per-head mass on the target offset, the
content-averaged kernel of every head, and each head's mean query and key on training-length sequences.

Shared by the chapters on networks so that each measures these the same way.
"""

from __future__ import annotations

import numpy as np
import torch

from ..model.seeding import generator
from ..model.tasks import task_batch
from ..model.training import TrainedRun

EVAL_SEQUENCE_CHUNK = 16  # sequences per forward pass when scoring accuracy
COLLAPSE_ACCURACY = 0.5  # last-position accuracy below which a network has collapsed at a length


@torch.no_grad()
def head_target_mass(run: TrainedRun, length: int, batch: int) -> np.ndarray:
    """``(layers, heads)``: mean attention on offset ``k`` over the queries ``t`` in ``[k, length)``."""
    cfg = run.config
    tokens, _ = task_batch(cfg.task, batch, length, cfg.vocab, cfg.offset, generator(cfg.seed, f"heads-{length}"))
    t = torch.arange(cfg.offset, length)
    out = []
    for logits in run.model.attention_logits(tokens.to(run.model.device)):
        attn = torch.softmax(logits.cpu(), -1)
        out.append(attn[:, :, t, t - cfg.offset].mean((0, 2)).numpy())
    return np.stack(out)


@torch.no_grad()
def content_averaged_kernels(run: TrainedRun, length: int, batch: int) -> np.ndarray:
    """``(layers, heads, length)``: each head's logit at offset ``D`` averaged over queries and sequences."""
    cfg = run.config
    tokens, _ = task_batch(cfg.task, batch, length, cfg.vocab, cfg.offset, generator(cfg.seed, f"kernel-{length}"))
    out = []
    for logits in run.model.attention_logits(tokens.to(run.model.device)):
        logits = logits.cpu()
        rows = [torch.diagonal(logits, offset=-d, dim1=-2, dim2=-1).mean((0, 2)) for d in range(length)]
        out.append(torch.stack(rows, dim=-1).numpy())
    return np.stack(out)


@torch.no_grad()
def mean_query_key(run: TrainedRun, layer: int, head: int, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean pre-rotation query and key vectors of one head over training-length sequences."""
    cfg = run.config
    tokens, _ = task_batch(cfg.task, batch, cfg.train_length, cfg.vocab, cfg.offset, generator(cfg.seed, "mean-qk"))
    x = run.model.layer_inputs(tokens.to(run.model.device))[layer]
    q, k, _ = run.model.blocks[layer].attn.split_heads(x)
    return q[:, head].mean((0, 1)).cpu(), k[:, head].mean((0, 1)).cpu()
