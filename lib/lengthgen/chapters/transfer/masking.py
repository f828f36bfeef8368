"""Chapter 6's masking test: at the length where a network's last position collapses, hide offsets from its retrieval
heads (the hijackers, the predicted offsets, controls) and measure the answer again."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from ...analysis.network_probes import (
    COLLAPSE_ACCURACY,
    EVAL_SEQUENCE_CHUNK,
)
from ...model.seeding import generator
from ...model.tasks import task_batch
from ...model.training import TrainedRun
from ...model.transformer import Transformer
from .registered import (
    MASK_CONDITIONS,
    RESTORE_MARGIN_SE,
)


@torch.no_grad()
def last_query_masses(
    run: TrainedRun, heads: list[tuple[int, int, np.ndarray]], lengths: list[int], batch: int
) -> list[tuple[list[float], list[float]]]:
    """For each ``(layer, head, kernel)``: the last query's mass on the target, and on the offsets whose
    kernel beats the target's, at every length (one forward pass per length serves every head)."""
    cfg = run.config
    out = [([], []) for _ in heads]
    for n in lengths:
        tokens, _ = task_batch(cfg.task, batch, n, cfg.vocab, cfg.offset, generator(cfg.seed, f"mass-{n}"))
        logits = run.model.attention_logits(tokens.to(run.model.device))
        for (layer, head, kernel), (target, hijacked) in zip(heads, out, strict=True):
            attn = torch.softmax(logits[layer][:, head, -1].cpu(), -1).mean(0).flip(0)  # index = offset
            hijackers = torch.as_tensor(kernel[:n] > kernel[cfg.offset])
            target.append(float(attn[cfg.offset]))
            hijacked.append(float(attn[hijackers].sum()))
    return out


@torch.no_grad()
def forward_with_masked_offsets(model: Transformer, tokens: torch.Tensor,
                                masked: dict[tuple[int, int], torch.Tensor]) -> torch.Tensor:
    """Vocabulary logits ``(batch, length, vocab)`` with, for every ``(layer, head)`` in ``masked``, the listed offsets
    taken out of that head's view (logit ``-inf`` for every query).

    The explicit path of :meth:`Transformer.forward`, block by block from each attention's pre-softmax logits
    (:meth:`lengthgen.model.transformer.Attention.logits`): with nothing masked it is the model's own output up to
    rounding (tested).
    """
    x, rotation, bias = model.encode(tokens)
    positions = torch.arange(tokens.shape[1], device=x.device)
    offsets = positions[:, None] - positions[None, :]  # (query, key)
    for layer, block in enumerate(model.blocks):
        normed = block.ln_attn(x)
        logits = block.attn.logits(normed, rotation, bias)
        for (masked_layer, head), hidden in masked.items():
            if masked_layer == layer and len(hidden):
                logits[:, head] = logits[:, head].masked_fill(torch.isin(offsets, hidden.to(x.device)), float("-inf"))
        _, _, values = block.attn.split_heads(normed)
        mixed = (torch.softmax(logits, -1) @ values).transpose(1, 2).reshape(x.shape)
        x = x + block.attn.proj(mixed)
        x = x + block.mlp(block.ln_mlp(x))
    return model.readout(model.ln_out(x))


def hijacking_offsets(kernel: np.ndarray, offset: int, train_length: int, length: int) -> np.ndarray:
    """The offsets in ``[T, length)`` whose content-averaged logit exceeds the target's ``kernel[offset]``."""
    far = np.arange(train_length, length)
    return far[kernel[far] > kernel[offset]]


def first_collapse(last_accuracy: pd.Series) -> float:
    """The first length (the series' index) whose last-position accuracy is below ``COLLAPSE_ACCURACY``; NaN if none."""
    failed = last_accuracy[last_accuracy < COLLAPSE_ACCURACY]
    return float(failed.index.min()) if len(failed) else float("nan")


def mask_sets(kernel: np.ndarray, predicted: np.ndarray, offset: int, train_length: int, length: int,
              rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The offsets each condition of the masking test hides from one retrieval head, at ``length``.

    ``hijackers``: the far offsets whose measured kernel beats the target's; ``predicted``: those where the kernel of
    the mean query and key (``predicted``, from training-length sequences) beats its value at ``offset``; ``control``
    and ``runners_up``: as many other far offsets (at most all of them), drawn at random or the next below the target
    by the measured kernel; ``complement``: every far offset but the hijackers; ``all_far``: every far offset.
    """
    far = np.arange(train_length, length)
    hidden = hijacking_offsets(kernel, offset, train_length, length)
    others = np.setdiff1d(far, hidden)
    count = min(len(hidden), len(others))
    return dict(hijackers=hidden, predicted=far[predicted[far] > predicted[offset]],
                control=np.sort(rng.choice(others, size=count, replace=False)),
                runners_up=np.sort(others[np.argsort(-kernel[others], kind="stable")[:count]]),
                complement=others, all_far=far)


@torch.no_grad()
def masking_test(run: TrainedRun, heads: list[tuple[int, int, np.ndarray, np.ndarray]], length: int, batch: int,
                 rng: np.random.Generator, stream: str) -> dict:
    """Last-position accuracy at ``length`` on ``batch`` fresh shift sequences (random stream ``stream``) under every
    condition of :func:`mask_sets` and unmasked. ``heads``: ``(layer, head, measured kernel, mean-vector kernel)`` of
    the retrieval heads, each over offsets ``0 .. longest - 1``. Also returns the offsets each condition hides, summed
    over heads, and the layers it touches."""
    cfg = run.config
    per_head = {(layer, head): mask_sets(kernel, predicted, cfg.offset, cfg.train_length, length, rng)
                for layer, head, kernel, predicted in heads}
    conditions = {"unmasked": {}} | {name: {key: torch.as_tensor(sets[name]) for key, sets in per_head.items()}
                                     for name in MASK_CONDITIONS[1:]}
    correct = dict.fromkeys(conditions, 0)
    gen = generator(cfg.seed, stream)
    for start in range(0, batch, EVAL_SEQUENCE_CHUNK):
        tokens, targets = task_batch(cfg.task, min(EVAL_SEQUENCE_CHUNK, batch - start), length, cfg.vocab, cfg.offset,
                                     gen, train=False)
        tokens = tokens.to(run.model.device)
        for name, masks in conditions.items():
            predicted = forward_with_masked_offsets(run.model, tokens, masks)[:, -1].argmax(-1).cpu()
            correct[name] += int((predicted == targets[:, -1]).sum())
    counts = {f"{name}_offsets": sum(len(sets[name]) for sets in per_head.values()) for name in MASK_CONDITIONS[1:]}
    return dict(collapse_length=length, masked_layers=",".join(sorted({str(layer) for layer, _ in per_head})),
                **counts, **{f"accuracy_{name}": hits / batch for name, hits in correct.items()})


def masking_verdicts(masking: pd.DataFrame, batch: int) -> pd.DataFrame:
    """The networks the masking test judges (collapsed on its own batch too), with whether each condition brings the
    last position back: accuracy at least ``COLLAPSE_ACCURACY`` and a gain over the unmasked accuracy of at least
    ``RESTORE_MARGIN_SE`` worst-case standard errors ``0.5 / sqrt(batch)``."""
    judged = masking[masking.accuracy_unmasked < COLLAPSE_ACCURACY].copy()
    margin = RESTORE_MARGIN_SE * 0.5 / math.sqrt(batch)
    for name in MASK_CONDITIONS[1:]:
        accuracy = judged[f"accuracy_{name}"]
        judged[f"restored_{name}"] = (accuracy >= COLLAPSE_ACCURACY) & (accuracy - judged.accuracy_unmasked >= margin)
    return judged


def masking_values(judged: pd.DataFrame) -> dict[str, float]:
    """The masking claims' values over the judged networks (NaN, a failure, when none is judged)."""
    if not len(judged):
        return dict.fromkeys(["masking_restores", "predicted_mask_restores", "masking_beats_control",
                              "masking_beats_runners_up", "complement_restored", "all_far_restored"], float("nan"))
    return dict(masking_restores=judged.restored_hijackers.mean(),
                predicted_mask_restores=judged.restored_predicted.mean(),
                masking_beats_control=(judged.accuracy_hijackers - judged.accuracy_control).mean(),
                masking_beats_runners_up=(judged.accuracy_hijackers - judged.accuracy_runners_up).mean(),
                complement_restored=judged.restored_complement.mean(), all_far_restored=judged.restored_all_far.mean())


def collapse_table(heads: pd.DataFrame, accuracy: pd.DataFrame) -> pd.DataFrame:
    """Per rotary network: its first hijacking offset (min over retrieval heads, ``inf`` if none), the first
    length whose last-position accuracy falls below ``COLLAPSE_ACCURACY`` (NaN if none), and whether the collapse
    is explained, i.e. happens only at a length that already contains a hijacking offset."""
    last = accuracy[(accuracy.task == "shift") & (accuracy.metric == "last")]
    rows = []
    for (label, offset, seed), group in heads.groupby(["label", "offset", "seed"]):
        curve = last[(last.label == label) & (last.offset == offset) & (last.seed == seed)].set_index("length").accuracy
        first_fail = first_collapse(curve)
        hijack = float(group.first_hijack.where(group.first_hijack >= 0, np.inf).min())
        rows.append(dict(label=label, offset=offset, seed=seed, first_hijack=hijack, collapse_length=first_fail,
                         explained=bool(np.isnan(first_fail) or hijack < first_fail)))
    return pd.DataFrame(rows, columns=["label", "offset", "seed", "first_hijack", "collapse_length", "explained"])
