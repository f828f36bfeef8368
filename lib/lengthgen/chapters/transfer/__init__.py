"""Chapter 6 (``06_transfer``): the single-head phenomena inside a small transformer.

For every trained network this module measures

* accuracy against length (:func:`lengthgen.model.evaluation.length_sweep`);
* **equivariance**: the same token window fed at position 0 and at position ``P``
  gives the same attention logits in every layer and head (RoPE, NoPE) or not (APE);
* **APE rows**: table rows at positions ``>= T`` compared bitwise with their initialization;
* **retrieval heads**: the heads that put most of their mass on offset ``k`` in range;
* **the kernel** of each head: its logit averaged over content at every offset
  (``kappa(D)``), and the plane decomposition of its mean query and key vectors, read
  as in chapter 3 (peak, phase coherence against a random-phase null);
* **hijacking**: the first offset beyond ``T`` whose kernel exceeds the kernel at the
  target. Once a sequence is long enough to contain it, the retrieval head's softmax
  mass moves there and the prediction fails;
* **the masking test** of that account: at the length where a network's last position collapses,
  offsets are taken out of its retrieval heads' view (logit ``-inf``) and the accuracy measured
  again: the hijacking offsets read from the measured kernel, the offsets where the kernel of the
  mean query and key (training-length quantities only) beats the target, and controls.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ...analysis.carrier import coherence, null_coherence
from ...analysis.held_out import CommittedRuns
from ...analysis.network_probes import EVAL_SEQUENCE_CHUNK, content_averaged_kernels, head_target_mass, mean_query_key
from ...analysis.planes import planes_from_vectors, wrap
from ...book.parameters import ParameterError, parameter
from ...model.encodings import identifiable_base, rope_frequencies
from ...model.evaluation import doubling_lengths, length_sweep
from ...model.seeding import derive_seed, generator
from ...model.tasks import task_batch
from ...model.training import TrainedRun
from ...model.transformer import NetworkRunConfig, TransformerConfig
from ..committed import CommittedSweep
from ..common import GB, Execution, LengthSweep, Network, Optimizer, RetrievalProbes, Task, map_stacked, power_of_two_at_least
from .carrier_test import (
    POOLED,
    carrier_power_curve,
    carrier_rank_test,
    carrier_values,
    network_ids,
    network_pooled,
    rotary_fit_r2,
    seen_directions,
)
from .masking import first_collapse, last_query_masses, masking_test
from .registered import (
    CARRIER_LEVEL,
    COHERENCE_QUANTILE,
    HELD_OUT_SEEDS,
    IDENTIFIABLE,
    IDENTIFIABLE_TURNS,
    MASK_CONDITIONS,
    MASKING_CHECKS,
    MEASURABLE_RADIANS,
    TURNING_ONLY,
)


def identifiable_planes(freqs: np.ndarray, train_length: int) -> np.ndarray:
    """Which planes are identifiable, the book's one definition: a plane is identifiable when it turns at least
    ``IDENTIFIABLE_TURNS`` full circle within the training length, ``theta_m T >= 2 pi`` (up to rounding): training then
    shows it every phase it will ever take. The identifiable base makes every plane so. A weaker notion, a phase that
    is *measurable* within ``T`` (``theta_m T > MEASURABLE_RADIANS``), is what the coherence test needs."""
    return np.asarray(freqs) * train_length >= 2 * math.pi * IDENTIFIABLE_TURNS * (1 - 1e-9)


@dataclass(frozen=True)
class Parameters(CommittedSweep, Network, RetrievalProbes, Optimizer, Task, LengthSweep, Execution):
    """Chapter 6's parameters."""

    chapter = "06_transfer"
    held_out_seeds = HELD_OUT_SEEDS
    null_draws: int = parameter("random-phase kernels drawn for the coherence null", 100, 1_000_000)
    mask_batch: int = parameter("sequences per condition (unmasked, hijackers masked, controls) in the masking test",
                                16, 65_536)

    def check(self) -> None:
        super().check()
        power_of_two_at_least("length_factor", self.length_factor, 4, "the chapter compares networks at 2T and 4T")
        if self.train_length < 2 * math.pi * IDENTIFIABLE_TURNS:
            raise ParameterError(f"parameter 'train_length' = {self.train_length} is out of range: even the fastest rotary "
                                 f"plane (one radian per token) must turn a full circle within T for the turning-planes "
                                 f"network; must be in [{math.ceil(2 * math.pi * IDENTIFIABLE_TURNS)}, 1024]")
        base_floor = 2.0
        head_dim = self.dim // self.heads
        most = self.train_length / (2 * math.pi * base_floor ** ((head_dim - 2) / head_dim))
        if self.fixed_turns > most:
            raise ParameterError(f"parameter 'fixed_turns' = {self.fixed_turns} is out of range: with train_length = "
                                 f"{self.train_length} and head size {head_dim} the identifiable base would fall below "
                                 f"{base_floor:g}; must be in [0.1, {most:.3g}]")

    def memory_gb(self) -> float:
        attention = 12 * self.layers * self.heads * self.longest**2  # logits, softmax and a diagonal copy, float32
        return self.workers * max(self.kernel_batch, EVAL_SEQUENCE_CHUNK, 4) * attention / GB

    def memory_rule(self) -> str:
        return ("per worker: 12 bytes x layers x heads x longest length^2 for every sequence whose attention "
                "logits are read at once (kernel_batch, or 16 when scoring)")


@torch.no_grad()
def shift_deviation(run: TrainedRun, start: int, dtype: torch.dtype, batch: int = 4) -> float:
    """Largest |logit(window at ``start``) - logit(window at 0)| over layers and heads, relative to the largest logit."""
    model = copy.deepcopy(run.model).to(dtype)
    cfg = run.config
    tokens, _ = task_batch(cfg.task, batch, cfg.train_length, cfg.vocab, cfg.offset, generator(cfg.seed, "shift-test"))
    tokens = tokens.to(model.device)
    base = model.attention_logits(tokens, 0)
    moved = model.attention_logits(tokens, start)
    worst, scale = 0.0, 0.0
    for a, b in zip(base, moved, strict=True):
        a, b = a.cpu(), b.cpu()
        finite = torch.isfinite(a)
        worst = max(worst, float((a[finite] - b[finite]).abs().max()))
        scale = max(scale, float(a[finite].abs().max()))
    return worst / scale


def ape_rows_untouched(run: TrainedRun) -> bool:
    """Whether every APE row at a position ``>= T`` is bitwise equal to its initial value."""
    T = run.config.train_length
    return bool(torch.equal(run.model.position[T:].detach().cpu(), run.initial_state["position"][T:].cpu()))


def analyse_rope_run(run: TrainedRun, p: Parameters, rng: np.random.Generator) -> tuple[list[dict], pd.DataFrame]:
    """Per retrieval head: kernel peak, plane coherence, carrier bound, and the first hijacking offset."""
    cfg = run.config
    T, k = cfg.train_length, cfg.offset
    longest = p.length_factor * T
    mass = head_target_mass(run, T, p.eval_batch)
    kernels = content_averaged_kernels(run, longest, p.kernel_batch)
    freqs = run.model.freqs.cpu()
    rows, profiles = [], []
    for layer, head in zip(*np.nonzero(mass >= p.retrieval_mass), strict=True):
        kappa = kernels[layer, head]
        q, kv = mean_query_key(run, layer, head, p.eval_batch)
        planes = planes_from_vectors(q, kv, freqs)
        measurable = planes.freqs * T > MEASURABLE_RADIANS
        err = wrap(planes.phase + planes.freqs * k)
        w = planes.amplitude[measurable]
        null = null_coherence(w, p.null_draws, rng)
        above = np.nonzero(kappa[T:] > kappa[k])[0]
        fit_r2 = rotary_fit_r2(kappa, planes.freqs)
        carrier = (carrier_rank_test(kappa[:T], planes.freqs, k, rng) if run.config.model.rope_planes is None
                   else {})  # the turning-planes ablation has no rotation in most planes: no carrier to test
        rows.append(dict(fit_r2=fit_r2, **carrier,
            layer=int(layer), head=int(head), mass_in_range=float(mass[layer, head]),
            kernel_argmax=int(kappa[:T].argmax()), mean_kernel_argmax=int(planes.profile(np.arange(T)).argmax()),
            coherence=coherence(w, err[measurable]), null_q999=float(np.quantile(null, COHERENCE_QUANTILE)),
            n_measurable=int(measurable.sum()),
            kernel_at_k=float(kappa[k]), far_max=float(kappa[T:].max()), far_argmax=int(T + kappa[T:].argmax()),
            first_hijack=int(T + above[0]) if len(above) else -1,
            amplitude_sum=float(planes.amplitude.sum()), mean_kernel_at_k=float(planes.profile(np.array([k]))[0]),
        ))
        profiles.append(pd.DataFrame(dict(layer=int(layer), head=int(head), delta=np.arange(longest), kernel=kappa,
                                          predicted=planes.profile(np.arange(longest)))))
    return rows, pd.concat(profiles, ignore_index=True) if profiles else pd.DataFrame()


def measure_network(run: TrainedRun, job: tuple[str, Parameters]) -> dict:
    """In the worker, after training: measure everything the chapter needs of one network (``job``: its label, the parameters)."""
    label, p = job
    cfg = run.config
    lengths = doubling_lengths(cfg.train_length, p.length_factor)
    sweep = length_sweep(run.model, cfg, lengths, p.eval_batch, sequence_chunk=EVAL_SEQUENCE_CHUNK).assign(
        label=label, task=cfg.task, offset=cfg.offset, seed=cfg.seed)
    out = dict(label=label, task=cfg.task, offset=cfg.offset, seed=cfg.seed, sweep=sweep,
               final_loss=float(np.mean(run.losses[-50:])))
    longest = lengths[-1]
    shift_start = longest - cfg.train_length
    out["shift_f64"] = shift_deviation(run, shift_start, torch.float64)
    out["shift_f32"] = shift_deviation(run, shift_start, torch.float32)
    if cfg.model.encoding == "ape":
        out["ape_rows_untouched"] = ape_rows_untouched(run)
    if cfg.model.encoding == "rope":
        rng = np.random.default_rng(derive_seed(cfg.seed, f"transfer-null-{label}-k{cfg.offset}"))
        heads, kernels = analyse_rope_run(run, p, rng)
        chosen = [(row["layer"], row["head"], head_kernels.kernel.to_numpy(), head_kernels.predicted.to_numpy())
                  for row in heads
                  for head_kernels in [kernels[(kernels.layer == row["layer"]) & (kernels["head"] == row["head"])]]]
        measured = [(layer, head, kernel) for layer, head, kernel, _ in chosen]
        for row, (target, hijacked) in zip(heads, last_query_masses(run, measured, lengths, p.kernel_batch),
                                           strict=True):
            row["mass_by_length"], row["hijacked_by_length"] = target, hijacked
        collapse = first_collapse(sweep[sweep.metric == "last"].set_index("length").accuracy)
        if not math.isnan(collapse) and label != TURNING_ONLY:  # the masking claims pool the other rotary networks
            tag = f"{label}-k{cfg.offset}-{int(collapse)}"
            mask_rng = np.random.default_rng(derive_seed(cfg.seed, f"transfer-mask-{tag}"))
            out["masking"] = dict(masking_test(run, chosen, int(collapse), p.mask_batch, mask_rng, f"masking-{tag}"),
                                  label=label, offset=cfg.offset, seed=cfg.seed)
        out["heads"] = [dict(row, label=label, offset=cfg.offset, seed=cfg.seed) for row in heads]
        out["kernels"] = kernels.assign(label=label, offset=cfg.offset, seed=cfg.seed)
    return out


def held_out_values(held: CommittedRuns | None) -> dict[str, float]:
    """The held-out claims' values: missing runs, runs failing a masking check, runs in which the pooled carrier test
    does not reject, runs in which the identifiable-base heads beat their carrier null no more often than the
    base-10^4 heads (NaN without runs), and the other evidence checks' failures. The held-out claims of the sweep's own
    runs (NaN there) are left out."""
    empty = dict(held_out_masking=float("nan"), held_out_carrier=float("nan"), held_out_carrier_identifiable=float("nan"),
                 held_out_other_failures=float("nan"))
    if held is None:
        return dict(held_out_complete=0.0, **empty)
    checks = held.checks
    if not len(checks):
        return dict(held_out_complete=float(held.missing), **empty)
    evidence = checks[(checks.role == "evidence") & ~checks.name.str.startswith("held_out")]
    failed = evidence[evidence.passed.map(lambda v: v is False)]
    masking = failed[failed.name.isin(MASKING_CHECKS)]
    rejects = set(checks[(checks.name == "carrier_pooled") & (checks.value <= CARRIER_LEVEL)].key)
    shares = {name: checks[checks.name == name].set_index("key").value
              for name in ("carrier_share_standard", "carrier_share_identifiable")}
    paired = pd.concat(shares, axis=1).dropna()  # a run without both shares (no tested head of one kind) is not ahead
    ahead = set(paired.index[paired.carrier_share_identifiable > paired.carrier_share_standard])
    return dict(held_out_complete=float(held.missing), held_out_masking=float(masking.key.nunique()),
                held_out_carrier=float(len(set(checks.key) - rejects)),
                held_out_carrier_identifiable=float(len(set(checks.key) - ahead)),
                held_out_other_failures=float((~failed.name.isin(MASKING_CHECKS)).sum()))


def transfer_variants(p: Parameters) -> list[tuple[str, TransformerConfig]]:
    """The networks of the chapter: RoPE as usual, RoPE with every plane identifiable, RoPE rotating only its identifiable
    planes, RoPE with fewer heads, APE, NoPE."""
    base = TransformerConfig(vocab=p.vocab, dim=p.dim, layers=p.layers, heads=p.heads, max_length=p.longest)
    fixed = identifiable_base(p.dim // p.heads, p.train_length, p.fixed_turns)
    return [
        ("RoPE", base.with_(encoding="rope")),
        (IDENTIFIABLE, base.with_(encoding="rope", rope_base=fixed)),
        (TURNING_ONLY, base.with_(encoding="rope", rope_planes=turning_planes(p))),
        (f"RoPE, {p.compare_heads} heads", base.with_(encoding="rope", heads=p.compare_heads)),
        ("APE", base.with_(encoding="ape")),
        ("NoPE", base.with_(encoding="nope")),
    ]


def turning_planes(p: Parameters) -> int:
    """Identifiable planes per head at base 10^4 and the default head width: the ones the ablation rotates."""
    return int(identifiable_planes(rope_frequencies(p.dim // p.heads).numpy(), p.train_length).sum())


def transfer_jobs(p: Parameters) -> list[tuple[NetworkRunConfig, tuple[str, Parameters]]]:
    """Every variant on shift, ``seeds`` each per offset, with their labels. Copy and reversal in this decoder are
    chapter 11's runs (:data:`FULL_SEQUENCE_SWEEP`), which this chapter reads rather than trains again."""
    shared = dict(train_length=p.train_length, batch=p.batch, lr=p.lr, device=p.device, backend=p.backend)
    return [(NetworkRunConfig(model=model, task="shift", offset=k, steps=p.steps, seed=seed, **shared), (label, p))
            for label, model in transfer_variants(p) for k in p.offsets for seed in p.seed_list]


MASKING_COLUMNS = ["label", "offset", "seed", "collapse_length", "masked_layers",
                   *(f"{name}_offsets" for name in MASK_CONDITIONS[1:]), *(f"accuracy_{name}" for name in MASK_CONDITIONS)]
HEAD_COLUMNS = ["label", "offset", "seed", "layer", "head", "mass_in_range", "kernel_argmax", "mean_kernel_argmax", "coherence",
                "null_q999", "n_measurable", "kernel_at_k", "far_max", "far_argmax", "first_hijack", "amplitude_sum",
                "mean_kernel_at_k", "mass_by_length", "hijacked_by_length", "fit_r2", "carrier_margin", "carrier_r2",
                "carrier_p", "carrier_null_q95", "carrier_null", "carrier_mixed"]


@dataclass
class TransferStudy:
    accuracy: pd.DataFrame  # label, task, offset, seed, length, metric, accuracy, n
    runs: pd.DataFrame  # label, task, offset, seed, final_loss, shift_f64, shift_f32, ape_rows_untouched
    heads: pd.DataFrame  # one row per retrieval head of every RoPE shift run
    kernels: pd.DataFrame  # label, offset, seed, layer, head, delta, kernel
    masking: pd.DataFrame  # per collapsed rotary network: MASKING_COLUMNS


def transfer_study(p: Parameters, progress: bool = True) -> TransferStudy:
    """Train every network of the chapter in ``p.workers`` processes and collect the tables."""
    results = map_stacked(measure_network, transfer_jobs(p), p.workers, progress, desc="networks")
    accuracy = pd.concat([r["sweep"] for r in results], ignore_index=True)
    scalar = ("label", "task", "offset", "seed", "final_loss", "shift_f64", "shift_f32", "ape_rows_untouched")
    runs = pd.DataFrame([{key: r.get(key, np.nan) for key in scalar} for r in results])
    heads = pd.DataFrame([row for r in results for row in r.get("heads", [])], columns=HEAD_COLUMNS)
    kernels = [r["kernels"] for r in results if "kernels" in r and len(r["kernels"])]
    masking = pd.DataFrame([r["masking"] for r in results if "masking" in r], columns=MASKING_COLUMNS)
    return TransferStudy(accuracy, runs, heads, pd.concat(kernels, ignore_index=True) if kernels else pd.DataFrame(),
                         masking)


@dataclass
class CarrierSummary:
    """The carrier test over a chapter run's rotary networks."""

    values: dict[str, float]  # the registered numbers (:func:`carrier_values`)
    table: pd.DataFrame  # one row per variant: planes, seen directions, heads, R^2 against the null, pooled p, power
    power: pd.DataFrame  # power by carrier weight: one column per variant, and POOLED


def carrier_summary(heads: pd.DataFrame, p: Parameters, labels: list[str], seed: int) -> CarrierSummary:
    """The carrier test's numbers, its table by variant and its power curves (each computed once)."""
    power = pd.DataFrame({label: carrier_power_curve(heads, seed, [label]) for label in labels})
    power[POOLED] = carrier_power_curve(heads, seed, labels)
    models = dict(transfer_variants(p))
    rows = []
    for label in labels:
        model = models[label]
        tested = heads[(heads.label == label) & heads.carrier_p.notna()]
        freqs = rope_frequencies(model.head_dim, base=model.rope_base).double().numpy()
        rows.append({"label": label, "planes per head": model.head_dim // 2,
                     "seen directions": seen_directions(freqs, p.train_length), "heads": len(tested),
                     "networks": len(set(network_ids(tested))), "fit_r2": tested.fit_r2.median(),
                     "carrier_r2": tested.carrier_r2.mean(), "null_q95": tested.carrier_null_q95.mean(),
                     "beats_q95": int((tested.carrier_r2 > tested.carrier_null_q95).sum()),
                     "pooled_p": network_pooled(tested.carrier_p.to_numpy(), network_ids(tested)),
                     "power at weight 0.5": power.loc[0.5, label]})
    return CarrierSummary(carrier_values(heads, labels, power[POOLED]), pd.DataFrame(rows).set_index("label"), power)
