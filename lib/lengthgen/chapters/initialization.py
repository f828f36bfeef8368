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
import itertools
import math
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd
import torch

from ..book.parameters import ParameterError, parameter
from ..book.paths import SWEEPS_DIR
from ..model.encodings import identifiable_base, plane_index
from ..model.evaluation import doubling_lengths, length_sweep
from ..model.training import TrainedRun
from ..model.transformer import NetworkRunConfig, Transformer, TransformerConfig
from .common import GB, Execution, LengthSweep, Seeds, Task, map_stacked, power_of_two_at_least
from .held_out import held_out_runs
from .network_probes import (
    COLLAPSE_ACCURACY,
    EVAL_SEQUENCE_CHUNK,
    content_averaged_kernels,
    head_target_mass,
    mean_query_key,
)
from .planes import planes_from_vectors

INIT_SCHEMES = ("gpt2", "qk", "all")
INIT_LABELS = {"gpt2": "GPT-2 (sd 0.02)", "qk": "q, k x s", "all": "all x s"}
GPT2_STD = 0.02  # the standard deviation of chapter 6's initialization (lengthgen.model.transformer.gpt2_init)
STANDARD_BASE = 10_000.0
LEARNED_ACCURACY = 0.99  # in-range accuracy at T a network must reach before its extrapolation is judged
# the seeds chapter 6 trains at its defaults (0-2) and reserves for its held-out sweep (its HELD_OUT_SEEDS, 300-319;
# a test keeps the two in step): written out, so that this chapter does not depend on chapter 6's module
CHAPTER6_SEEDS = frozenset(range(0, 3)) | frozenset(range(300, 320))
INIT_HELD_OUT_SEEDS = tuple(range(500, 520))  # this chapter's committed sweep draws here, reserved before it ran
HELD_OUT_CHECKS = ("wide_init_helps", "fix_helps_gpt2", "collapse_predicted", "unseen_share_wide_lower")
# The control for the Adam reading: the GPT-2 initialization trained at learning rate lr / s (base 10^4, both head
# widths), so that Adam's steps are the same fraction of its weights as lr is of the 'all x s' weights. Its networks are
# kept out of every pool above; registered, with ADAM_CONTROL_CHECKS, before any of them was trained.
ADAM_CONTROL = "gpt2_lr"
ADAM_CONTROL_LABEL = "GPT-2, lr / s"
ADAM_CONTROL_CHECKS = ("adam_control_helps", "adam_control_share_lower")
PHASE_CHECKS = ("unseen_phase_lift_gpt2_higher",)  # judged on every held-out run by held_out_phases
# unseen_phase_lift_gpt2_higher's registered bar, kept after the check was made a report: held_out_phases and the
# held-out table judge every run against it
REGISTERED_PHASE_LIFT_SHARE = 0.8
PHASE_MIN_PAIRED = 0.8  # share of the GPT-2 base-10^4 networks that must pair with a learned 'all x s' one to judge it
ADAM_CONTROL_MIN_PAIRED = 0.8  # share of the control's networks that must be learned, with a learned GPT-2 twin, to judge
WIDE_INIT_BAR = 0.1  # the gain of "all x s" over GPT-2 that wide_init_helps requires; below it the Adam control is not judged


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
class Parameters(Seeds, Task, LengthSweep, Execution):
    """Chapter 13's parameters."""

    chapter = "13_initialization"
    dim: int = parameter("model width d (divisible by heads and compare_heads, even head size >= 4)", 8, 1024)
    layers: int = parameter("transformer blocks", 1, 24)
    heads: int = parameter("attention heads per block", 1, 64)
    compare_heads: int = parameter("heads per block of the wider-head networks", 1, 64)
    steps: int = parameter("Adam steps per run", 1, 100_000)
    batch: int = parameter("training sequences per step", 1, 4096)
    lr: float = parameter("Adam learning rate", 1e-6, 1.0)
    init_scale: float = parameter("factor s on the GPT-2 initialization's weights (schemes 'qk' and 'all')", 0.05, 20.0)
    fixed_turns: float = parameter("full turns of the slowest plane within T at the identifiable base", 0.1, 100.0)
    kernel_batch: int = parameter("sequences for the measured kernels", 1, 256)
    retrieval_mass: float = parameter("in-range mass on offset k that marks a retrieval head", 0.0, 1.0)
    committed_sweep: str = parameter("committed sweep of this chapter (a folder of data/sweeps) whose runs on held-out "
                                     "seeds are read beside this run's; '' for none (what the sweep's own runs use)")

    def check(self) -> None:
        super().check()
        if self.committed_sweep and not (SWEEPS_DIR / self.committed_sweep / "spec.yaml").exists():
            known = sorted(p.parent.name for p in SWEEPS_DIR.glob("*/spec.yaml"))
            raise ParameterError(f"parameter 'committed_sweep' = {self.committed_sweep!r} is out of range: no "
                                 f"data/sweeps/{self.committed_sweep}/spec.yaml; committed sweeps: {known} (or '')")
        if self.committed_sweep and set(self.seed_list) & set(INIT_HELD_OUT_SEEDS):
            raise ParameterError(f"parameter 'seed_start' = {self.seed_start} is out of range: with a committed sweep, "
                                 f"this page's seeds must avoid the sweep's held-out seeds {INIT_HELD_OUT_SEEDS[0]} .. "
                                 f"{INIT_HELD_OUT_SEEDS[-1]}")
        for name in ("heads", "compare_heads"):
            n = getattr(self, name)
            if self.dim % n or (self.dim // n) % 2 or self.dim // n < 4:
                valid = [h for h in range(1, self.dim + 1)
                         if self.dim % h == 0 and (self.dim // h) % 2 == 0 and self.dim // h >= 4]
                raise ParameterError(f"parameter {name!r} = {n} must split dim = {self.dim} into heads of even size >= 4: "
                                     f"valid values are {valid}")
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
    freqs = run.model.blocks[0].attn.freqs.cpu()
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
                              train_length=p.train_length, batch=p.batch, lr=lr, device=p.device, init_scale=scale,
                              init_scope=scope)
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


NETWORK_KEYS = ["init", "head_dim", "base_kind", "offset", "seed"]


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


def balanced_accuracy(observed: np.ndarray, predicted: np.ndarray) -> float:
    """Mean of the hit rates on the positive and on the negative cells; NaN when either kind is absent."""
    observed, predicted = np.asarray(observed, bool), np.asarray(predicted, bool)
    if observed.all() or not observed.any():
        return float("nan")
    return float(((predicted[observed]).mean() + (~predicted[~observed]).mean()) / 2)


def collapse_cells(networks: pd.DataFrame, lengths: list[int]) -> pd.DataFrame:
    """One row per (learned network with a retrieval head, length beyond T): observed collapse, the training-length
    prediction, its softmax version, and the prediction's rule on the measured kernel."""
    judged = networks[networks.learned & (networks.retrieval_heads > 0)]
    kinds = ("collapsed", "predicted", "softmax", "measured")
    return pd.DataFrame([dict(**{key: getattr(r, key) for key in NETWORK_KEYS}, length=n,
                              **{kind: getattr(r, f"{kind}_{n}") for kind in kinds})
                         for r in judged.itertuples() for n in lengths[1:]],
                        columns=[*NETWORK_KEYS, "length", *kinds])


CONFIGURATION = ["init", "head_dim", "base_kind", "offset", "length"]  # what a configuration rule may know of a cell


def configuration_rule(cells: pd.DataFrame) -> np.ndarray:
    """Per cell, the majority verdict of the *other* seeds' cells of the same configuration and length (ties, and
    cells with no other seed: collapsed): a rule that knows the configuration but not the network."""
    out = np.ones(len(cells), bool)
    for _, group in cells.groupby(CONFIGURATION):
        collapsed = group.collapsed.to_numpy(bool)
        for i, index in enumerate(group.index):
            others = np.delete(collapsed, i)
            out[cells.index.get_loc(index)] = not len(others) or others.mean() >= 0.5
    return out


def split_groups(cells: pd.DataFrame) -> pd.Series:
    """Whether each cell belongs to a (configuration, length) group whose seeds disagree."""
    return cells.groupby(CONFIGURATION).collapsed.transform(lambda c: c.nunique() > 1).astype(bool)


def length_only_rule(cells: pd.DataFrame) -> np.ndarray:
    """The best rule that knows only the length: of every assignment of a verdict to each length, the one with the
    highest balanced accuracy on ``cells`` (ties: the first found, collapsing at fewer lengths)."""
    lengths = sorted(set(cells.length))
    best, best_score = np.zeros(len(cells), bool), -1.0
    for choice in itertools.product((False, True), repeat=len(lengths)):
        rule = cells.length.map(dict(zip(lengths, choice, strict=True))).to_numpy(bool)
        score = balanced_accuracy(cells.collapsed, rule)
        if score > best_score:
            best, best_score = rule, score
    return best


def out_of_range_at(accuracy: pd.DataFrame, networks: pd.DataFrame, length: int, **where: str) -> pd.Series:
    """Out-of-range accuracy at ``length`` of every learned network matching ``where``, indexed by ``NETWORK_KEYS``."""
    learned = networks[networks.learned]
    for key, value in where.items():
        learned = learned[learned[key] == value]
    sub = accuracy[(accuracy.metric == "out_of_range") & (accuracy.length == length)]
    return sub.merge(learned[NETWORK_KEYS], on=NETWORK_KEYS).set_index(NETWORK_KEYS).accuracy


def mean_out_of_range(accuracy: pd.DataFrame, networks: pd.DataFrame, length: int, **where: str) -> float:
    """Mean out-of-range accuracy at ``length`` over the learned networks matching ``where`` (NaN if none)."""
    at = out_of_range_at(accuracy, networks, length, **where)
    return float(at.mean()) if len(at) else float("nan")


def learned_planes(planes: pd.DataFrame, networks: pd.DataFrame) -> pd.DataFrame:
    """The plane rows of the learned networks' retrieval heads."""
    if not len(planes):
        return planes
    return planes.merge(networks[networks.learned][NETWORK_KEYS], on=NETWORK_KEYS)


def unseen_plane_change(planes: pd.DataFrame, init: str) -> float:
    """Median relative weight change of the base-10^4 retrieval heads' planes that turn less than once within T."""
    if not len(planes):
        return float("nan")
    sub = planes[(planes.init == init) & (planes.base_kind == "standard") & (planes.turns_in_T < 1.0)]
    return float(sub.weight_change.median()) if len(sub) else float("nan")


def per_network_ratio(rows: pd.DataFrame, numerator: np.ndarray, denominator: np.ndarray, name: str) -> pd.DataFrame:
    """Per network of ``rows`` (plane rows): the median, over its retrieval heads, of the head's ``sum numerator / sum
    denominator``, as column ``name``. A head whose denominator sums to 0 has no ratio, and a network without any is
    left out."""
    columns = [*NETWORK_KEYS, name]
    if not len(rows):
        return pd.DataFrame(columns=columns)
    per_head = rows.assign(top=numerator, bottom=denominator).groupby([*NETWORK_KEYS, "layer", "head"])[
        ["top", "bottom"]].sum()
    per_head = per_head[per_head.bottom > 0]
    per_head[name] = per_head.top / per_head.bottom
    return per_head.groupby(NETWORK_KEYS)[name].median().reset_index()[columns]


def unseen_shares(planes: pd.DataFrame, amplitude: str = "amplitude") -> pd.DataFrame:
    """Per base-10^4 network: the median, over its retrieval heads, of the share of the planes that turn less than once
    within ``T`` in the sum of plane amplitudes (column ``amplitude``: after training, or ``amplitude_init``) of the
    head's mean-query-and-key kernel."""
    sub = planes[planes.base_kind == "standard"] if len(planes) else planes
    if not len(sub):
        return per_network_ratio(sub, np.array([]), np.array([]), "unseen_share")
    weight = sub[amplitude].to_numpy()
    return per_network_ratio(sub, weight * (sub.turns_in_T < 1.0).to_numpy(), weight, "unseen_share")


def paired_shares(shares: pd.DataFrame, first: str = "gpt2", second: str = "all",
                  column: str = "unseen_share") -> pd.DataFrame:
    """A per-network ``column`` (the unseen share unless told) of two initializations (columns named after them; GPT-2
    and 'all x s' unless told) side by side, one row per (head width, offset, seed) that has both."""
    pair = ["head_dim", "base_kind", "offset", "seed"]
    return pd.concat([shares[shares.init == init].set_index(pair)[column].rename(init) for init in (first, second)],
                     axis=1, join="inner").reset_index()


PHASE_MEASURES = ("phase_at_target", "phase_lift", "target_resultant")


def lift_transfer(planes: pd.DataFrame, train_length: int) -> np.ndarray:
    """Per plane row: ``c = mean over T <= D < 2T of exp(i theta (D - k)) - 1``. A plane whose phase at the target offset
    is ``psi = theta k + phi`` raises the offsets in ``[T, 2T)`` above the target, on average and per unit of its
    amplitude, by ``Re(exp(i psi) c) = |c| cos(psi + arg c)``: ``|c|`` is the most any phase could give that plane (near
    0 for a plane that barely turns beyond ``T``), ``cos(psi + arg c)`` how much of it its phase gives."""
    far = np.arange(train_length, 2 * train_length, dtype=np.float64)
    delta = far[None, :] - planes.offset.to_numpy()[:, None]
    return np.exp(1j * planes.freq.to_numpy()[:, None] * delta).mean(1) - 1.0


def phase_at_target(planes: pd.DataFrame, phase: str = "phase") -> np.ndarray:
    """Per plane row: ``psi = theta k + phi``, its phase at the target offset ``k`` (``phi`` from column ``phase``: after
    training, or ``phase_init``)."""
    return planes.freq.to_numpy() * planes.offset.to_numpy() + planes[phase].to_numpy()


def far_lift(planes: pd.DataFrame, train_length: int) -> np.ndarray:
    """Per plane row: ``mean over T <= D < 2T of cos(theta D + phi) - cos(theta k + phi)``, how far the plane, continued
    beyond the training range, raises the logit of the offsets in ``[T, 2T)`` above the target's, per unit of its
    amplitude (between -2 and 2; read from the trained planes only)."""
    return np.real(np.exp(1j * phase_at_target(planes)) * lift_transfer(planes, train_length))


def phase_lift(planes: pd.DataFrame, train_length: int) -> np.ndarray:
    """Per plane row: ``cos(psi + arg c)`` (:func:`lift_transfer`), the plane's far lift as a share of the largest any
    phase could give it: set by the phase alone (1: the phase that lifts the far offsets most, -1: the one that lowers
    them most), whatever the plane's frequency."""
    return np.cos(phase_at_target(planes) + np.angle(lift_transfer(planes, train_length)))


def _resultant(planes: pd.DataFrame, phase: str) -> float:
    """Per plane (one head width and plane index, so one frequency), the length of the mean of ``exp(i(theta k +
    phase))`` over the rows, median over the planes (unweighted)."""
    z = pd.Series(np.exp(1j * phase_at_target(planes, phase)), index=planes.index)
    return float(z.groupby([planes.head_dim, planes.plane]).agg(lambda v: abs(v.mean())).median())


def _phase_measures(group: pd.DataFrame, train_length: int) -> dict[str, float]:
    """The measures of :func:`phase_summary` over the plane rows of ``group`` (one initialization)."""
    weight = group.amplitude.to_numpy()
    lift = weight * far_lift(group, train_length)
    heads = group.groupby([*NETWORK_KEYS, "layer", "head"]).ngroups
    return dict(rows=float(len(group)), heads=float(heads),
                phase_at_target=float(np.degrees(np.angle((weight * np.exp(1j * phase_at_target(group))).sum()))),
                phase_lift=float((weight * phase_lift(group, train_length)).sum() / weight.sum()),
                far_lift=float(lift.sum() / weight.sum()), far_lift_nats=float(lift.sum() / heads),
                target_resultant=_resultant(group, "phase"), init_resultant=_resultant(group, "phase_init"))


def phase_summary(planes: pd.DataFrame, train_length: int, by: str = "unseen") -> pd.DataFrame:
    """What training makes of the phases of the base-10^4 retrieval heads' planes, per initialization and per ``by``
    (``"unseen"``: the planes that turn less than once within ``T`` against the others; ``"plane"``: every head width and
    plane index, with its ``turns_in_T``). With ``psi = theta k + phi`` a plane's phase at the target offset ``k`` and
    ``a`` its trained amplitude (weights, so that planes too small to move a logit do not count):

    * ``phase_at_target``: the direction of sum a exp(i psi), in degrees (0: the planes peak at the target, 180: they are
      lowest there, +-90: they are steepest there);
    * ``phase_lift`` = sum a cos(psi + arg c) / sum a (:func:`phase_lift`): how much of the largest possible lift of the
      offsets in ``[T, 2T)`` over the target the planes' phases give, whatever their frequencies (-1 to 1);
    * ``far_lift`` = sum a l / sum a (:func:`far_lift`): the lift itself per unit amplitude, which also depends on which
      planes hold the amplitude; ``far_lift_nats`` = sum a l / heads, the same in nats per head;
    * ``target_resultant``: per plane (one width and index), the length of the mean of exp(i psi) over the heads (0:
      spread evenly, 1: every head the same), median over the planes, unweighted; ``init_resultant``: the same from the
      phases at initialization (random weights), the length that heads with unrelated phases give at this count.
    """
    if by not in ("unseen", "plane"):
        raise ValueError(f"by must be 'unseen' or 'plane', not {by!r}")
    keys = ["init", "unseen"] if by == "unseen" else ["init", "head_dim", "plane", "turns_in_T"]
    columns = [*keys, "rows", "heads", *PHASE_MEASURES, "far_lift", "far_lift_nats", "init_resultant"]
    sub = planes[planes.base_kind == "standard"] if len(planes) else planes
    if not len(sub):
        return pd.DataFrame(columns=columns)
    sub = sub.assign(unseen=sub.turns_in_T < 1.0)
    rows = [dict(zip(keys, key, strict=True)) | _phase_measures(group, train_length)
            for key, group in sub.groupby(keys)]
    return pd.DataFrame(rows, columns=columns)


def unseen_phase_lifts(planes: pd.DataFrame, train_length: int) -> pd.DataFrame:
    """Per base-10^4 network: the median, over its retrieval heads, of the phase lift of the head's planes that turn less
    than once within ``T`` (``sum a cos(psi + arg c) / sum a``, :func:`phase_lift`); a head without unseen amplitude has
    none, and a network without any is left out."""
    sub = planes[(planes.base_kind == "standard") & (planes.turns_in_T < 1.0)] if len(planes) else planes
    if not len(sub):
        return per_network_ratio(sub, np.array([]), np.array([]), "unseen_phase_lift")
    weight = sub.amplitude.to_numpy()
    return per_network_ratio(sub, weight * phase_lift(sub, train_length), weight, "unseen_phase_lift")


def lift_pairs_value(planes: pd.DataFrame, networks: pd.DataFrame, train_length: int) -> float:
    """``unseen_phase_lift_gpt2_higher``: the share of (GPT-2, 'all x s') pairs of learned base-10^4 networks in which the
    GPT-2 network's unseen planes have the higher phase lift; NaN (not judged) unless at least ``PHASE_MIN_PAIRED`` of
    the run's GPT-2 base-10^4 networks are paired."""
    pairs = paired_shares(unseen_phase_lifts(planes, train_length), column="unseen_phase_lift")
    possible = int(((networks.init == "gpt2") & (networks.base_kind == "standard")).sum()) if len(networks) else 0
    if not possible or len(pairs) < PHASE_MIN_PAIRED * possible:
        return float("nan")
    return float((pairs.gpt2 > pairs["all"]).mean())


def unseen_phase(summary: pd.DataFrame, init: str, measure: str) -> float:
    """A column of a :func:`phase_summary` (by ``"unseen"``) over the unseen planes of ``init`` (NaN if none)."""
    row = summary[(summary.init == init) & summary.unseen.astype(bool)] if len(summary) else summary
    return float(row[measure].iloc[0]) if len(row) else float("nan")


def held_out_passes(checks: pd.DataFrame) -> pd.Series:
    """Whether each held-out run's check (rows of ``held_out_runs(...).checks``) holds: its recorded verdict, and for
    the phase check, which is reported and so recorded without one, its value against the registered bar
    (``REGISTERED_PHASE_LIFT_SHARE``; NaN, not judged, fails)."""
    phase = checks.name.isin(PHASE_CHECKS)
    recorded = checks.passed.map(lambda v: v is True)
    return recorded.where(~phase, checks.value.astype(float) >= REGISTERED_PHASE_LIFT_SHARE)


def held_out_table(checks: pd.DataFrame) -> pd.DataFrame:
    """The held-out runs' evidence, Adam-control and phase checks, one column per run: each value, marked where the run
    fails the check (:func:`held_out_passes`)."""
    shown = checks[checks.name.isin(HELD_OUT_CHECKS + ADAM_CONTROL_CHECKS + PHASE_CHECKS)]
    marks = [f"{v:.3f}" + ("" if ok else " (fails)") for v, ok in zip(shown.value, held_out_passes(shown), strict=True)]
    return shown.assign(value=marks).pivot_table(index="name", columns=["offset", "seeds"], values="value",
                                                 aggfunc="first")


def held_out_values(name: str) -> dict[str, float]:
    """``held_out_complete``, ``held_out_failures``, ``held_out_adam_control`` and ``held_out_phases`` (the last three
    NaN, a failure, without a sweep or without runs)."""
    if not name:
        return dict(held_out_complete=0.0, held_out_failures=float("nan"), held_out_adam_control=float("nan"),
                    held_out_phases=float("nan"))
    held = held_out_runs(name, Parameters.chapter)
    if not len(held.checks):
        return dict(held_out_complete=float(held.missing), held_out_failures=float("nan"),
                    held_out_adam_control=float("nan"), held_out_phases=float("nan"))

    def failing_runs(checks: tuple[str, ...]) -> float:
        """Runs in which one of ``checks`` fails or is missing (a run without the check is no evidence for it)."""
        passing = {key: set(run.name[held_out_passes(run)]) for key, run in held.checks.groupby("key")}
        return float(sum(not set(checks) <= names for names in passing.values()))

    return dict(held_out_complete=float(held.missing), held_out_failures=failing_runs(HELD_OUT_CHECKS),
                held_out_adam_control=failing_runs(ADAM_CONTROL_CHECKS), held_out_phases=failing_runs(PHASE_CHECKS))


def claim_values(study: InitializationStudy, p: Parameters) -> dict[str, float]:
    """Every registered number of the chapter from its study."""
    nets, acc = study.networks, study.accuracy
    T = p.train_length
    lengths = doubling_lengths(T, p.length_factor)
    cells = collapse_cells(nets, lengths)
    split = split_groups(cells) if len(cells) else pd.Series(dtype=bool)
    planes = learned_planes(study.planes, nets)

    def scored(rule: np.ndarray, where: pd.Series | None = None) -> float:
        if not len(cells):
            return float("nan")
        keep = np.ones(len(cells), bool) if where is None else where.to_numpy(bool)
        return balanced_accuracy(cells.collapsed.to_numpy(bool)[keep], np.asarray(rule, bool)[keep]) if keep.any() \
            else float("nan")

    def gap(length: int, init_a: str, base_a: str, init_b: str, base_b: str) -> float:
        return (mean_out_of_range(acc, nets, length, init=init_a, base_kind=base_a)
                - mean_out_of_range(acc, nets, length, init=init_b, base_kind=base_b))

    values = dict(
        fresh_seeds=float(len(set(p.seed_list) & CHAPTER6_SEEDS)),
        init_scale_applied=float(nets.init_scale_error.max()),
        not_learned=float((~nets.learned).sum()),
        without_retrieval_head=float((nets.learned & (nets.retrieval_heads == 0)).sum()),
        wide_init_helps=gap(2 * T, "all", "standard", "gpt2", "standard"),
        qk_init_gain_2T=gap(2 * T, "qk", "standard", "gpt2", "standard"),
        fix_helps_gpt2=gap(4 * T, "gpt2", "identifiable", "gpt2", "standard"),
        fix_gain_wide_4T=gap(4 * T, "all", "identifiable", "all", "standard"),
        collapse_predicted=scored(cells.predicted),
        collapse_length_only=scored(length_only_rule(cells)) if len(cells) else float("nan"),
        collapse_config_rule=scored(configuration_rule(cells)) if len(cells) else float("nan"),
        collapse_predicted_split=scored(cells.predicted, split),
        collapse_split_cells=float(split.sum()),
        collapse_softmax_rule=scored(cells.softmax),
        collapse_measured_rule=scored(cells.measured),
        predicted_measured_agree=float((cells.predicted == cells.measured).mean()) if len(cells) else float("nan"),
        unseen_plane_change_gpt2=unseen_plane_change(planes, "gpt2"),
        unseen_plane_change_wide=unseen_plane_change(planes, "all"),
    )
    shares = unseen_shares(planes)
    median = shares.groupby("init").unseen_share.median()
    pairs = paired_shares(shares)
    values["unseen_share_init"] = float(unseen_shares(planes, "amplitude_init").unseen_share.median()) if len(planes) \
        else float("nan")
    values["unseen_share_gpt2"] = float(median.get("gpt2", float("nan")))
    values["unseen_share_wide"] = float(median.get("all", float("nan")))
    values["unseen_share_wide_lower"] = float((pairs.gpt2 > pairs["all"]).mean()) if len(pairs) else float("nan")
    at_2T = acc[(acc.metric == "out_of_range") & (acc.length == 2 * T)][[*NETWORK_KEYS, "accuracy"]]
    paired = shares.merge(at_2T, on=NETWORK_KEYS)

    def rank(frame: pd.DataFrame) -> float:
        return float(frame.unseen_share.corr(frame.accuracy, method="spearman")) if len(frame) > 2 else float("nan")

    values["unseen_share_rank_correlation"] = rank(paired)
    within = [rank(group) for _, group in paired.groupby("init")]
    values["unseen_share_rank_within"] = float(np.nanmean(within)) if within and not np.all(np.isnan(within)) \
        else float("nan")
    values["unseen_phase_lift_gpt2_higher"] = lift_pairs_value(planes, nets, T)
    phases = phase_summary(planes, T)
    for init, tag in (("gpt2", "gpt2"), ("all", "wide")):
        for measure, name in (("phase_lift", "phase_lift"), ("far_lift_nats", "lift_nats"),
                              ("target_resultant", "resultant")):
            values[f"unseen_{name}_{tag}"] = unseen_phase(phases, init, measure)
    values["unseen_resultant_init"] = unseen_phase(phases, "gpt2", "init_resultant")
    return values | adam_control_values(study, p, values["wide_init_helps"]) | held_out_values(p.committed_sweep)


def adam_control_values(study: InitializationStudy, p: Parameters, wide_gain: float) -> dict[str, float]:
    """The Adam control's numbers: its networks (``study.control``) against the GPT-2 and 'all x s' networks at base
    10^4, paired by seed, head width and offset with the GPT-2 networks trained at ``lr``; ``wide_gain`` is the run's
    ``wide_init_helps``, of which ``adam_control_helps`` is a fraction."""
    names = ["adam_control_not_learned", "adam_control_paired", "adam_control_gain_2T", "adam_control_helps",
             "adam_control_share_lower", "adam_control_minus_wide_2T", "adam_control_change", "adam_control_share",
             "adam_control_phase_lift"]
    control = study.control
    if control is None or not len(control.networks):
        return dict.fromkeys(names, float("nan"))
    two_T = 2 * p.train_length

    def learned_at_2T(part: InitializationStudy, init: str) -> pd.Series:
        return out_of_range_at(part.accuracy, part.networks, two_T, init=init, base_kind="standard").droplevel("init")

    paired = pd.concat([learned_at_2T(study, "gpt2").rename("gpt2"), learned_at_2T(control, ADAM_CONTROL).rename("control")],
                       axis=1, join="inner")
    enough = len(paired) >= ADAM_CONTROL_MIN_PAIRED * len(control.networks)
    gain = float((paired.control - paired.gpt2).mean()) if len(paired) else float("nan")
    control_planes = learned_planes(control.planes, control.networks)
    shares = unseen_shares(pd.concat([learned_planes(study.planes, study.networks), control_planes], ignore_index=True))
    share_pairs = paired_shares(shares, "gpt2", ADAM_CONTROL)
    median = shares[shares.init == ADAM_CONTROL].unseen_share.median() if len(shares) else float("nan")
    control_2T = mean_out_of_range(control.accuracy, control.networks, two_T, init=ADAM_CONTROL, base_kind="standard")
    return dict(
        adam_control_not_learned=float((~control.networks.learned).sum()),
        adam_control_paired=float(len(paired)),
        adam_control_gain_2T=gain,
        adam_control_helps=gain / wide_gain if enough and wide_gain >= WIDE_INIT_BAR else float("nan"),
        adam_control_share_lower=float((share_pairs.gpt2 > share_pairs[ADAM_CONTROL]).mean())
        if enough and len(share_pairs) else float("nan"),
        adam_control_minus_wide_2T=control_2T - mean_out_of_range(study.accuracy, study.networks, two_T, init="all",
                                                                   base_kind="standard"),
        adam_control_change=unseen_plane_change(control_planes, ADAM_CONTROL),
        adam_control_share=float(median) if median == median else float("nan"),
        adam_control_phase_lift=unseen_phase(phase_summary(control_planes, p.train_length), ADAM_CONTROL,
                                             "phase_lift"))


def adam_control_table(study: InitializationStudy, p: Parameters) -> pd.DataFrame:
    """Base 10^4: the GPT-2 networks at ``lr``, the Adam control (GPT-2 at ``lr / s``) and 'all x s' at ``lr``, one row
    each: learned networks, mean out-of-range accuracy at 2T and 4T (learned networks), and over the learned networks'
    retrieval heads the median unseen-plane share, the median relative change of the unseen planes' weights and their
    phase lift (:func:`phase_summary`)."""
    T = p.train_length
    groups = [(f"{INIT_LABELS['gpt2']}, lr", study, "gpt2", p.lr),
              (ADAM_CONTROL_LABEL, study.control, ADAM_CONTROL, p.lr / p.init_scale),
              (f"{INIT_LABELS['all']}, lr", study, "all", p.lr)]
    rows = []
    for label, part, init, lr in groups:
        if part is None or not len(part.networks):
            continue
        nets = part.networks[(part.networks.init == init) & (part.networks.base_kind == "standard")]
        planes = learned_planes(part.planes, part.networks)
        shares = unseen_shares(planes)
        rows.append(dict(initialization=label, learning_rate=lr, learned=f"{int(nets.learned.sum())} of {len(nets)}",
                         **{f"accuracy_{n}T": mean_out_of_range(part.accuracy, part.networks, n * T, init=init,
                                                                base_kind="standard") for n in (2, 4)},
                         unseen_share=float(shares[shares.init == init].unseen_share.median()) if len(shares)
                         else float("nan"),
                         unseen_change=unseen_plane_change(planes, init),
                         unseen_phase_lift=unseen_phase(phase_summary(planes, T), init, "phase_lift")))
    return pd.DataFrame(rows)
