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

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ...analysis.kernels import as_dtype, offset_profile, toeplitz_deviation
from ...book.parameters import ParameterError, parameter
from ...model.evaluation import doubling_lengths, length_sweep
from ...model.heads import PositionOnlyHead
from ...model.training import TrainedRun
from ...model.xpos import XposRunConfig
from ...model.zoo_heads import FireHead, RandomizedRopeHead, T5Head, ZooRunConfig
from ..committed import CommittedSweep
from ..common import GB, Execution, HeadTraining, LengthSweep, map_stacked
from .mechanisms import DIAGNOSTIC_COLUMNS, attention_diagnostics, far_attention, fire_drift, t5_far_margin
from .registered import (
    ABSOLUTE,
    CHAPTER,
    ENCODINGS,
    HELD_OUT_SEEDS,
    HELD_OUT_SWEEP,
    KERNEL_ENCODINGS,
    PREDICTED_XPOS,
    RELATIVE,
)
from .verdicts import agreement_table, revised_checks, verdict_table, xpos_checks, xpos_pairs


@dataclass(frozen=True)
class Parameters(HeadTraining, LengthSweep, Execution, CommittedSweep):
    """Chapter 10's parameters."""

    chapter = CHAPTER
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




HELD_OUT_CHECKS = ("held_out_complete", "held_out_design", "held_out_mechanisms", "held_out_verdicts",
                   "held_out_run_failures", "held_out_offset_cells", "held_out_partial_argmax", "held_out_other_failures",
                   "held_out_agreement", "held_out_predicted_disagreements")


def claim_values(study: ZooStudy, p: Parameters, held_values: dict[str, float]) -> dict[str, object]:
    """Every claim's value from the study and the committed sweep's held-out values."""
    deviation, verdicts, fire = study.deviation, study.verdicts, study.fire
    relative = deviation[deviation.encoding.isin(RELATIVE)]
    absolute = deviation[deviation.encoding.isin(ABSOLUTE) & deviation.trained]
    masses = deviation[deviation.trained].groupby("encoding")[["far_mass", "argmax_target"]].mean()
    agreement = agreement_table(verdicts)
    t5 = masses.loc["t5"] if "t5" in masses.index else pd.Series(dict(far_mass=np.nan, argmax_target=np.nan))
    return dict(
        relative_by_construction=float(relative.deviation.max()) if len(relative) else 0.0,
        absolute_seen=float(absolute.deviation.min()) if len(absolute) else float("inf"),
        registered_verdicts=len(verdicts[~verdicts.agrees]),
        **revised_checks(verdicts, deviation, list(p.seed_list)),
        t5_far_mass=float(t5.far_mass), t5_argmax_target=float(t5.argmax_target),
        fire_drift=float(fire.drift_error.max(skipna=False)) if len(fire) else 0.0,
        fire_fraction_error=float(fire.fraction_error.max()) if len(fire) else float("nan"),
        fire_no_drift_error=float(fire.no_drift_error.min()) if len(fire) else float("nan"),
        fire_threshold=float(fire.threshold.max()) if len(fire) else float("nan"),
        generalizing_encodings=len(agreement[agreement.measured == "generalizes"]),
        **xpos_checks(xpos_pairs(verdicts, study.xpos)),
        **{name: held_values[name] for name in HELD_OUT_CHECKS})
