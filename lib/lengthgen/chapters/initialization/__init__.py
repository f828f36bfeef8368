"""Chapter 13 (``13_initialization``): the initialization scale as an axis of chapter 6's network.

Chapter 6 trains its transformer from the GPT-2 initialization (every weight matrix normal with
standard deviation 0.02). This chapter trains the same network, recipe and task (shift-by-``k``)
from three initializations:

* ``gpt2``: chapter 6's, unchanged;
* ``qk``: the same, with the query and key weights of every attention layer multiplied by ``s``;
* ``all``: every weight matrix (embedding, attention, MLP, readout) multiplied by ``s``;

and, as a control for how the initialization acts (through Adam's step size relative to the weights), ``gpt2``
trained at learning rate ``lr / s`` (base ``10^4`` only), kept apart from every comparison of the three.

The default ``s`` = 3.6 makes the standard deviation about that of PyTorch's default ``nn.Linear``
initialization at fan-in 64 (uniform on +-1/8, standard deviation 0.072). Each is crossed with the
rotary base (``10^4``, and the identifiable base of chapter 6) and the head width, on seeds that
chapter 6 never used.

Per network the module measures accuracy against length, the retrieval heads (as in chapter 6),
the planes of each retrieval head's mean query and key on training-length sequences (after
training and at initialization), how far training moved the query and key weights of every plane,
and **a prediction made from training-length quantities only**: the kernel of the mean query and key,
continued beyond ``T`` by its planes, says at which lengths the offsets that beat the target
outweigh it in the softmax, i.e. at which lengths the last position should collapse.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd
import torch

from ...analysis.network_probes import (
    COLLAPSE_ACCURACY,
    EVAL_SEQUENCE_CHUNK,
    content_averaged_kernels,
    head_target_mass,
    mean_query_key,
)
from ...analysis.planes import planes_from_vectors
from ...book.parameters import ParameterError, parameter
from ...model.encodings import identifiable_base, plane_index
from ...model.evaluation import doubling_lengths, length_sweep
from ...model.training import TrainedRun
from ...model.transformer import NetworkRunConfig, Transformer, TransformerConfig
from ..committed import CommittedSweep
from ..common import GB, Execution, LengthSweep, Network, Optimizer, RetrievalProbes, Task, map_stacked, power_of_two_at_least
from .registered import ADAM_CONTROL, CHAPTER, INIT_HELD_OUT_SEEDS, INIT_SCHEMES, LEARNED_ACCURACY, STANDARD_BASE


@dataclass(frozen=True)
class ScaledInitRunConfig(NetworkRunConfig):
    """Chapter 6's network run, with its GPT-2 initialization rescaled by ``init_scale`` over ``init_scope``."""

    init_scale: float = 1.0
    init_scope: str = "all"  # "qk" (query and key weights only) or "all" (every weight matrix)

    def build_model(self) -> Transformer:
        model = super().build_model()
        scale_initialization(model, self.init_scale, self.init_scope)
        return model


@torch.no_grad()
def scale_initialization(model: Transformer, scale: float, scope: str) -> None:
    """Multiply a freshly initialized model's weights by ``scale``: the query and key rows of every ``qkv`` matrix
    (``scope="qk"``), or every weight matrix but the LayerNorms' (``scope="all"``; biases are zero anyway)."""
    if scope == "qk":
        for block in model.blocks:
            block.attn.qkv.weight[: 2 * model.cfg.dim].mul_(scale)
    elif scope == "all":
        for name, p in model.named_parameters():
            if p.dim() >= 2 and "ln" not in name:
                p.mul_(scale)
    else:
        raise ValueError(f"init_scope must be 'qk' or 'all', got {scope!r}")


def scheme_scale(scheme: str, scale: float) -> tuple[float, str]:
    """``(init_scale, init_scope)`` of an initialization scheme of :data:`INIT_SCHEMES`."""
    return (1.0, "all") if scheme == "gpt2" else (scale, scheme)


@dataclass(frozen=True)
class Parameters(CommittedSweep, Network, RetrievalProbes, Optimizer, Task, LengthSweep, Execution):
    """Chapter 13's parameters."""

    chapter = CHAPTER
    held_out_seeds = INIT_HELD_OUT_SEEDS
    init_scale: float = parameter("factor s on the GPT-2 initialization's weights (schemes 'qk' and 'all')", 0.05, 20.0)

    def check(self) -> None:
        super().check()
        if self.heads == self.compare_heads:
            raise ParameterError(f"parameter 'compare_heads' = {self.compare_heads} is out of range: it must differ from "
                                 f"heads = {self.heads} (the chapter compares two head widths)")
        power_of_two_at_least("length_factor", self.length_factor, 4, "the chapter judges the networks at 2T and 4T")
        for head_dim in (self.dim // self.heads, self.dim // self.compare_heads):
            base = identifiable_base(head_dim, self.train_length, self.fixed_turns)
            if base < 2.0:
                most = self.train_length / (2 * math.pi * 2.0 ** ((head_dim - 2) / head_dim))
                raise ParameterError(f"parameter 'fixed_turns' = {self.fixed_turns} is out of range: with train_length "
                                     f"= {self.train_length} and head size {head_dim} the identifiable base would be "
                                     f"{base:.3g} < 2; must be in [0.1, {most:.3g}]")

    @property
    def head_counts(self) -> tuple[int, int]:
        return (self.heads, self.compare_heads)

    def memory_gb(self) -> float:
        attention = 12 * self.layers * max(self.head_counts) * self.longest**2
        return self.workers * max(self.kernel_batch, EVAL_SEQUENCE_CHUNK, 4) * attention / GB

    def memory_rule(self) -> str:
        return ("per worker: 12 bytes x layers x heads x longest length^2 for every sequence whose attention "
                "logits are read at once (kernel_batch, or 16 when scoring)")


def init_scale_error(run_config: ScaledInitRunConfig, initial_state: dict[str, torch.Tensor]) -> float:
    """Largest ``|ratio / expected - 1|`` over weight groups, where ``ratio`` is a group's norm at initialization over the
    same group's norm in the GPT-2 initialization of the same seed, and ``expected`` the factor the scheme gives it."""
    plain_cfg = NetworkRunConfig(**{f.name: getattr(run_config, f.name) for f in fields(NetworkRunConfig)})
    plain = {name: p.detach() for name, p in plain_cfg.build_model().named_parameters()}
    dim, scale, scope = run_config.model.dim, run_config.init_scale, run_config.init_scope
    worst = 0.0
    for name, reference in plain.items():
        if reference.dim() < 2 or "ln" in name:
            continue
        groups = ([(slice(0, dim), "qk"), (slice(dim, 2 * dim), "qk"), (slice(2 * dim, 3 * dim), "v")]
                  if name.endswith("qkv.weight") else [(slice(None), "other")])
        for rows, group in groups:
            expected = scale if scope == "all" or (scope == "qk" and group == "qk") else 1.0
            ratio = float(initial_state[name][rows].double().norm() / reference[rows].double().norm())
            worst = max(worst, abs(ratio / expected - 1))
    return worst


def beaten_beyond_T(kernel: np.ndarray, offset: int, train_length: int, length: int) -> bool:
    """Whether some offset in ``[T, length)`` has a higher logit in ``kernel`` than the target ``kernel[offset]``."""
    return bool((kernel[train_length:length] > kernel[offset]).any())


def far_outweighs(kernel: np.ndarray, offset: int, train_length: int, length: int) -> bool:
    """Whether every offset in ``[T, length)`` together holds more softmax weight than the target:
    ``sum exp(kernel[D] - kernel[offset]) > 1``."""
    far = kernel[train_length:length] - kernel[offset]
    return bool(len(far) and np.exp(far).sum() > 1.0)


def plane_changes(run: TrainedRun, layer: int, head: int) -> np.ndarray:
    """Per plane of one head: ``|W - W_0| / |W_0|`` over the query and key rows of that plane (Frobenius norms)."""
    cfg = run.config.model
    first, second = plane_index(cfg.head_dim, "half")
    name = f"blocks.{layer}.attn.qkv.weight"
    trained = dict(run.model.named_parameters())[name].detach().cpu().double()
    initial = run.initial_state[name].cpu().double()
    out = []
    for a, b in zip(first.tolist(), second.tolist(), strict=True):
        rows = [part * cfg.dim + head * cfg.head_dim + i for part in (0, 1) for i in (a, b)]  # q rows, then k rows
        out.append(float((trained[rows] - initial[rows]).norm() / initial[rows].norm()))
    return np.array(out)


def initial_model(run: TrainedRun) -> TrainedRun:
    """The run's network as it was before training (same configuration, initial parameters)."""
    model = copy.deepcopy(run.model)
    model.load_state_dict({name: value.to(run.model.device) for name, value in run.initial_state.items()}, strict=False)
    return TrainedRun(run.config, model, [], run.initial_state)


def measure_network(run: TrainedRun, job: tuple[dict, Parameters]) -> dict:
    """In the worker, after training: accuracy against length, the retrieval heads' planes (trained and at
    initialization), their weight changes per plane, and the predicted and measured collapse verdicts."""
    info, p = job
    cfg = run.config
    T, k = cfg.train_length, cfg.offset
    lengths = doubling_lengths(T, p.length_factor)
    longest = lengths[-1]
    sweep = length_sweep(run.model, cfg, lengths, p.eval_batch, sequence_chunk=EVAL_SEQUENCE_CHUNK).assign(
        **info, offset=k, seed=cfg.seed)
    mass = head_target_mass(run, T, p.eval_batch)
    kernels = content_averaged_kernels(run, longest, p.kernel_batch)
    freqs = run.model.freqs.cpu()
    start = initial_model(run)
    heads, planes = [], []
    for layer, head in zip(*np.nonzero(mass >= p.retrieval_mass), strict=True):
        trained = planes_from_vectors(*mean_query_key(run, layer, head, p.eval_batch), freqs)
        initial = planes_from_vectors(*mean_query_key(start, layer, head, p.eval_batch), freqs)
        predicted = trained.profile(np.arange(longest))
        measured = kernels[layer, head]
        heads.append(dict(
            **info, offset=k, seed=cfg.seed, layer=int(layer), head=int(head), mass_in_range=float(mass[layer, head]),
            **{f"predicted_{n}": beaten_beyond_T(predicted, k, T, n) for n in lengths[1:]},
            **{f"softmax_{n}": far_outweighs(predicted, k, T, n) for n in lengths[1:]},
            **{f"measured_{n}": beaten_beyond_T(measured, k, T, n) for n in lengths[1:]}))
        for m, (theta, change) in enumerate(zip(trained.freqs, plane_changes(run, int(layer), int(head)), strict=True)):
            planes.append(dict(**info, offset=k, seed=cfg.seed, layer=int(layer), head=int(head), plane=m,
                               freq=float(theta), turns_in_T=float(theta * T / (2 * math.pi)),
                               amplitude=float(trained.amplitude[m]), phase=float(trained.phase[m]),
                               amplitude_init=float(initial.amplitude[m]), phase_init=float(initial.phase[m]),
                               weight_change=float(change)))
    return dict(info=info, offset=k, seed=cfg.seed, sweep=sweep, heads=heads, planes=planes,
                init_scale_error=init_scale_error(cfg, run.initial_state), final_loss=float(np.mean(run.losses[-50:])))


def _network_job(p: Parameters, heads: int, base_kind: str, base: float, init: str, offset: int, seed: int,
                 lr: float, scale: float, scope: str) -> tuple[ScaledInitRunConfig, tuple[dict, Parameters]]:
    """One rotary network of chapter 6's shape on shift-by-``offset``, with its descriptive fields."""
    model = TransformerConfig(vocab=p.vocab, dim=p.dim, layers=p.layers, heads=heads, max_length=p.longest,
                              encoding="rope", rope_base=base)
    cfg = ScaledInitRunConfig(model=model, task="shift", offset=offset, steps=p.steps, seed=seed,
                              train_length=p.train_length, batch=p.batch, lr=lr, device=p.device, backend=p.backend,
                              init_scale=scale, init_scope=scope)
    return cfg, (dict(init=init, head_dim=p.dim // heads, base_kind=base_kind, base=base,
                      init_factor=scale), p)


def network_jobs(p: Parameters) -> list[tuple[ScaledInitRunConfig, tuple[dict, Parameters]]]:
    """Every (initialization, head count, base, offset, seed) network of the chapter, with its descriptive fields."""
    jobs = []
    for scheme in INIT_SCHEMES:
        scale, scope = scheme_scale(scheme, p.init_scale)
        for heads in p.head_counts:
            for base_kind, base in (("standard", STANDARD_BASE),
                                    ("identifiable", identifiable_base(p.dim // heads, p.train_length, p.fixed_turns))):
                jobs += [_network_job(p, heads, base_kind, base, scheme, k, seed, p.lr, scale, scope)
                         for k in p.offsets for seed in p.seed_list]
    return jobs


def adam_control_jobs(p: Parameters) -> list[tuple[ScaledInitRunConfig, tuple[dict, Parameters]]]:
    """The Adam control: the GPT-2 initialization at base 10^4 trained at ``lr / init_scale``, every head width, offset
    and seed of the chapter (paired with the GPT-2 networks at ``lr`` by seed)."""
    return [_network_job(p, heads, "standard", STANDARD_BASE, ADAM_CONTROL, k, seed, p.lr / p.init_scale,
                         1.0, "all")
            for heads in p.head_counts for k in p.offsets for seed in p.seed_list]


@dataclass
class InitializationStudy:
    accuracy: pd.DataFrame  # init, head_dim, base_kind, base, init_factor, offset, seed, length, metric, accuracy, n
    networks: pd.DataFrame  # one row per network: descriptive fields, learned, collapsed_<n>, predicted_<n>, ...
    heads: pd.DataFrame  # one row per retrieval head: predicted_<n>, measured_<n>
    planes: pd.DataFrame  # one row per (retrieval head, plane): amplitude and phase trained and at init, weight change
    control: InitializationStudy | None = None  # the Adam control's networks (ADAM_CONTROL), the same tables


def initialization_study(p: Parameters, progress: bool = True) -> InitializationStudy:
    """Train every network of the chapter and the Adam control's in ``p.workers`` processes and collect the tables
    (the control's apart, in ``control``)."""
    results = map_stacked(measure_network, network_jobs(p) + adam_control_jobs(p), p.workers, progress, desc="networks")
    study = study_tables([r for r in results if r["info"]["init"] != ADAM_CONTROL], p)
    study.control = study_tables([r for r in results if r["info"]["init"] == ADAM_CONTROL], p)
    return study


def study_tables(results: list[dict], p: Parameters) -> InitializationStudy:
    """The four tables of a list of :func:`measure_network` results."""
    accuracy = pd.concat([r["sweep"] for r in results], ignore_index=True)
    heads = pd.DataFrame([row for r in results for row in r["heads"]])
    planes = pd.DataFrame([row for r in results for row in r["planes"]])
    lengths = doubling_lengths(p.train_length, p.length_factor)
    rows = []
    for r in results:
        sweep = r["sweep"]
        curve = sweep[sweep.metric == "last"].set_index("length").accuracy
        in_range = float(sweep[(sweep.metric == "in_range") & (sweep.length == p.train_length)].accuracy.iloc[0])
        row = dict(**r["info"], offset=r["offset"], seed=r["seed"], in_range=in_range,
                   learned=in_range >= LEARNED_ACCURACY, final_loss=r["final_loss"], init_scale_error=r["init_scale_error"],
                   retrieval_heads=len(r["heads"]))
        for n in lengths[1:]:
            row[f"collapsed_{n}"] = bool(curve[n] < COLLAPSE_ACCURACY)
            row[f"predicted_{n}"] = any(h[f"predicted_{n}"] for h in r["heads"])
            row[f"softmax_{n}"] = any(h[f"softmax_{n}"] for h in r["heads"])
            row[f"measured_{n}"] = any(h[f"measured_{n}"] for h in r["heads"])
        rows.append(row)
    return InitializationStudy(accuracy, pd.DataFrame(rows), heads, planes)


