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

Its committed sweep (``data/sweeps/zoo``) runs the chapter at its defaults on :data:`HELD_OUT_SEEDS` at the default
offset and two others, each offset with seeds of its own (:data:`HELD_OUT_DESIGN`); :func:`held_out_zoo` reads those
runs back (their checks, per-run verdicts and parameters) beside the page's own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..book.parameters import ParameterError, parameter
from ..book.paths import SWEEPS_DIR, notebook_path
from ..book.rerun import default_parameters
from ..book.sweep import stored_records
from ..model.evaluation import doubling_lengths, length_sweep
from ..model.heads import PositionOnlyHead
from ..model.position_zoo import t5_bucket
from ..model.training import TrainedRun
from ..model.xpos import XPOS, XposRunConfig
from ..model.zoo_heads import ZOO, FireHead, RandomizedRopeHead, T5Head, ZooRunConfig
from .committed import SIGNIFICANCE, TOLERATED_FAILURE_RATE, CommittedSweep
from .common import GB, Execution, HeadTraining, LengthSweep, map_stacked
from .equivariance import as_dtype, offset_profile, toeplitz_deviation
from .held_out import HeldOutRuns, held_out_runs
from .stats import binomial_interval, excess_failure_p_value

LEARNED_FLOOR = 0.99  # in-range accuracy at T below which a run has not learned the task (chapter 2's floor)
GENERALIZES_FLOOR = 0.95  # lowest out-of-range accuracy of a run that generalizes (chapter 1's worst_accuracy)
VERDICTS = ("not learned", "generalizes", "fails")
ENCODINGS: dict[str, str] = {**ZOO, "xpos": XPOS}  # the zoo's nine, and xPos (added later, see PREDICTED_VERDICTS)
RELATIVE = ("nope", "alibi", "t5", "rope", "partial_rope", "xpos")  # logits a function of i - j by construction
ABSOLUTE = ("ape", "sinusoidal")  # logits of the positions themselves
ABSOLUTE_FLOOR = 1e-3  # smallest relative Toeplitz deviation the test must see in a trained absolute head
KERNEL_ENCODINGS = ("rope", "xpos")  # the twins of the xPos section: kernels and far attention kept
PREDICTED_XPOS = "xpos, predicted from rope"  # the kernels' label of a RoPE head with xPos's decay applied
FIRE_DRIFT_TOLERANCE = 1.0  # |log2| of the measured over the predicted offset (+1) of FIRE's most-attended key
XPOS_PAIRED_SHARE = 0.8  # share of xPos runs agreeing with the prediction from their RoPE twin (the book's paired bar)
XPOS_MIN_EFFECT = 1.1  # a pair is judged only where the prediction's far attention differs from the twin's by this factor
# The committed sweep, registered with its checks before any of its runs: offset -> the first seeds of its runs, each
# run HELD_OUT_RUN_SEEDS seeds, every offset with seeds of its own (so its heads are independent draws), every other
# parameter at the notebook's defaults. Seeds 640-659 were the first reservation; seed 640 was then used by a 30-step
# smoke test of the reader (offsets 3 and 5), so the reservation moved, before any held-out run, to 660-689.
HELD_OUT_SWEEP = "zoo"
HELD_OUT_DESIGN: dict[int, tuple[int, ...]] = {3: (660, 665), 5: (670, 675), 7: (680, 685)}
HELD_OUT_RUN_SEEDS = 5
HELD_OUT_SEEDS = tuple(range(660, 690))
HELD_OUT_FREE = ("offsets", "seeds", "seed_start", "committed_sweep", "workers", "device")  # may differ from defaults
HELD_OUT_DEVICE = "cpu"  # ... but the device is pinned: a second device would be a second draw of the same seeds
EXPLORED_SEEDS = (*range(600, 605), 640)  # seen outside any record: an xPos rerun (600-604) and the smoke test (640)
HELD_OUT_MIN_JUDGED = 10  # heads a pooled held-out cell needs before it is judged (a third of an encoding's heads)
HELD_OUT_CONFIDENCE = 0.95  # the exact (Clopper-Pearson) interval shown around each held-out share
HELD_OUT_EVIDENCE = ("generalizes_as_revised", "fails_when_learned", "xpos_generalizes", "t5_far_outweigh", "fire_drift",
                     "xpos_far_predicted")  # the chapter's evidence checks, each also read per held-out run
HELD_OUT_MECHANISMS = ("t5_far_outweigh", "fire_drift", "xpos_far_predicted")  # pooled over held-out heads

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
    # Added after every run above, and registered before any xPos head was trained (the chapter's seeds are fresh for it).
    "xpos": ("generalizes", "a function of the offset (RoPE with plane m of the logit multiplied by zeta_m^(D/gamma) "
                            "< 1), so chapter 1's argument holds; inside T the decay barely moves the planes, so the head "
                            "learns its RoPE twin's rule, and beyond T it shrinks each plane toward zero, which keeps the "
                            "target on top wherever the target's logit exceeds the summed decayed amplitudes of the far "
                            "offsets"),
}


# Revised after the first run at the defaults on seeds 300-304, before any run on other seeds: only the verdicts, with
# the mechanism behind each; the first run's numbers are in the claims' revision notes.
REVISED_VERDICTS: dict[str, tuple[str, str]] = {
    **PREDICTED_VERDICTS,
    "t5": ("fails", "the buckets no training distance reaches keep their init near zero while training pushes the "
                    "reached non-target buckets down, so each far key weighs more than any trained distractor; their "
                    "number grows with the length and dilutes the target's mass below what the readout needs "
                    "(chapter 4's mechanism, with the far logits set by the init instead of a carrier)"),
    "partial_rope": ("generalizes", "a function of the offset, and its rotated planes suffice on this head: the a-priori "
                                    "argument that so few planes realign at a far offset was wrong"),
}
REVISION_SEEDS = range(300, 305)  # the first run, from which REVISED_VERDICTS were written
DESIGN_SEEDS = range(400, 405)  # the second run, seen while the checks below were split (see their revision notes)
EXPECT_LEARNED = tuple(e for e, (v, _) in REVISED_VERDICTS.items() if v != "not learned")
LEARNED_MAJORITY = 0.5  # an encoding expected to learn must learn in range in more than this share of its runs


@dataclass(frozen=True)
class Parameters(HeadTraining, LengthSweep, Execution, CommittedSweep):
    """Chapter 10's parameters."""

    chapter = "10_zoo"
    held_out_seeds = HELD_OUT_SEEDS
    encodings: tuple[str, ...] = parameter("encodings to train (each gets every offset and seed)", choices=tuple(ENCODINGS))
    rope_base: float = parameter("RoPE base b of the frequencies b^(-2m/d) (rope, partial_rope, randomized)", 2.0, 1e9)
    rotary_fraction: float = parameter("share of each head's coordinates that partial RoPE rotates", 0.01, 1.0)
    alibi_slope: float = parameter("ALiBi's slope (0.5: the steepest head of eight)", 1e-4, 16.0)
    random_span_factor: int = parameter("randomized positions are drawn from 0 .. factor * longest length - 1", 1, 64)
    xpos_scale_base: float = parameter("xPos's scale base gamma: plane m decays as zeta_m^(D / gamma)", 1.0, 1e9)

    def check(self) -> None:
        super().check()
        if self.committed_sweep not in ("", HELD_OUT_SWEEP):
            raise ParameterError(f"parameter 'committed_sweep' = {self.committed_sweep!r} is out of range: this chapter's "
                                 f"held-out evidence is the sweep registered for it, {HELD_OUT_SWEEP!r} (or '' for none)")
        rotated = int(self.dim * self.rotary_fraction)
        if rotated < 2 or rotated % 2:
            raise ParameterError(f"parameter 'rotary_fraction' = {self.rotary_fraction} is out of range: "
                                 f"int(rotary_fraction * dim) = {rotated} must be an even number >= 2")

    def memory_gb(self) -> float:
        return self.workers * (64 * self.longest**2 + 8 * self.eval_batch * (self.longest + 256 * self.vocab)) / GB

    def memory_rule(self) -> str:
        return "workers x (8 logit matrices of longest^2 float64 + the evaluation batch)"


@dataclass
class ZooStudy:
    """Everything chapter 10 measures."""

    accuracy: pd.DataFrame  # encoding, offset, seed, length, metric, accuracy, n
    deviation: pd.DataFrame  # encoding, offset, seed, trained, deviation; trained rows: attention_diagnostics, t5_margin
    fire: pd.DataFrame  # offset, seed, c, threshold (FIRE's learned constants), drift scores (fire_drift)
    verdicts: pd.DataFrame  # encoding, offset, seed, in_range, worst_beyond, measured, predicted, agrees
    kernels: pd.DataFrame  # encoding, offset, seed, distance, logit: RoPE and xPos heads' logit at every offset
    xpos: pd.DataFrame  # RoPE and xPos runs: far attention trained and at init; RoPE runs: the xPos prediction


def run_configs(p: Parameters) -> list[ZooRunConfig]:
    """One run per (encoding, offset, seed)."""
    def config(encoding: str, offset: int, seed: int) -> ZooRunConfig:
        shared = dict(encoding=encoding, offset=offset, seed=seed, dim=p.dim, vocab=p.vocab,
                      train_length=p.train_length, steps=p.steps, batch=p.batch, lr=p.lr, device=p.device,
                      rope_base=p.rope_base, max_length=p.longest, rotary_fraction=p.rotary_fraction,
                      alibi_slope=p.alibi_slope, random_span=p.random_span_factor * p.longest)
        if encoding == "xpos":
            return XposRunConfig(**shared, xpos_scale_base=p.xpos_scale_base)
        return ZooRunConfig(**shared)

    return [config(e, k, s) for e in p.encodings for k in p.offsets for s in p.seed_list]


@torch.no_grad()
def logit_matrix(head: PositionOnlyHead, length: int) -> torch.Tensor:
    """The float64 logits among the first ``length`` tokens, at the positions the head puts them (a randomized head's
    evaluation draw; ``0 .. length - 1`` otherwise)."""
    h = as_dtype(head, torch.float64)
    pos = h.evaluation_positions(length) if isinstance(h, RandomizedRopeHead) else torch.arange(length)
    return h.position_logits(pos, pos)


def relative_deviation(head: PositionOnlyHead, length: int) -> float:
    """Chapter 1's Toeplitz deviation of the head's logits (zero for identically zero logits)."""
    logits = logit_matrix(head, length)
    return toeplitz_deviation(logits) if bool(logits.abs().max() > 0) else 0.0


def measure_run(run: TrainedRun, job: tuple[list[int], int, float]) -> tuple[pd.DataFrame, list[dict], dict,
                                                                             pd.DataFrame, dict]:
    """In the worker: accuracy against length of the trained head, the offset test trained and at init, FIRE's
    learned constants, and for the RoPE and xPos twins their kernels and far attention (:func:`xpos_measures`)."""
    lengths, eval_batch, xpos_scale_base = job
    cfg, head = run.config, run.model
    ids = dict(encoding=cfg.encoding, offset=cfg.offset, seed=cfg.seed)
    sweep = length_sweep(head, cfg, lengths, eval_batch, out_of_range_queries=512).assign(**ids)
    deviation = [dict(**ids, trained=trained, deviation=relative_deviation(h, lengths[-1]))
                 for h, trained in ((head, True), (cfg.build_model(), False))]
    deviation[0].update(attention_diagnostics(head, cfg.train_length, cfg.offset, lengths[-1]))
    if isinstance(head, T5Head):
        deviation[0].update(t5_margin=t5_far_margin(head, cfg.train_length, cfg.offset, lengths[-1]))
    fire = {}
    if isinstance(head, FireHead):
        fire = dict(offset=cfg.offset, seed=cfg.seed, c=float(head.fire.log_c.detach().exp()),
                    threshold=float(head.fire.threshold.detach().abs()) / cfg.train_length,
                    **fire_drift(head, cfg.train_length, cfg.offset, lengths[-1]))
    kernel, xpos = pd.DataFrame(), {}
    if cfg.encoding in KERNEL_ENCODINGS:
        kernel, xpos = xpos_measures(cfg, head, lengths, eval_batch, xpos_scale_base)
    return sweep, deviation, fire, kernel, xpos


def xpos_twin(cfg: ZooRunConfig, head: PositionOnlyHead, scale_base: float) -> PositionOnlyHead:
    """A RoPE run's head with xPos's decay applied (its parameters in an xPos head of scale base ``scale_base``): the
    prediction, from a head trained at the training length only, for the xPos run of the same seed."""
    twin = XposRunConfig(**{**cfg.as_dict(), "encoding": "xpos", "xpos_scale_base": scale_base}).build_model()
    missing, unexpected = twin.load_state_dict(head.state_dict(), strict=False)
    if list(missing) != ["log_zeta"] or unexpected:  # xPos adds only its decay buffer
        raise ValueError(f"a RoPE head's state does not fit an xPos head: missing {missing}, unexpected {unexpected}")
    return twin.to(head.device)


def offset_kernel(label: str, cfg: ZooRunConfig, head: PositionOnlyHead, length: int) -> pd.DataFrame:
    """The float64 logit at every offset ``0 .. length - 1`` of a rotary head, one row per offset."""
    logits = offset_profile(head, length).numpy()
    return pd.DataFrame(dict(encoding=label, offset=cfg.offset, seed=cfg.seed, distance=np.arange(length), logit=logits))


def query_key(head: PositionOnlyHead) -> list[float]:
    """A rotary head's query and key vectors, concatenated (float64, as a list): what the twins learn."""
    return torch.cat([head.q.detach(), head.k.detach()]).double().cpu().tolist()


def xpos_measures(cfg: ZooRunConfig, head: PositionOnlyHead, lengths: list[int], eval_batch: int,
                  scale_base: float) -> tuple[pd.DataFrame, dict]:
    """For a RoPE or xPos run: its kernel, its far attention (:func:`far_attention`) trained and at init, and for a
    RoPE run also the kernel, far attention and lowest out-of-range accuracy of :func:`xpos_twin` (the prediction)."""
    T, longest = cfg.train_length, lengths[-1]
    kernels = [offset_kernel(cfg.encoding, cfg, head, longest)]
    init = cfg.build_model().to(head.device)
    row = dict(encoding=cfg.encoding, offset=cfg.offset, seed=cfg.seed, far=far_attention(head, T, longest),
               far_init=far_attention(init, T, longest), qk=query_key(head), qk_init=query_key(init))
    if cfg.encoding == "rope":
        predicted = xpos_twin(cfg, head, scale_base)
        sweep = length_sweep(predicted, cfg, lengths, eval_batch, out_of_range_queries=512)
        row.update(far_predicted=far_attention(predicted, T, longest),
                   worst_predicted=float(sweep[sweep.metric == "out_of_range"].accuracy.min()))
        kernels.append(offset_kernel(PREDICTED_XPOS, cfg, predicted, longest))
    return pd.concat(kernels, ignore_index=True), row


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


def measured_verdict(in_range: float, worst_beyond: float) -> str:
    """Not learned, generalizes or fails, from the in-range accuracy at ``T`` and the lowest out-of-range accuracy."""
    if in_range < LEARNED_FLOOR:
        return "not learned"
    return "generalizes" if worst_beyond >= GENERALIZES_FLOOR else "fails"


def verdict_table(accuracy: pd.DataFrame, train_length: int) -> pd.DataFrame:
    """One row per run: in-range accuracy at ``T``, lowest out-of-range accuracy, the measured verdict, the verdict
    registered before any run and whether they agree, the revised verdict and whether they agree."""
    rows = []
    for (encoding, k, seed), g in accuracy.groupby(["encoding", "offset", "seed"], sort=False):
        in_range = float(g[(g.length == train_length) & (g.metric == "in_range")].accuracy.iloc[0])
        worst = float(g[g.metric == "out_of_range"].accuracy.min())
        measured = measured_verdict(in_range, worst)
        predicted, revised = PREDICTED_VERDICTS[encoding][0], REVISED_VERDICTS[encoding][0]
        rows.append(dict(encoding=encoding, offset=k, seed=seed, in_range=in_range, worst_beyond=worst,
                         measured=measured, predicted=predicted, agrees=measured == predicted, revised=revised,
                         learned=measured != "not learned", agrees_revised=measured == revised))
    return pd.DataFrame(rows)


def agreement_table(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Per encoding: the a-priori and revised verdicts, the measured ones, and runs agreeing with each; the runs that
    learned in range; the in-range accuracy and the lowest out-of-range accuracy (mean and sd over runs)."""
    rows = []
    for encoding, g in verdicts.groupby("encoding", sort=False):
        rows.append(dict(encoding=encoding, predicted=g.predicted.iloc[0], revised=g.revised.iloc[0],
                         measured=", ".join(sorted(set(g.measured))), runs=len(g), agree_predicted=int(g.agrees.sum()),
                         agree_revised=int(g.agrees_revised.sum()), learned=int(g.learned.sum()),
                         in_range=g.in_range.mean(), worst_beyond_mean=g.worst_beyond.mean(),
                         worst_beyond_sd=g.worst_beyond.std(ddof=1) if len(g) > 1 else np.nan))
    return pd.DataFrame(rows)


def revised_checks(verdicts: pd.DataFrame, deviation: pd.DataFrame, seeds: list[int]) -> dict[str, float]:
    """The values of the checks on the revised verdicts (see ``CLAIMS``), from the runs' verdicts and measurements."""
    generalizing = verdicts[(verdicts.revised == "generalizes") & verdicts.encoding.isin(("rope", "partial_rope"))]
    failing = verdicts[verdicts.revised == "fails"]
    unlearnable = verdicts[verdicts.revised == "not learned"]
    learn_share = verdicts[verdicts.encoding.isin(EXPECT_LEARNED)].groupby("encoding").learned.mean()
    margins = deviation[deviation.trained & (deviation.encoding == "t5")]
    margins = margins.t5_margin if "t5_margin" in margins else pd.Series(dtype=float)
    seen = set(REVISION_SEEDS) | set(DESIGN_SEEDS)
    return dict(fresh_seeds=float(len(set(seeds) & seen)),
                generalizes_as_revised=float((generalizing.measured != "generalizes").sum()),
                fails_when_learned=float((failing.learned & (failing.measured == "generalizes")).sum()),
                learned_majority=float((learn_share <= LEARNED_MAJORITY).sum()),
                not_learnable=float(unlearnable.learned.sum()),
                t5_far_outweigh=float((~(margins > 0)).sum()))


XPOS_PAIR_COLUMNS = ["offset", "seed", "measured", "worst_beyond", "judged", "far", "rope_far", "far_predicted",
                     "worst_predicted", "far_init", "rope_far_init", "parameter_gap"]


def xpos_pairs(verdicts: pd.DataFrame, xpos: pd.DataFrame) -> pd.DataFrame:
    """One row per xPos run: its verdict and lowest out-of-range accuracy; whether it is judged against its RoPE twin
    (same offset and seed; both learned in range, and the prediction differs from the twin by more than
    :data:`XPOS_MIN_EFFECT`); both twins' far attention, trained and at init; the prediction from the RoPE twin
    (:func:`xpos_twin`): far attention and lowest out-of-range accuracy; and the parameter gap (NaN without a twin)."""
    learned = verdicts.set_index(["encoding", "offset", "seed"]).learned
    measures = xpos.set_index(["encoding", "offset", "seed"])
    rows = []
    for run in verdicts[verdicts.encoding == "xpos"].itertuples():
        own, twin = measures.loc[("xpos", run.offset, run.seed)], ("rope", run.offset, run.seed)
        rope = measures.loc[twin] if twin in measures.index else None
        effect = abs(math.log(rope.far_predicted / rope.far)) if rope is not None and rope.far > 0 and \
            rope.far_predicted > 0 else 0.0
        gap = math.nan
        if rope is not None:
            qk_x, qk_r, qk_0 = (np.asarray(v, dtype=float) for v in (own.qk, rope.qk, rope.qk_init))
            gap = float(np.linalg.norm(qk_x - qk_r) / np.linalg.norm(qk_r - qk_0))
        rows.append(dict(offset=run.offset, seed=run.seed, measured=run.measured, worst_beyond=run.worst_beyond,
                         judged=bool(run.learned and rope is not None and learned.get(twin, False)
                                     and effect > math.log(XPOS_MIN_EFFECT) and own.far > 0), far=own.far,
                         rope_far=math.nan if rope is None else rope.far,
                         far_predicted=math.nan if rope is None else rope.far_predicted,
                         worst_predicted=math.nan if rope is None else rope.worst_predicted, far_init=own.far_init,
                         rope_far_init=math.nan if rope is None else rope.far_init, parameter_gap=gap))
    return pd.DataFrame(rows, columns=XPOS_PAIR_COLUMNS)


def xpos_checks(pairs: pd.DataFrame) -> dict[str, float]:
    """The xPos check and reported numbers (see ``CLAIMS``) from :func:`xpos_pairs`; every share but the check's is
    over the judged pairs."""
    nothing = dict(xpos_generalizes=0.0, xpos_far_predicted=1.0, xpos_parameter_gap=math.nan,
                   xpos_lower_share=math.nan, xpos_lower_at_init=math.nan, xpos_predicted_lower=math.nan)
    if not len(pairs):
        return nothing
    judged = pairs[pairs.judged.astype(bool)]
    to_prediction = np.abs(np.log(judged.far / judged.far_predicted))
    to_twin = np.abs(np.log(judged.far / judged.rope_far))
    values = dict(xpos_generalizes=float((pairs.measured != "generalizes").sum()),
                  xpos_far_predicted=float((to_prediction < to_twin).sum() / len(pairs)))
    if not len(judged):
        return nothing | values
    return values | dict(xpos_parameter_gap=float(judged.parameter_gap.mean()),
                         xpos_lower_share=float((judged.far < judged.rope_far).mean()),
                         xpos_lower_at_init=float((judged.far_init < judged.rope_far_init).mean()),
                         xpos_predicted_lower=float((judged.far_predicted < judged.rope_far).mean()))


def zoo_study(p: Parameters, progress: bool = True) -> ZooStudy:
    """Train every (encoding, offset, seed) head, then measure accuracy against length and the offset test."""
    lengths = doubling_lengths(p.train_length, p.length_factor)
    configs = run_configs(p)
    jobs = [(cfg, (lengths, p.eval_batch, p.xpos_scale_base)) for cfg in configs]
    sweeps, deviations, fires, kernels, xpos = zip(*map_stacked(measure_run, jobs, p.workers, progress), strict=True)
    accuracy = pd.concat(sweeps, ignore_index=True)
    kernel_columns = ["encoding", "offset", "seed", "distance", "logit"]
    return ZooStudy(accuracy, pd.DataFrame([row for rows in deviations for row in rows]),
                    pd.DataFrame([f for f in fires if f], columns=["offset", "seed", "c", "threshold", "drift_error",
                                                                   "no_drift_error", "fraction_error"]),
                    verdict_table(accuracy, p.train_length),
                    pd.concat([k for k in kernels if len(k)], ignore_index=True) if any(len(k) for k in kernels)
                    else pd.DataFrame(columns=kernel_columns),
                    pd.DataFrame([x for x in xpos if x], columns=["encoding", "offset", "seed", "far", "far_init", "qk",
                                                                  "qk_init", "far_predicted", "worst_predicted"]))


def record_details(study: ZooStudy) -> dict[str, list[dict]]:
    """What the chapter's record carries beyond its checks, so that the committed sweep keeps every head's verdict,
    T5 margin, FIRE drift and xPos pair (the held-out section pools them over heads)."""
    t5 = study.deviation[study.deviation.trained & (study.deviation.encoding == "t5")]
    t5 = t5[["offset", "seed", "t5_margin"]] if len(t5) else pd.DataFrame(columns=["offset", "seed", "t5_margin"])
    trained = study.deviation[study.deviation.trained]
    diagnostics = trained[["encoding", "offset", "seed", *DIAGNOSTIC_COLUMNS]] if len(trained) else \
        pd.DataFrame(columns=["encoding", "offset", "seed", *DIAGNOSTIC_COLUMNS])
    return dict(verdicts=study.verdicts.to_dict("records"), t5=t5.to_dict("records"), fire=study.fire.to_dict("records"),
                xpos_pairs=xpos_pairs(study.verdicts, study.xpos).to_dict("records"),
                diagnostics=diagnostics.to_dict("records"))


@dataclass
class HeldOutZoo:
    """The committed sweep's current runs of this chapter: their checks, per-head details and parameters."""

    runs: HeldOutRuns  # checks of every present run, and how many the spec lists and miss
    verdicts: pd.DataFrame  # one row per (encoding, offset, seed) of the present runs: verdict_table's columns
    t5: pd.DataFrame  # one row per T5 head: offset, seed, t5_margin
    fire: pd.DataFrame  # one row per FIRE head: ZooStudy.fire's columns
    xpos: pd.DataFrame  # one row per xPos head: xpos_pairs' columns
    diagnostics: pd.DataFrame  # one row per trained head: encoding, offset, seed and attention_diagnostics' numbers
    parameters: list[dict]  # each present run's full parameters
    wall_times: list[float]  # seconds of each present run


def held_out_zoo(name: str) -> HeldOutZoo | None:
    """Read the committed sweep ``data/sweeps/<name>`` (None for ``""``): every current run's checks and details."""
    if not name:
        return None
    runs = held_out_runs(name, Parameters.chapter)
    keys = set(runs.checks.key) if len(runs.checks) else set()
    records = list(stored_records(SWEEPS_DIR / name, keys))

    def rows(part: str, columns: list[str] | None = None) -> pd.DataFrame:
        return pd.DataFrame([row for r in records for row in r["details"][part]], columns=columns)

    return HeldOutZoo(runs, rows("verdicts"), rows("t5", ["offset", "seed", "t5_margin"]),
                      rows("fire", ["offset", "seed", "c", "threshold", "drift_error", "no_drift_error",
                                    "fraction_error"]),
                      rows("xpos_pairs", XPOS_PAIR_COLUMNS),
                      rows("diagnostics", ["encoding", "offset", "seed", *DIAGNOSTIC_COLUMNS]),
                      [r["parameters"] for r in records],
                      [float(r["wall_time_s"] or 0.0) for r in records])


def design_violations(held: HeldOutZoo, defaults: dict) -> int:
    """Runs of ``held`` away from :data:`HELD_OUT_DESIGN` (an offset's seeds not its own, a head another run has too,
    a device other than :data:`HELD_OUT_DEVICE`, a parameter outside :data:`HELD_OUT_FREE` away from ``defaults``),
    plus the design's (offset, seed) heads that no run has."""
    design = {(k, seed) for k, starts in HELD_OUT_DESIGN.items() for start in starts
              for seed in range(start, start + HELD_OUT_RUN_SEEDS)}
    bad, seen = 0, set()
    for run in held.parameters:
        heads = {(k, seed) for k in run["offsets"] for seed in range(run["seed_start"], run["seed_start"] + run["seeds"])}
        moved = any(run[name] != value for name, value in defaults.items() if name not in HELD_OUT_FREE)
        bad += int(moved or not heads <= design or bool(heads & seen) or run["seeds"] != HELD_OUT_RUN_SEEDS
                   or run["device"] != HELD_OUT_DEVICE)
        seen |= heads
    return bad + len(design - seen)


def pooled_cell(misses: int, judged: int, needed: int) -> tuple[float, bool]:
    """The held-out rule on one pooled cell: the exact one-sided binomial p-value of ``misses`` in ``judged`` at
    :data:`TOLERATED_FAILURE_RATE` (NaN when nothing is judged), and whether the cell holds (p at least
    :data:`SIGNIFICANCE` over at least ``needed`` judged heads)."""
    p_value = excess_failure_p_value(misses, judged, TOLERATED_FAILURE_RATE) if judged else math.nan
    return p_value, bool(judged >= needed and p_value >= SIGNIFICANCE)


def held_out_cells(verdicts: pd.DataFrame, needed: int = HELD_OUT_MIN_JUDGED) -> pd.DataFrame:
    """Per encoding over the held-out heads: the revised verdict, heads, heads learned, heads generalizing; among the
    learned heads, those whose verdict is the revised one, their share and its exact interval
    (:data:`HELD_OUT_CONFIDENCE`); and the pooled test of ``held_out_verdicts`` (encodings expected to learn only):
    heads judged, misses, the one-sided binomial p-value, and whether the cell holds (over at least ``needed``)."""
    rows = []
    for encoding, g in verdicts.groupby("encoding", sort=False):
        learned = g[g.learned.astype(bool)]
        agree = int(learned.agrees_revised.astype(bool).sum())
        low, high = binomial_interval(agree, len(learned), HELD_OUT_CONFIDENCE) if len(learned) else (math.nan,) * 2
        revised = g.revised.iloc[0]
        judged = g if revised == "generalizes" else learned
        misses = int((judged.measured != revised).sum())
        tested = encoding in EXPECT_LEARNED
        p_value, holds = pooled_cell(misses, len(judged), needed)
        rows.append(dict(encoding=encoding, revised=revised, heads=len(g), learned=len(learned),
                         generalizes=int((g.measured == "generalizes").sum()), agree=agree,
                         share=agree / len(learned) if len(learned) else math.nan, low=low, high=high,
                         judged=len(judged) if tested else 0, misses=misses if tested else 0,
                         p_value=p_value if tested else math.nan, holds=holds if tested else None,
                         worst_beyond=float(learned.worst_beyond.mean()) if len(learned) else math.nan))
    return pd.DataFrame(rows, columns=["encoding", "revised", "heads", "learned", "generalizes", "agree", "share", "low",
                                       "high", "judged", "misses", "p_value", "holds", "worst_beyond"])


def held_out_mechanism_table(held: HeldOutZoo) -> pd.DataFrame:
    """The pooled mechanism checks of ``held_out_mechanisms``, one row each: heads judged, misses, the p-value (T5,
    FIRE) or the share closer to the prediction (xPos), and whether it holds."""
    learned = held.verdicts.set_index(["encoding", "offset", "seed"]).learned.astype(bool)
    t5_miss = int((~(held.t5.t5_margin.astype(float) > 0)).sum())
    fire = held.fire[[bool(learned.get(("fire", o, s), False)) for o, s in zip(held.fire.offset, held.fire.seed,
                                                                                  strict=True)]]
    fire_miss = int((~(fire.drift_error.astype(float) <= FIRE_DRIFT_TOLERANCE)).sum())
    share = xpos_checks(held.xpos)["xpos_far_predicted"] if len(held.xpos) else math.nan
    rows = [dict(mechanism=name, judged=n, misses=miss, statistic=p_value, holds=holds)
            for name, miss, n in (("t5_far_outweigh", t5_miss, len(held.t5)), ("fire_drift", fire_miss, len(fire)))
            for p_value, holds in [pooled_cell(miss, n, HELD_OUT_MIN_JUDGED)]]
    closer = round(share * len(held.xpos)) if len(held.xpos) else 0
    rows.append(dict(mechanism="xpos_far_predicted", judged=len(held.xpos), misses=len(held.xpos) - closer,
                     statistic=share, holds=bool(len(held.xpos) >= HELD_OUT_MIN_JUDGED and share >= XPOS_PAIRED_SHARE)))
    return pd.DataFrame(rows, columns=["mechanism", "judged", "misses", "statistic", "holds"])


def offset_cells(verdicts: pd.DataFrame) -> int:
    """(encoding, offset) cells of the encodings expected to learn whose misses fail held_out_verdicts' binomial rule
    on their own heads (no minimum of judged heads; a cell with none judged fails)."""
    failing = 0
    for _, g in verdicts[verdicts.encoding.isin(EXPECT_LEARNED)].groupby("offset"):
        cells = held_out_cells(g, needed=1)
        failing += int((~cells.holds.astype(bool)).sum())
    return failing


def failing_argmax(held: HeldOutZoo, encoding: str) -> float:
    """Mean over the held-out heads of ``encoding`` that learned and fail of the share of out-of-range diagnostic
    queries whose most-attended key is the target (NaN when none fails)."""
    verdicts = held.verdicts[(held.verdicts.encoding == encoding) & (held.verdicts.measured == "fails")]
    heads = set(zip(verdicts.offset, verdicts.seed, strict=True))
    diagnostics = held.diagnostics
    chosen = [e == encoding and (o, s) in heads
              for e, o, s in zip(diagnostics.encoding, diagnostics.offset, diagnostics.seed, strict=True)]
    rows = diagnostics[np.asarray(chosen, dtype=bool)]
    return float(rows.argmax_target.mean()) if len(rows) else math.nan


def held_out_values(held: HeldOutZoo | None, defaults: dict | None = None) -> dict[str, float]:
    """The held-out claims' values (see ``CLAIMS``): NaN, a failure for the asserted ones, without a sweep or runs.
    ``defaults``: the parameters the design's runs must keep (the notebook's parameters cell when None)."""
    nothing = dict(held_out_design=math.nan, held_out_verdicts=math.nan, held_out_mechanisms=math.nan,
                   held_out_run_failures=math.nan, held_out_offset_cells=math.nan, held_out_partial_argmax=math.nan,
                   held_out_other_failures=math.nan,
                   held_out_agreement=math.nan, held_out_predicted_disagreements=math.nan)
    if held is None:
        return dict(held_out_complete=0.0) | nothing
    checks = held.runs.checks
    if not len(checks) or not len(held.verdicts):
        return dict(held_out_complete=float(held.runs.missing)) | nothing
    defaults = default_parameters(notebook_path(Parameters.chapter)) if defaults is None else defaults
    passing = {key: set(run.name[run.passed.map(lambda v: v is True)]) for key, run in checks.groupby("key")}
    guards = checks[checks.role.isin(("proof", "sanity")) & ~checks.name.str.startswith("held_out")]
    cells = held_out_cells(held.verdicts)
    cells = cells[cells.encoding.isin(EXPECT_LEARNED)]
    missing_cells = set(EXPECT_LEARNED) - set(cells.encoding)
    judged = held.verdicts[held.verdicts.encoding.isin(EXPECT_LEARNED) & held.verdicts.learned.astype(bool)]
    return dict(held_out_complete=float(held.runs.missing), held_out_design=float(design_violations(held, defaults)),
                held_out_verdicts=float((~cells.holds.astype(bool)).sum() + len(missing_cells)),
                held_out_mechanisms=float((~held_out_mechanism_table(held).holds.astype(bool)).sum()),
                held_out_run_failures=float(sum(not set(HELD_OUT_EVIDENCE) <= names for names in passing.values())),
                held_out_offset_cells=float(offset_cells(held.verdicts)),
                held_out_partial_argmax=failing_argmax(held, "partial_rope"),
                held_out_other_failures=float(guards.passed.map(lambda v: v is False).sum()),
                held_out_agreement=float(judged.agrees_revised.astype(bool).mean()) if len(judged) else math.nan,
                held_out_predicted_disagreements=float((~held.verdicts.agrees.astype(bool)).sum()))
