"""Chapter 6's measurements: the single-head phenomena inside a small transformer.

For every trained network this module measures

* accuracy against length (``transformer_training.length_sweep``);
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
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .carrier import coherence, null_coherence, planes_from_vectors, wrap
from .encodings import identifiable_base
from .parallel import map_runs
from .seeding import derive_seed, generator
from .sequence_tasks import task_batch
from .studies import doubling_lengths
from .transformer import TransformerConfig
from .transformer_training import SequenceRun, SequenceRunConfig, length_sweep, train_sequence_model


@torch.no_grad()
def shift_deviation(run: SequenceRun, start: int, dtype: torch.dtype, batch: int = 4) -> float:
    """Largest |logit(window at ``start``) - logit(window at 0)| over layers and heads, relative to the largest logit."""
    model = copy.deepcopy(run.model).to(dtype)
    cfg = run.config
    tokens, _ = task_batch(cfg.task, batch, cfg.train_length, cfg.model.vocab, cfg.offset, generator(cfg.seed, "shift-test"))
    base = model.attention_logits(tokens, 0)
    moved = model.attention_logits(tokens, start)
    worst, scale = 0.0, 0.0
    for a, b in zip(base, moved, strict=True):
        finite = torch.isfinite(a)
        worst = max(worst, float((a[finite] - b[finite]).abs().max()))
        scale = max(scale, float(a[finite].abs().max()))
    return worst / scale


def ape_rows_untouched(run: SequenceRun) -> bool:
    """Whether every APE row at a position ``>= T`` is bitwise equal to its initial value."""
    T = run.config.train_length
    return bool(torch.equal(run.model.position[T:].detach(), run.initial_state["position"][T:]))


@torch.no_grad()
def head_target_mass(run: SequenceRun, length: int, batch: int) -> np.ndarray:
    """``(layers, heads)``: mean attention on offset ``k`` over the queries ``t`` in ``[k, length)``."""
    cfg = run.config
    tokens, _ = task_batch(cfg.task, batch, length, cfg.model.vocab, cfg.offset, generator(cfg.seed, f"heads-{length}"))
    t = torch.arange(cfg.offset, length)
    out = []
    for logits in run.model.attention_logits(tokens):
        attn = torch.softmax(logits, -1)
        out.append(attn[:, :, t, t - cfg.offset].mean((0, 2)).numpy())
    return np.stack(out)


@torch.no_grad()
def content_averaged_kernels(run: SequenceRun, length: int, batch: int) -> np.ndarray:
    """``(layers, heads, length)``: each head's logit at offset ``D`` averaged over queries and sequences."""
    cfg = run.config
    tokens, _ = task_batch(cfg.task, batch, length, cfg.model.vocab, cfg.offset, generator(cfg.seed, f"kernel-{length}"))
    out = []
    for logits in run.model.attention_logits(tokens):
        rows = [torch.diagonal(logits, offset=-d, dim1=-2, dim2=-1).mean((0, 2)) for d in range(length)]
        out.append(torch.stack(rows, dim=-1).numpy())
    return np.stack(out)


@torch.no_grad()
def mean_query_key(run: SequenceRun, layer: int, head: int, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean pre-rotation query and key vectors of one head over training-length sequences."""
    cfg = run.config
    tokens, _ = task_batch(cfg.task, batch, cfg.train_length, cfg.model.vocab, cfg.offset, generator(cfg.seed, "mean-qk"))
    x = run.model.layer_inputs(tokens)[layer]
    q, k, _ = run.model.blocks[layer].attn.split_heads(x)
    return q[:, head].mean((0, 1)), k[:, head].mean((0, 1))


def analyse_rope_run(run: SequenceRun, params: dict, rng: np.random.Generator) -> tuple[list[dict], pd.DataFrame]:
    """Per retrieval head: kernel peak, plane coherence, carrier bound, and the first hijacking offset."""
    cfg = run.config
    T, k = cfg.train_length, cfg.offset
    longest = params["length_factor"] * T
    mass = head_target_mass(run, T, params["eval_batch"])
    kernels = content_averaged_kernels(run, longest, params["kernel_batch"])
    freqs = run.model.blocks[0].attn.freqs
    rows, profiles = [], []
    for layer, head in zip(*np.nonzero(mass >= params["retrieval_mass"]), strict=True):
        kappa = kernels[layer, head]
        q, kv = mean_query_key(run, layer, head, params["eval_batch"])
        planes = planes_from_vectors(q, kv, freqs)
        identifiable = planes.freqs * T > 1.0
        err = wrap(planes.phase + planes.freqs * k)
        w = planes.amplitude[identifiable]
        null = null_coherence(w, params["null_draws"], rng)
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
        profiles.append(pd.DataFrame(dict(layer=int(layer), head=int(head), offset=np.arange(longest), kernel=kappa)))
    return rows, pd.concat(profiles, ignore_index=True) if profiles else pd.DataFrame()


@torch.no_grad()
def last_query_masses(
    run: SequenceRun, heads: list[tuple[int, int, np.ndarray]], lengths: list[int], batch: int
) -> list[tuple[list[float], list[float]]]:
    """For each ``(layer, head, kernel)``: the last query's mass on the target, and on the offsets whose
    kernel beats the target's, at every length (one forward pass per length serves every head)."""
    cfg = run.config
    out = [([], []) for _ in heads]
    for n in lengths:
        tokens, _ = task_batch(cfg.task, batch, n, cfg.model.vocab, cfg.offset, generator(cfg.seed, f"mass-{n}"))
        logits = run.model.attention_logits(tokens)
        for (layer, head, kernel), (target, hijacked) in zip(heads, out, strict=True):
            attn = torch.softmax(logits[layer][:, head, -1], -1).mean(0).flip(0)  # index = offset
            hijackers = torch.as_tensor(kernel[:n] > kernel[cfg.offset])
            target.append(float(attn[cfg.offset]))
            hijacked.append(float(attn[hijackers].sum()))
    return out


@dataclass
class TransferJob:
    label: str  # e.g. "RoPE", "APE", "NoPE", "RoPE, 2 heads"
    config: SequenceRunConfig
    params: dict


def run_job(job: TransferJob) -> dict:
    """Train one network and measure everything the chapter needs (executed in a worker)."""
    run = train_sequence_model(job.config)
    cfg, params = job.config, job.params
    lengths = doubling_lengths(cfg.train_length, params["length_factor"])
    sweep = length_sweep(run.model, cfg, lengths, params["eval_batch"]).assign(
        label=job.label, task=cfg.task, seed=cfg.seed)
    out = dict(label=job.label, task=cfg.task, seed=cfg.seed, sweep=sweep, final_loss=float(np.mean(run.losses[-50:])))
    if cfg.task != "shift":
        return out
    longest = lengths[-1]
    shift_start = longest - cfg.train_length
    out["shift_f64"] = shift_deviation(run, shift_start, torch.float64)
    out["shift_f32"] = shift_deviation(run, shift_start, torch.float32)
    if cfg.model.encoding == "ape":
        out["ape_rows_untouched"] = ape_rows_untouched(run)
    if cfg.model.encoding == "rope":
        rng = np.random.default_rng(derive_seed(cfg.seed, f"transfer-null-{job.label}"))
        heads, kernels = analyse_rope_run(run, params, rng)
        chosen = [(row["layer"], row["head"],
                   kernels[(kernels.layer == row["layer"]) & (kernels["head"] == row["head"])].kernel.to_numpy())
                  for row in heads]
        for row, (target, hijacked) in zip(heads, last_query_masses(run, chosen, lengths, params["kernel_batch"]),
                                           strict=True):
            row["mass_by_length"], row["hijacked_by_length"] = target, hijacked
        out["heads"] = [dict(row, label=job.label, seed=cfg.seed) for row in heads]
        out["kernels"] = kernels.assign(label=job.label, seed=cfg.seed)
    return out


def transfer_variants(params: dict) -> list[tuple[str, TransformerConfig]]:
    """The networks of the chapter: RoPE as usual, RoPE with every plane identifiable, RoPE with fewer heads, APE, NoPE."""
    base = TransformerConfig(vocab=params["vocab"], dim=params["dim"], layers=params["layers"], heads=params["heads"],
                             max_length=params["length_factor"] * params["train_length"])
    head_dim = params["dim"] // params["heads"]
    fixed = identifiable_base(head_dim, params["train_length"], params["fixed_turns"])
    return [
        ("RoPE", base.with_(encoding="rope")),
        ("RoPE, all planes identifiable", base.with_(encoding="rope", rope_base=fixed)),
        (f"RoPE, {params['compare_heads']} heads", base.with_(encoding="rope", heads=params["compare_heads"])),
        ("APE", base.with_(encoding="ape")),
        ("NoPE", base.with_(encoding="nope")),
    ]


COPY_VARIANTS = ("RoPE", "RoPE, all planes identifiable", "APE")


def transfer_jobs(params: dict) -> list[TransferJob]:
    """Every variant on shift (``seeds`` each), and the copy variants (``copy_seeds`` each)."""
    shared = dict(offset=params["offset"], train_length=params["train_length"], batch=params["batch"], lr=params["lr"])
    variants = transfer_variants(params)
    jobs = [TransferJob(label, SequenceRunConfig(model=model, task="shift", steps=params["steps"], seed=seed, **shared), params)
            for label, model in variants for seed in range(params["seeds"])]
    jobs += [TransferJob(label, SequenceRunConfig(model=model, task="copy", steps=params["copy_steps"], seed=seed, **shared),
                         params)
             for label, model in variants if label in COPY_VARIANTS for seed in range(params["copy_seeds"])]
    # longest jobs first, so the last worker is not left alone with a long copy run
    return sorted(jobs, key=lambda job: -job.config.steps)


HEAD_COLUMNS = ["label", "seed", "layer", "head", "mass_in_range", "kernel_argmax", "mean_kernel_argmax", "coherence",
                "null_q999", "n_identifiable", "kernel_at_k", "far_max", "far_argmax", "first_hijack", "amplitude_sum",
                "mean_kernel_at_k", "mass_by_length", "hijacked_by_length"]


@dataclass
class TransferStudy:
    accuracy: pd.DataFrame  # label, task, seed, length, metric, accuracy
    runs: pd.DataFrame  # label, task, seed, final_loss, shift_f64, shift_f32, ape_rows_untouched
    heads: pd.DataFrame  # one row per retrieval head of every RoPE shift run
    kernels: pd.DataFrame  # label, seed, layer, head, offset, kernel


def transfer_study(params: dict, progress: bool = True) -> TransferStudy:
    """Train every network of the chapter in ``params["workers"]`` processes and collect the tables."""
    results = map_runs(run_job, transfer_jobs(params), workers=params["workers"], progress=progress, desc="networks")
    accuracy = pd.concat([r["sweep"] for r in results], ignore_index=True)
    scalar = ("label", "task", "seed", "final_loss", "shift_f64", "shift_f32", "ape_rows_untouched")
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
    for (label, seed), group in heads.groupby(["label", "seed"]):
        curve = last[(last.label == label) & (last.seed == seed)].set_index("length").accuracy
        failed = curve[curve < threshold]
        first_fail = float(failed.index.min()) if len(failed) else float("nan")
        hijack = float(group.first_hijack.where(group.first_hijack >= 0, np.inf).min())
        rows.append(dict(label=label, seed=seed, first_hijack=hijack, collapse_length=first_fail,
                         explained=bool(np.isnan(first_fail) or hijack < first_fail)))
    return pd.DataFrame(rows, columns=["label", "seed", "first_hijack", "collapse_length", "explained"])
