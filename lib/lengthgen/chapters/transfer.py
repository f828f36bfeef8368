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
  mass moves there and the prediction fails.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..book.parameters import ParameterError, parameter
from ..model.encodings import identifiable_base
from ..model.evaluation import doubling_lengths, length_sweep
from ..model.seeding import derive_seed, generator
from ..model.tasks import task_batch
from ..model.training import TrainedRun
from ..model.transformer import NetworkRunConfig, TransformerConfig
from .carrier import coherence, null_coherence
from .claims import Claim, f32_toeplitz, reported
from .common import GB, Execution, LengthSweep, Seeds, Task, map_stacked, power_of_two_at_least
from .planes import planes_from_vectors, wrap

EVAL_SEQUENCE_CHUNK = 16  # sequences per forward pass when scoring accuracy


@dataclass(frozen=True)
class Parameters(Seeds, Task, LengthSweep, Execution):
    """Chapter 6's parameters."""

    chapter = "06_transfer"
    dim: int = parameter("model width d (divisible by heads, even head size)", 8, 1024)
    layers: int = parameter("transformer blocks", 1, 24)
    heads: int = parameter("attention heads per block", 1, 64)
    steps: int = parameter("Adam steps per shift run", 1, 100_000)
    batch: int = parameter("training sequences per step", 1, 4096)
    lr: float = parameter("Adam learning rate", 1e-6, 1.0)
    kernel_batch: int = parameter("sequences for the kernels and the per-head target mass", 1, 256)
    retrieval_mass: float = parameter("in-range mass on offset k that marks a retrieval head", 0.0, 1.0)
    null_draws: int = parameter("random-phase kernels drawn for the coherence null", 100, 1_000_000)
    compare_heads: int = parameter("heads of the second RoPE variant (more rotary planes per head)", 1, 64)
    fixed_turns: float = parameter("full turns of the slowest plane within T, identifiable-base variant", 0.1, 100.0)
    copy_seeds: int = parameter("seeds per encoding on the copy task", 1, 100)
    copy_steps: int = parameter("Adam steps per copy run", 1, 100_000)

    def check(self) -> None:
        super().check()
        for name in ("heads", "compare_heads"):
            n = getattr(self, name)
            if self.dim % n or (self.dim // n) % 2 or self.dim // n < 4:
                valid = [h for h in range(1, self.dim + 1)
                         if self.dim % h == 0 and (self.dim // h) % 2 == 0 and self.dim // h >= 4]
                raise ParameterError(f"parameter {name!r} = {n} must split dim = {self.dim} into heads of even size >= 4: "
                                     f"valid values are {valid}")
        power_of_two_at_least("length_factor", self.length_factor, 4, "the chapter compares networks at 2T and 4T")
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


CLAIMS = (
    Claim("rope_minus_ape_2T", "lowest RoPE minus highest APE out-of-range accuracy at 2T", ">=", 0.2,
          "RoPE must beat APE beyond T by a clear margin in every seed.",
          revised="Set after the first measurement gave 0.51 for RoPE against chance for APE."),
    Claim("ape_rows_untouched", "APE networks with a moved row beyond T", "==", 0,
          "Zero gradient and Adam without weight decay leave those rows exactly at their initialization.", role="sanity"),
    Claim("ape_out_of_range", "highest APE out-of-range accuracy minus chance", "<=", 0.02,
          "With 64 sequences and at least 32 scored positions the standard error at chance is at most 0.0027, so 0.02 "
          "is more than seven standard errors. A sanity check: rows beyond T are untouched by training, so an APE "
          "network has no position signal there by construction.", role="sanity"),
    Claim("shift_f64", "largest float64 shift deviation (rotary and NoPE)", "<=", 1e-12,
          "Exact shift equivariance of the architecture, up to rounding.", role="proof"),
    Claim("shift_f32", "largest float32 shift deviation (rotary and NoPE)", "<=", f32_toeplitz,
          "The single-precision rounding argument of chapter 1.", role="proof", threshold_text="10 L eps_32"),
    Claim("ape_shift_f64", "smallest APE shift deviation (the test can fail)", ">", 0.1,
          "APE must fail the same test, which shows the test can fail.", role="sanity"),
    Claim("runs_without_retrieval_head", "rotary networks without a retrieval head", "==", 0,
          "The kernel analyses need at least one retrieval head per rotary network.", role="sanity"),
    Claim("kernel_peak_misses", "retrieval heads whose kernel peaks away from k", "==", 0,
          "Every retrieval head's content-averaged kernel must peak at k in range. A sanity check: heads are selected "
          "for putting at least half their mass on offset k, which nearly guarantees the peak.", role="sanity"),
    Claim("unexplained_collapses", "collapses before any hijacking offset", "==", 0,
          "Every collapse of the last position must come at a length that already contains a hijacking offset. A "
          "sanity check: the hijacking offsets fall inside the doubling grid, so every length past the first one "
          "contains one; masking them (a causal test) is still to be built.", role="sanity"),
    Claim("fix_margin_2T", "lowest fixed-base minus highest base-10^4 out-of-range accuracy at 2T", ">", 0,
          "With every plane identifiable every seed must beat every base-10^4 seed.",
          revised="The identifiable base was found and first tested on seeds 0-2, the chapter's defaults: this check "
                  "is not held out."),
    Claim("fix_margin_4T", "lowest fixed-base minus highest base-10^4 out-of-range accuracy at 4T", ">", 0,
          "With every plane identifiable every seed must beat every base-10^4 seed.",
          revised="As for 2T: found and tested on the default seeds 0-2."),
    reported("heads_clearing_null", "retrieval heads whose coherence clears the null"),
    reported("rope_out_of_range_16T", "RoPE (base 10^4) mean out-of-range accuracy at 16T"),
    reported("fixed_out_of_range_16T", "identifiable-base RoPE mean out-of-range accuracy at 16T"),
    reported("copy_out_of_range_max", "best copy accuracy beyond T, any encoding"),
)


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


def analyse_rope_run(run: TrainedRun, p: Parameters, rng: np.random.Generator) -> tuple[list[dict], pd.DataFrame]:
    """Per retrieval head: kernel peak, plane coherence, carrier bound, and the first hijacking offset."""
    cfg = run.config
    T, k = cfg.train_length, cfg.offset
    longest = p.length_factor * T
    mass = head_target_mass(run, T, p.eval_batch)
    kernels = content_averaged_kernels(run, longest, p.kernel_batch)
    freqs = run.model.blocks[0].attn.freqs.cpu()
    rows, profiles = [], []
    for layer, head in zip(*np.nonzero(mass >= p.retrieval_mass), strict=True):
        kappa = kernels[layer, head]
        q, kv = mean_query_key(run, layer, head, p.eval_batch)
        planes = planes_from_vectors(q, kv, freqs)
        identifiable = planes.freqs * T > 1.0
        err = wrap(planes.phase + planes.freqs * k)
        w = planes.amplitude[identifiable]
        null = null_coherence(w, p.null_draws, rng)
        above = np.nonzero(kappa[T:] > kappa[k])[0]
        rows.append(dict(
            layer=int(layer), head=int(head), mass_in_range=float(mass[layer, head]),
            kernel_argmax=int(kappa[:T].argmax()), mean_kernel_argmax=int(planes.profile(np.arange(T)).argmax()),
            coherence=coherence(w, err[identifiable]), null_q999=float(np.quantile(null, 0.999)),
            n_identifiable=int(identifiable.sum()),
            kernel_at_k=float(kappa[k]), far_max=float(kappa[T:].max()), far_argmax=int(T + kappa[T:].argmax()),
            first_hijack=int(T + above[0]) if len(above) else -1,
            amplitude_sum=float(planes.amplitude.sum()), mean_kernel_at_k=float(planes.profile(np.array([k]))[0]),
        ))
        profiles.append(pd.DataFrame(dict(layer=int(layer), head=int(head), delta=np.arange(longest), kernel=kappa)))
    return rows, pd.concat(profiles, ignore_index=True) if profiles else pd.DataFrame()


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


def measure_network(run: TrainedRun, job: tuple[str, Parameters]) -> dict:
    """In the worker, after training: measure everything the chapter needs of one network (``job``: its label, the parameters)."""
    label, p = job
    cfg = run.config
    lengths = doubling_lengths(cfg.train_length, p.length_factor)
    sweep = length_sweep(run.model, cfg, lengths, p.eval_batch, sequence_chunk=EVAL_SEQUENCE_CHUNK).assign(
        label=label, task=cfg.task, offset=cfg.offset, seed=cfg.seed)
    out = dict(label=label, task=cfg.task, offset=cfg.offset, seed=cfg.seed, sweep=sweep,
               final_loss=float(np.mean(run.losses[-50:])))
    if cfg.task != "shift":
        return out
    longest = lengths[-1]
    shift_start = longest - cfg.train_length
    out["shift_f64"] = shift_deviation(run, shift_start, torch.float64)
    out["shift_f32"] = shift_deviation(run, shift_start, torch.float32)
    if cfg.model.encoding == "ape":
        out["ape_rows_untouched"] = ape_rows_untouched(run)
    if cfg.model.encoding == "rope":
        rng = np.random.default_rng(derive_seed(cfg.seed, f"transfer-null-{label}"))
        heads, kernels = analyse_rope_run(run, p, rng)
        chosen = [(row["layer"], row["head"],
                   kernels[(kernels.layer == row["layer"]) & (kernels["head"] == row["head"])].kernel.to_numpy())
                  for row in heads]
        for row, (target, hijacked) in zip(heads, last_query_masses(run, chosen, lengths, p.kernel_batch), strict=True):
            row["mass_by_length"], row["hijacked_by_length"] = target, hijacked
        out["heads"] = [dict(row, label=label, offset=cfg.offset, seed=cfg.seed) for row in heads]
        out["kernels"] = kernels.assign(label=label, offset=cfg.offset, seed=cfg.seed)
    return out


def transfer_variants(p: Parameters) -> list[tuple[str, TransformerConfig]]:
    """The networks of the chapter: RoPE as usual, RoPE with every plane identifiable, RoPE with fewer heads, APE, NoPE."""
    base = TransformerConfig(vocab=p.vocab, dim=p.dim, layers=p.layers, heads=p.heads, max_length=p.longest)
    fixed = identifiable_base(p.dim // p.heads, p.train_length, p.fixed_turns)
    return [
        ("RoPE", base.with_(encoding="rope")),
        ("RoPE, all planes identifiable", base.with_(encoding="rope", rope_base=fixed)),
        (f"RoPE, {p.compare_heads} heads", base.with_(encoding="rope", heads=p.compare_heads)),
        ("APE", base.with_(encoding="ape")),
        ("NoPE", base.with_(encoding="nope")),
    ]


COPY_VARIANTS = ("RoPE", "RoPE, all planes identifiable", "APE")


def transfer_jobs(p: Parameters) -> list[tuple[NetworkRunConfig, tuple[str, Parameters]]]:
    """Every variant on shift (``seeds`` each per offset), and the copy variants (``copy_seeds`` each), with their labels."""
    shared = dict(train_length=p.train_length, batch=p.batch, lr=p.lr, device=p.device)
    variants = transfer_variants(p)
    jobs = [(NetworkRunConfig(model=model, task="shift", offset=k, steps=p.steps, seed=seed, **shared), (label, p))
            for label, model in variants for k in p.offsets for seed in p.seed_list]
    jobs += [(NetworkRunConfig(model=model, task="copy", offset=p.offsets[0], steps=p.copy_steps, seed=seed, **shared),
              (label, p))
             for label, model in variants if label in COPY_VARIANTS
             for seed in range(p.seed_start, p.seed_start + p.copy_seeds)]
    return jobs


HEAD_COLUMNS = ["label", "offset", "seed", "layer", "head", "mass_in_range", "kernel_argmax", "mean_kernel_argmax", "coherence",
                "null_q999", "n_identifiable", "kernel_at_k", "far_max", "far_argmax", "first_hijack", "amplitude_sum",
                "mean_kernel_at_k", "mass_by_length", "hijacked_by_length"]


@dataclass
class TransferStudy:
    accuracy: pd.DataFrame  # label, task, offset, seed, length, metric, accuracy, n
    runs: pd.DataFrame  # label, task, offset, seed, final_loss, shift_f64, shift_f32, ape_rows_untouched
    heads: pd.DataFrame  # one row per retrieval head of every RoPE shift run
    kernels: pd.DataFrame  # label, offset, seed, layer, head, delta, kernel


def transfer_study(p: Parameters, progress: bool = True) -> TransferStudy:
    """Train every network of the chapter in ``p.workers`` processes and collect the tables."""
    results = map_stacked(measure_network, transfer_jobs(p), p.workers, progress, desc="networks")
    accuracy = pd.concat([r["sweep"] for r in results], ignore_index=True)
    scalar = ("label", "task", "offset", "seed", "final_loss", "shift_f64", "shift_f32", "ape_rows_untouched")
    runs = pd.DataFrame([{key: r.get(key, np.nan) for key in scalar} for r in results])
    heads = pd.DataFrame([row for r in results for row in r.get("heads", [])], columns=HEAD_COLUMNS)
    kernels = [r["kernels"] for r in results if "kernels" in r and len(r["kernels"])]
    return TransferStudy(accuracy, runs, heads, pd.concat(kernels, ignore_index=True) if kernels else pd.DataFrame())


def collapse_table(heads: pd.DataFrame, accuracy: pd.DataFrame, threshold: float = 0.5) -> pd.DataFrame:
    """Per rotary network: its first hijacking offset (min over retrieval heads, ``inf`` if none), the first
    length whose last-position accuracy falls below ``threshold`` (NaN if none), and whether the collapse
    is explained, i.e. happens only at a length that already contains a hijacking offset."""
    last = accuracy[(accuracy.task == "shift") & (accuracy.metric == "last")]
    rows = []
    for (label, offset, seed), group in heads.groupby(["label", "offset", "seed"]):
        curve = last[(last.label == label) & (last.offset == offset) & (last.seed == seed)].set_index("length").accuracy
        failed = curve[curve < threshold]
        first_fail = float(failed.index.min()) if len(failed) else float("nan")
        hijack = float(group.first_hijack.where(group.first_hijack >= 0, np.inf).min())
        rows.append(dict(label=label, offset=offset, seed=seed, first_hijack=hijack, collapse_length=first_fail,
                         explained=bool(np.isnan(first_fail) or hijack < first_fail)))
    return pd.DataFrame(rows, columns=["label", "offset", "seed", "first_hijack", "collapse_length", "explained"])
