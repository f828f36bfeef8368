"""Chapter 10's mechanism probes: what out-of-range queries attend to, T5's untouched far buckets, and FIRE's drift
predicted from its learned constants."""

from __future__ import annotations

import math

import numpy as np
import torch

from ...analysis.kernels import as_dtype
from ...model.heads import PositionOnlyHead
from ...model.position_zoo import t5_bucket
from ...model.zoo_heads import FireHead, T5Head

DIAGNOSTIC_QUERIES = 64  # out-of-range queries, evenly spaced, whose most-attended key is classified


DIAGNOSTIC_COLUMNS = ["target_mass", "far_mass", "argmax_target", "argmax_pinned"]  # attention_diagnostics' numbers


def diagnostic_queries(train_length: int, length: int) -> torch.Tensor:
    """:data:`DIAGNOSTIC_QUERIES` out-of-range queries, evenly spaced from ``train_length`` to ``length - 1``."""
    return torch.linspace(train_length, length - 1, DIAGNOSTIC_QUERIES).round().long().unique()


@torch.no_grad()
def far_attention(head: PositionOnlyHead, train_length: int, length: int) -> float:
    """Mean over :func:`diagnostic_queries` of the attention (float64) on keys at offsets ``>= train_length``: the
    weight of distances no training sequence has."""
    queries = diagnostic_queries(train_length, length)
    weights = as_dtype(head, torch.float64).attention(length, queries).cpu()
    far = torch.arange(length)[None, :] <= queries[:, None] - train_length
    return float((weights * far).sum(-1).mean())


@torch.no_grad()
def attention_diagnostics(head: PositionOnlyHead, train_length: int, offset: int, length: int) -> dict[str, float]:
    """At ``length``: the last query's attention on the target and on offsets ``>= train_length`` (dilution), and, over
    :data:`DIAGNOSTIC_QUERIES` out-of-range queries, the share whose most-attended key is the target (the rule still
    points at it) and the share whose most-attended key is another key inside ``[0, train_length)`` (pinning, chapter 2)."""
    last = head.attention(length, torch.tensor([length - 1]))[0].flip(0).double()  # index: offset
    queries = diagnostic_queries(train_length, length)
    top = head.attention(length, queries).argmax(-1).cpu()
    return dict(target_mass=float(last[offset]), far_mass=float(last[train_length:].sum()),
                argmax_target=float((top == queries - offset).double().mean()),
                argmax_pinned=float(((top < train_length) & (top != queries - offset)).double().mean()))


@torch.no_grad()
def t5_far_margin(head: T5Head, train_length: int, offset: int, longest: int) -> float:
    """Smallest logit of a bucket that only distances ``>= train_length`` (up to ``longest``) fall in, minus the
    largest logit of a bucket some training distance other than ``offset`` falls in (positive: every far key outweighs
    every trained distractor)."""
    distances = torch.arange(longest)
    buckets = t5_bucket(-distances, False, head.num_buckets, head.max_distance)
    reached = set(buckets[:train_length].tolist())
    far = sorted(set(buckets[train_length:].tolist()) - reached)
    distractors = sorted(reached - {int(buckets[offset])})
    logits = head.bucket_logit.detach()
    return float(logits[far].min() - logits[distractors].max()) if far and distractors else float("nan")


def fire_predicted_offset(c: float, threshold: float, train_length: int, offset: int, queries: np.ndarray,
                          ) -> np.ndarray:
    """The offset FIRE's most-attended key drifts to at each query, from its learned ``c`` and ``L`` alone.

    Training puts the target at the normalized input ``z_k``, the mean of ``psi(k) / psi(max(i, L))`` over the
    training queries ``i = k .. T-1`` (every one is scored); a query ``q`` sees offset ``d`` at
    ``psi(d) / psi(max(q, L))``, so the input the MLP learned to favour sits at ``d* = psi^-1(z_k psi(max(q, L)))``,
    farther back than ``k`` as ``q`` grows beyond ``L``."""
    def psi(x: np.ndarray) -> np.ndarray:
        return np.log1p(c * x)

    trained = np.arange(offset, train_length)
    z_k = float(np.mean(psi(offset) / psi(np.maximum(trained, threshold))))
    return np.expm1(z_k * psi(np.maximum(queries, threshold))) / c


def drift_queries(train_length: int, threshold: float, length: int) -> torch.Tensor:
    """:data:`DIAGNOSTIC_QUERIES` evenly spaced queries beyond both ``T`` and FIRE's threshold ``L`` (below ``L`` the
    head is relative and the drift zero, which would count as agreement for free)."""
    first = max(train_length, math.floor(threshold) + 1)
    return torch.linspace(first, length - 1, DIAGNOSTIC_QUERIES).round().long().unique()


@torch.no_grad()
def fire_drift(head: FireHead, train_length: int, offset: int, length: int) -> dict[str, float]:
    """Medians over :func:`drift_queries` of ``|log2((d + 1) / (x + 1))|``, ``d`` the measured offset of the
    most-attended key, for ``x`` = :func:`fire_predicted_offset`'s ``d*`` (``drift_error``), for ``x = k`` (no drift)
    and for the best fixed fraction ``x = f q`` fitted to the measurement (a one-parameter alternative)."""
    c, threshold = float(head.fire.log_c.exp()), float(head.fire.threshold.abs())
    queries = drift_queries(train_length, threshold, length)
    if not len(queries):
        return dict(drift_error=math.nan, no_drift_error=math.nan, fraction_error=math.nan)
    measured = (queries - head.attention(length, queries).argmax(-1).cpu()).numpy().astype(float)
    q = queries.numpy().astype(float)

    def score(x: np.ndarray) -> float:
        return float(np.median(np.abs(np.log2((measured + 1) / (x + 1)))))

    fractions = np.geomspace(1e-3, 1.0, 400)
    return dict(drift_error=score(fire_predicted_offset(c, threshold, train_length, offset, q)),
                no_drift_error=score(np.full_like(q, offset)), fraction_error=min(score(f * q) for f in fractions))
