"""Chapter 10 (``10_zoo``): the common position encodings through the book's lens, on one position-only head.

Every encoding of :mod:`lengthgen.model.zoo_heads` is trained on chapters 1-4's task (retrieve the token ``k`` back)
at length ``T`` and scored to ``length_factor * T``. Before any run, the chapter's verdict for each encoding is
registered in :data:`PREDICTED_VERDICTS` with its reason, from the mechanism the book has built: whether the logit
is a function of the offset alone, what unseen positions or offsets are left at, and whether the encoding can put a
peak at offset ``k`` at all. The chapter then measures

* the exact offset test (chapter 1's Toeplitz deviation) of every head at its init and after training;
* accuracy against length, and from it a verdict per run: *not learned* (in range at ``T`` below
  :data:`LEARNED_FLOOR`), *generalizes* (every out-of-range accuracy up to the longest length at least
  :data:`GENERALIZES_FLOOR`) or *fails*.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..book.parameters import ParameterError, parameter
from ..model.evaluation import doubling_lengths, length_sweep
from ..model.heads import PositionOnlyHead
from ..model.training import TrainedRun
from ..model.zoo_heads import ZOO, FireHead, RandomizedRopeHead, ZooRunConfig
from .claims import Claim, reported
from .common import GB, Execution, HeadTraining, LengthSweep, map_stacked
from .equivariance import toeplitz_deviation
from .stats import binomial_interval

LEARNED_FLOOR = 0.99  # in-range accuracy at T below which a run has not learned the task (chapter 2's floor)
GENERALIZES_FLOOR = 0.95  # lowest out-of-range accuracy of a run that generalizes (chapter 1's worst_accuracy)
VERDICTS = ("not learned", "generalizes", "fails")
RELATIVE = ("nope", "alibi", "t5", "rope", "partial_rope")  # logits a function of i - j by construction
ABSOLUTE = ("ape", "sinusoidal")  # logits of the positions themselves
ABSOLUTE_FLOOR = 1e-3  # smallest relative Toeplitz deviation the test must see in a trained absolute head

# The verdicts registered before any zoo run, with the mechanism behind each (defaults: T = 32, k = 5, d = 64, to 16T).
PREDICTED_VERDICTS: dict[str, tuple[str, str]] = {
    "nope": ("not learned", "constant logits: attention is uniform over the keys, nothing can single out offset k"),
    "alibi": ("not learned", "a fixed bias decreasing in the offset peaks at offset 0, never at k > 0, and has nothing "
                             "to learn"),
    "randomized": ("not learned", "k tokens back is a random number of positions back, so no function of the "
                                  "position offset picks it: the task needs order, which a position-only head "
                                  "does not have"),
    "ape": ("fails", "rows of positions beyond T are never trained and stay at their init (chapter 2)"),
    "sinusoidal": ("fails", "the logit (c + s_i)^T M (c + s_j) is not a function of i - j for a general learned M, so "
                            "the rule fitted on the training triangle does not carry to new positions"),
    "t5": ("generalizes", "a function of the offset; the target's bucket is exact (k < 16) and trained up, the far "
                          "buckets no training distance reaches stay at their small init, so they dilute the target "
                          "(chapter 4) but do not out-score it"),
    "rope": ("generalizes", "exact offset equivariance with every plane (chapter 1)"),
    "partial_rope": ("fails", "a function of the offset, but with a quarter of the planes, of which only the fastest "
                              "turn within T: a carrier of so few effective planes realigns at some far offset within "
                              "16T and that offset out-scores the target (chapters 1 and 3)"),
    "fire": ("fails", "beyond the threshold L the normalizer psi(i) grows with the query position, so the target "
                      "offset's input psi(k)/psi(i) drifts to values that nearer offsets had in training"),
}


# Revised after the first run at the defaults on seeds 300-304 (11 of 45 runs disagreed with the verdicts above), before
# any run on the chapter's seeds 400+; only what a run says about generalizing is revised and then tested.
REVISED_VERDICTS: dict[str, tuple[str, str]] = {
    **PREDICTED_VERDICTS,
    "t5": ("fails", "the buckets no training distance reaches keep their init near zero while training pushes the "
                    "reached non-target buckets down, so each far key weighs more than any trained distractor; their "
                    "number grows with the length and the target's mass is diluted below what the readout needs "
                    "(chapter 4's mechanism, with far logits set by the init instead of the carrier). First run: lowest "
                    "out-of-range accuracy 0.20 +- 0.02 in 5 of 5 runs"),
    "partial_rope": ("generalizes", "a function of the offset, and its eight rotated planes suffice: no far offset "
                                    "out-scored the target within 16T. First run: lowest out-of-range accuracy "
                                    "0.975 +- 0.012 in 5 of 5 runs, so the a-priori carrier argument was wrong"),
}


@dataclass(frozen=True)
class Parameters(HeadTraining, LengthSweep, Execution):
    """Chapter 10's parameters."""

    chapter = "10_zoo"
    encodings: tuple[str, ...] = parameter("encodings to train (each gets every offset and seed)", choices=tuple(ZOO))
    rope_base: float = parameter("RoPE base b of the frequencies b^(-2m/d) (rope, partial_rope, randomized)", 2.0, 1e9)
    rotary_fraction: float = parameter("share of each head's coordinates that partial RoPE rotates", 0.01, 1.0)
    alibi_slope: float = parameter("ALiBi's slope (0.5: the steepest head of eight)", 1e-4, 16.0)
    random_span_factor: int = parameter("randomized positions are drawn from 0 .. factor * longest length - 1", 1, 64)

    def check(self) -> None:
        super().check()
        rotated = int(self.dim * self.rotary_fraction)
        if rotated < 2 or rotated % 2:
            raise ParameterError(f"parameter 'rotary_fraction' = {self.rotary_fraction} is out of range: "
                                 f"int(rotary_fraction * dim) = {rotated} must be an even number >= 2")

    def memory_gb(self) -> float:
        return self.workers * (64 * self.longest**2 + 8 * self.eval_batch * (self.longest + 256 * self.vocab)) / GB

    def memory_rule(self) -> str:
        return "workers x (8 logit matrices of longest^2 float64 + the evaluation batch)"


CLAIMS = (
    Claim("relative_by_construction", "largest relative Toeplitz deviation of the float64 logit matrix to the longest "
          "length, over every head of the encodings that are functions of the offset (NoPE, ALiBi, T5, RoPE, partial "
          "RoPE), trained and at init", "<=", 1e-12,
          "Proof check, chapter 1's generalized: each of these logits depends on i - j alone by construction, so the "
          "deviation is float64 rounding whatever was learned.", role="proof"),
    Claim("absolute_seen", "smallest relative Toeplitz deviation of a trained APE or sinusoidal head", ">=",
          ABSOLUTE_FLOOR, "Sanity check that the offset test can see an encoding that is not relative: a trained "
          f"absolute head's logits differ along a diagonal by far more than rounding ({ABSOLUTE_FLOOR} of the "
          "largest logit).", role="sanity"),
    reported("registered_verdicts", "runs (encoding, offset, seed) whose measured verdict differs from the verdict "
             "registered for their encoding before any run (PREDICTED_VERDICTS)",
             revised="Registered as an evidence check (== 0). The first run at the defaults (then seeds 300-304) found "
                     "11 of 45 runs disagreeing: T5 failed in 5 of 5 (registered: generalizes), partial RoPE generalized "
                     "in 5 of 5 (registered: fails) and one FIRE run did not learn (registered: fails). A prediction that "
                     "does not hold is a result: it is reported against the a-priori verdicts, the verdicts were revised "
                     "with their reasons (REVISED_VERDICTS), and the chapter's seeds moved to 400+, never used to revise "
                     "anything, where revised_verdicts tests them."),
    Claim("revised_verdicts", "runs (encoding, offset, seed) on seeds never used to revise the verdicts whose measured "
          "'generalizes or not' differs from REVISED_VERDICTS'", "==", 0,
          f"Evidence: REVISED_VERDICTS were written after a first run on other seeds and before any run on these; a run "
          f"generalizes when its lowest out-of-range accuracy is at least {GENERALIZES_FLOOR} (chapter 1's floor) and "
          f"its in-range accuracy at T at least {LEARNED_FLOOR} (chapter 2's floor). Only generalizing or not is "
          "tested, since that is what was revised: a run that did not learn counts as not generalizing."),
    reported("t5_far_mass", "attention of the last query at the longest length on offsets of at least T (distances no "
             "training sequence has), T5 heads (mean over runs)"),
    reported("fire_threshold", "largest trained FIRE threshold L, in multiples of T (FIRE is relative for i <= L)"),
    reported("generalizing_encodings", "encodings every run of which generalizes"),
)


@dataclass
class ZooStudy:
    """Everything chapter 10 measures."""

    accuracy: pd.DataFrame  # encoding, offset, seed, length, metric, accuracy, n
    deviation: pd.DataFrame  # encoding, offset, seed, trained, deviation; target_mass, far_mass at the longest length
    fire: pd.DataFrame  # offset, seed, c, threshold (FIRE's learned constants)
    verdicts: pd.DataFrame  # encoding, offset, seed, in_range, worst_beyond, measured, predicted, agrees


def run_configs(p: Parameters) -> list[ZooRunConfig]:
    """One run per (encoding, offset, seed)."""
    return [ZooRunConfig(encoding=e, offset=k, seed=s, dim=p.dim, vocab=p.vocab, train_length=p.train_length,
                         steps=p.steps, batch=p.batch, lr=p.lr, device=p.device, rope_base=p.rope_base,
                         max_length=p.longest, rotary_fraction=p.rotary_fraction, alibi_slope=p.alibi_slope,
                         random_span=p.random_span_factor * p.longest)
            for e in p.encodings for k in p.offsets for s in p.seed_list]


@torch.no_grad()
def logit_matrix(head: PositionOnlyHead, length: int) -> torch.Tensor:
    """The float64 logits among the first ``length`` tokens, at the positions the head puts them (a randomized head's
    evaluation draw; ``0 .. length - 1`` otherwise)."""
    h = copy.deepcopy(head).to(torch.float64)
    pos = h.evaluation_positions(length) if isinstance(h, RandomizedRopeHead) else torch.arange(length)
    return h.position_logits(pos, pos)


def relative_deviation(head: PositionOnlyHead, length: int) -> float:
    """Chapter 1's Toeplitz deviation of the head's logits (zero for identically zero logits)."""
    logits = logit_matrix(head, length)
    return toeplitz_deviation(logits) if bool(logits.abs().max() > 0) else 0.0


def measure_run(run: TrainedRun, job: tuple[list[int], int]) -> tuple[pd.DataFrame, list[dict], dict]:
    """In the worker: accuracy against length of the trained head, the offset test trained and at init, and FIRE's
    learned constants."""
    lengths, eval_batch = job
    cfg, head = run.config, run.model
    ids = dict(encoding=cfg.encoding, offset=cfg.offset, seed=cfg.seed)
    sweep = length_sweep(head, cfg, lengths, eval_batch, out_of_range_queries=512).assign(**ids)
    deviation = [dict(**ids, trained=trained, deviation=relative_deviation(h, lengths[-1]))
                 for h, trained in ((head, True), (cfg.build_model(), False))]
    with torch.no_grad():
        last = head.attention(lengths[-1], torch.tensor([lengths[-1] - 1]))[0].flip(0).double()  # index: offset
    deviation[0].update(target_mass=float(last[cfg.offset]), far_mass=float(last[cfg.train_length:].sum()))
    fire = {}
    if isinstance(head, FireHead):
        fire = dict(offset=cfg.offset, seed=cfg.seed, c=float(head.fire.log_c.exp()),
                    threshold=float(head.fire.threshold.abs()) / cfg.train_length)
    return sweep, deviation, fire


def measured_verdict(in_range: float, worst_beyond: float) -> str:
    """Not learned, generalizes or fails, from the in-range accuracy at ``T`` and the lowest out-of-range accuracy."""
    if in_range < LEARNED_FLOOR:
        return "not learned"
    return "generalizes" if worst_beyond >= GENERALIZES_FLOOR else "fails"


def verdict_table(accuracy: pd.DataFrame, train_length: int) -> pd.DataFrame:
    """One row per run: in-range accuracy at ``T``, lowest out-of-range accuracy, the measured verdict, the verdict
    registered before any run and whether they agree, and the revised verdict and whether they agree on generalizing."""
    rows = []
    for (encoding, k, seed), g in accuracy.groupby(["encoding", "offset", "seed"], sort=False):
        in_range = float(g[(g.length == train_length) & (g.metric == "in_range")].accuracy.iloc[0])
        worst = float(g[g.metric == "out_of_range"].accuracy.min())
        measured = measured_verdict(in_range, worst)
        predicted, revised = PREDICTED_VERDICTS[encoding][0], REVISED_VERDICTS[encoding][0]
        rows.append(dict(encoding=encoding, offset=k, seed=seed, in_range=in_range, worst_beyond=worst,
                         measured=measured, predicted=predicted, agrees=measured == predicted, revised=revised,
                         agrees_revised=(measured == "generalizes") == (revised == "generalizes")))
    return pd.DataFrame(rows)


def agreement_table(verdicts: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Per encoding: the registered and revised verdicts, the measured ones, runs agreeing with each, and the exact
    interval of the fraction agreeing with the revised verdict on generalizing."""
    rows = []
    for encoding, g in verdicts.groupby("encoding", sort=False):
        n, agree, revised = len(g), int(g.agrees.sum()), int(g.agrees_revised.sum())
        low, high = binomial_interval(revised, n, confidence)
        rows.append(dict(encoding=encoding, predicted=g.predicted.iloc[0], revised=g.revised.iloc[0],
                         measured=", ".join(sorted(set(g.measured))), runs=n, agree_predicted=agree,
                         agree_revised=revised, ci_low=low, ci_high=high,
                         in_range=g.in_range.mean(), worst_beyond_mean=g.worst_beyond.mean(),
                         worst_beyond_sd=g.worst_beyond.std(ddof=1) if n > 1 else np.nan))
    return pd.DataFrame(rows)


def zoo_study(p: Parameters, progress: bool = True) -> ZooStudy:
    """Train every (encoding, offset, seed) head, then measure accuracy against length and the offset test."""
    lengths = doubling_lengths(p.train_length, p.length_factor)
    configs = run_configs(p)
    results = map_stacked(measure_run, [(cfg, (lengths, p.eval_batch)) for cfg in configs], p.workers, progress)
    sweeps, deviations, fires = zip(*results, strict=True)
    accuracy = pd.concat(sweeps, ignore_index=True)
    return ZooStudy(accuracy, pd.DataFrame([row for rows in deviations for row in rows]),
                    pd.DataFrame([f for f in fires if f], columns=["offset", "seed", "c", "threshold"]),
                    verdict_table(accuracy, p.train_length))
