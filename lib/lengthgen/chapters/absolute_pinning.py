"""Chapter 2 (``02_absolute_pinning``): untouched APE rows, the pinned absolute key, and what decides it.

Three families of heads are trained on identical data: learned-APE heads at several table
initializations (the default 0.02 among them), an APE head trained on windows that start anywhere
in the evaluated range (so every row of its table is trained: coverage without the implicit bias
question), and a rotary head for comparison. For the APE heads the module measures where the
out-of-range queries look (argmax key, attention mass, entropy), the accuracy of every query beyond
``T`` against chance *per query* (the one query whose target is the pinned token itself is
excluded and scored on its own), and the key a vanishing initialization would pin every query to,
predicted from the trained weights alone.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import torch

from ..analysis.stats import binomial_interval
from ..book.parameters import ParameterError, parameter
from ..model.evaluation import doubling_lengths, length_sweep
from ..model.heads import ApeHead, HeadRunConfig
from ..model.seeding import generator
from ..model.tasks import IGNORE, task_batch
from ..model.training import TrainedRun
from .common import GB, Execution, HeadTraining, LengthSweep, head_run_configs, map_stacked

DEFAULT_TABLE_INIT_STD = 0.02  # the GPT-2 convention for learned position tables
CHANCE_CEILING = 2.0  # "at chance" in practice: no length's exact upper bound above this multiple of 1/V
STRICT_PIN_FRACTION = 0.9  # "one key": the most common argmax key takes at least this share of out-of-range queries
CHANCE_CONFIDENCE = 0.999  # exact (Clopper-Pearson) interval for "at chance"
WINDOWS = "APE, trained windows"


@dataclass(frozen=True)
class Parameters(HeadTraining, LengthSweep, Execution):
    """Chapter 2's parameters."""

    chapter = "02_absolute_pinning"
    table_init_stds: tuple[float, ...] = parameter(
        "standard deviations of the APE table's initialization (must include the default 0.02)", 1e-6, 10.0)

    def check(self) -> None:
        super().check()
        if DEFAULT_TABLE_INIT_STD not in self.table_init_stds:
            raise ParameterError(f"parameter 'table_init_stds' = {list(self.table_init_stds)} must include the default "
                                 f"initialization {DEFAULT_TABLE_INIT_STD}, which the chapter's claims are about")

    def memory_gb(self) -> float:
        return self.workers * (16 * self.longest**2 + 8 * self.eval_batch * (self.longest + 256 * self.vocab)) / GB

    def memory_rule(self) -> str:
        return "per worker: 16 bytes x longest length^2 for the out-of-range attention matrix, plus the evaluation batch"


@dataclass(frozen=True)
class TableMovement:
    """How far APE table rows moved from their initial values during training."""

    untrained_bitwise_equal: bool  # every row >= T equals its initial value bit for bit
    untrained_max_change: float
    trained_mean_change: float  # mean L2 change of the rows < T, for scale


def table_movement(head: ApeHead, initial_table: torch.Tensor, train_length: int) -> TableMovement:
    """Compare the trained table with its initialization, split at the training length."""
    table = head.table.detach().cpu()
    initial_table = initial_table.cpu()
    change = (table - initial_table).norm(dim=1)
    return TableMovement(
        untrained_bitwise_equal=bool(torch.equal(table[train_length:], initial_table[train_length:])),
        untrained_max_change=float(change[train_length:].max()),
        trained_mean_change=float(change[:train_length].mean()),
    )


@torch.no_grad()
def argmax_keys(head: ApeHead, length: int, query_pos: torch.Tensor) -> torch.Tensor:
    """For each query position, the key position with the largest attention weight."""
    return head.attention(length, query_pos).argmax(-1).cpu()


@dataclass(frozen=True)
class Pinning:
    """Where out-of-range queries look."""

    pinned_key: int  # the most common argmax key among queries in [T, L)
    pinned_fraction: float  # fraction of those queries whose argmax is pinned_key
    pinned_in_range: bool  # pinned_key < T
    in_range_share: float  # fraction of those queries whose argmax key lies in [0, T)
    mean_mass_on_pinned: float  # mean attention weight on pinned_key
    entropy_share: float  # mean attention entropy, as a share of log(number of visible keys)


@torch.no_grad()
def pinning(head: ApeHead, train_length: int, length: int) -> Pinning:
    """Argmax, mass and entropy statistics of the out-of-range queries ``t`` in ``[T, length)``."""
    queries = torch.arange(train_length, length)
    attn = head.attention(length, queries).double().cpu()
    keys = attn.argmax(-1)
    key = int(torch.mode(keys).values)
    entropy = -(attn * torch.log(attn.clamp_min(1e-300))).sum(-1) / torch.log(queries.double() + 1)
    return Pinning(
        pinned_key=key,
        pinned_fraction=float((keys == key).double().mean()),
        pinned_in_range=key < train_length,
        in_range_share=float((keys < train_length).double().mean()),
        mean_mass_on_pinned=float(attn[:, key].mean()),
        entropy_share=float(entropy.mean()),
    )


@torch.no_grad()
def relative_shares(head: ApeHead, train_length: int, length: int, offset: int) -> list[float]:
    """Per octave ``[2^j T, 2^(j+1) T)`` of the queries beyond ``T`` (up to ``length``): the share whose most attended key
    is ``t - k``, the key of the relative rule (a query's argmax does not depend on the sequence's length)."""
    queries = torch.arange(train_length, length)
    hits = (argmax_keys(head, length, queries) == queries - offset).double()
    shares, low = [], train_length
    while low < length:
        shares.append(float(hits[(queries >= low) & (queries < 2 * low)].mean()))
        low *= 2
    return shares


@torch.no_grad()
def vanishing_init_key(head: ApeHead, train_length: int, length: int) -> int:
    """The key every out-of-range query attends to most when the untrained rows are zero: ``argmax_s <W_q c, k_s>``.

    Only the trained weights enter: the query is ``W_q c`` and far keys are ``W_k c`` (their rows set to zero).
    """
    table = head.table.detach().clone()
    table[train_length:] = 0
    query = head.const @ head.w_q.T
    keys = (head.const + table[:length]) @ head.w_k.T
    return int((keys @ query).argmax())


@torch.no_grad()
def query_accuracy(head: ApeHead, cfg: HeadRunConfig, length: int, batch: int) -> np.ndarray:
    """Accuracy of every query ``t`` in ``[T, length)`` over ``batch`` fresh sequences (own evaluation stream)."""
    tokens, targets = task_batch(cfg.task, batch, length, cfg.vocab, cfg.offset, generator(cfg.seed, f"chance-{length}"),
                                 train=False)
    positions = torch.arange(cfg.train_length, length)
    (predicted,) = head.predict(tokens.to(head.device), [positions])
    return (predicted.cpu() == targets[:, positions]).double().mean(0).numpy()


@torch.no_grad()
def window_accuracy(head: ApeHead, cfg: HeadRunConfig, longest: int, batch: int) -> float:
    """Accuracy on the task the windows head was trained on: length-``T`` windows starting at ``0, T, 2T, ...`` up to
    ``longest - T``, ``batch`` fresh sequences each (own evaluation stream), every query that has a target."""
    T, scores = cfg.train_length, []
    for start in range(0, longest - T + 1, T):
        tokens, targets = task_batch(cfg.task, batch, T, cfg.vocab, cfg.offset, generator(cfg.seed, f"windows-{start}"),
                                     train=False)
        predicted = head(tokens.to(head.device), start).argmax(-1).cpu()
        scored = targets != IGNORE
        scores.append(float((predicted == targets)[scored].double().mean()))
    return float(np.mean(scores))


def chance_cells(per_query: dict[int, np.ndarray], batch: int, train_length: int, offset: int, pinned_key: int,
                 vocab: int) -> tuple[list[dict], float]:
    """Per length: the accuracy of the out-of-range queries without the pinned-target query ``t = p + k``, its exact
    interval, whether 1/V lies inside and whether its upper end stays below the ceiling ``CHANCE_CEILING / V``; and
    the accuracy of the pinned-target query (NaN if it is not out of range)."""
    rows, target_accuracy = [], math.nan
    special = pinned_key + offset
    for length, accuracy in per_query.items():
        positions = np.arange(train_length, length)
        keep = positions != special
        if (~keep).any():
            target_accuracy = float(accuracy[~keep][0])
        n = batch * int(keep.sum())
        hits = round(float(accuracy[keep].mean()) * n)
        low, high = binomial_interval(hits, n, CHANCE_CONFIDENCE)
        rows.append(dict(length=length, accuracy=hits / n, n=n, ci_low=low, ci_high=high,
                         chance_inside=bool(low <= 1 / vocab <= high),
                         below_ceiling=bool(high <= CHANCE_CEILING / vocab)))
    return rows, target_accuracy


@dataclass
class PinningStudy:
    """Chapter 2's tables: per run; accuracy per run and length; chance per run and length; argmax keys."""

    runs: dict[tuple[str, float], list[TrainedRun]]  # (encoding, table init std) -> runs over offsets x seeds
    seeds: pd.DataFrame  # one row per run: encoding, table_init_std, offset, seed, movement, pinning, predicted key
    accuracy: pd.DataFrame  # encoding, table_init_std, offset, seed, length, metric, accuracy, n
    chance: pd.DataFrame  # table_init_std, offset, seed, length, accuracy, n, ci_low, ci_high, chance_inside, below_ceiling
    argmax: pd.DataFrame  # table_init_std, offset, seed, query, key (argmax key of every query at the longest length)


def measure_run(run: TrainedRun, job: tuple[str, float, list[int], int]) -> tuple[TrainedRun, dict, pd.DataFrame,
                                                                                pd.DataFrame, pd.DataFrame]:
    """In the worker, after training: accuracy against length; for the APE heads their table, pin and chance."""
    encoding, std, lengths, eval_batch = job
    cfg, head = run.config, run.model
    T, longest = cfg.train_length, lengths[-1]
    label = dict(encoding=encoding, table_init_std=std, offset=cfg.offset, seed=cfg.seed)
    sweep = length_sweep(head, cfg, lengths, eval_batch, out_of_range_queries=512).assign(**label)
    row, argmax, chance = dict(label), pd.DataFrame(), pd.DataFrame()
    if encoding != "RoPE":
        shares = relative_shares(head, T, longest, cfg.offset)
        row.update(relative_share_2T=shares[0], relative_share_far=shares[-1])
    if encoding == WINDOWS:
        row.update(window_accuracy=window_accuracy(head, cfg, longest, eval_batch))
    if encoding == "APE":
        queries = torch.arange(T, longest)
        keys = argmax_keys(head, longest, queries)
        argmax = pd.DataFrame(dict(table_init_std=std, offset=cfg.offset, seed=cfg.seed, query=queries.numpy(),
                                   key=keys.numpy()))
        pin = pinning(head, T, longest)
        predicted = vanishing_init_key(head, T, longest)
        per_query = {L: query_accuracy(head, cfg, L, eval_batch) for L in lengths if L > T}
        cells, target_accuracy = chance_cells(per_query, eval_batch, T, cfg.offset, pin.pinned_key, cfg.vocab)
        chance = pd.DataFrame(cells).assign(table_init_std=std, offset=cfg.offset, seed=cfg.seed)
        row.update(asdict(table_movement(head, run.initial_state["table"], T)), **asdict(pin),
                   predicted_key=predicted, predicted_is_pinned=int(predicted == pin.pinned_key),
                   limit_share=float((keys == predicted).double().mean()),
                   pinned_target_accuracy=target_accuracy)
    return run, row, sweep, argmax, chance


def pinning_study(p: Parameters, progress: bool = True) -> PinningStudy:
    """Train APE heads at every table initialization, APE heads on windows over the whole range, and RoPE heads."""
    lengths = doubling_lengths(p.train_length, p.length_factor)
    groups = {("APE", std): head_run_configs(p, "ape", table_init_std=std) for std in p.table_init_stds}
    groups[(WINDOWS, DEFAULT_TABLE_INIT_STD)] = head_run_configs(p, "ape", table_init_std=DEFAULT_TABLE_INIT_STD,
                                                                 window_starts=p.longest - p.train_length)
    groups[("RoPE", 0.0)] = head_run_configs(p, "rope")
    jobs = [(cfg, (encoding, std, lengths, p.eval_batch)) for (encoding, std), cfgs in groups.items() for cfg in cfgs]
    results = map_stacked(measure_run, jobs, p.workers, progress)
    runs: dict[tuple[str, float], list[TrainedRun]] = {key: [] for key in groups}
    for (_, (encoding, std, *_)), (run, *_rest) in zip(jobs, results, strict=True):
        runs[(encoding, std)].append(run)
    _, rows, sweeps, argmax, chance = zip(*results, strict=True)
    return PinningStudy(runs, pd.DataFrame(list(rows)), pd.concat(sweeps, ignore_index=True),
                        pd.concat([c for c in chance if len(c)], ignore_index=True),
                        pd.concat([a for a in argmax if len(a)], ignore_index=True))


def accuracy_curves(study: PinningStudy) -> list[dict]:
    """The last query's accuracy against length, per run, of the RoPE head and the default-init APE head: the rows the
    record keeps for figures drawn from it (the landing page's headline figure)."""
    acc = study.accuracy
    heads = (acc.encoding == "RoPE") | ((acc.encoding == "APE") & (acc.table_init_std == DEFAULT_TABLE_INIT_STD))
    return acc[heads & (acc.metric == "last")][["encoding", "offset", "seed", "length", "accuracy", "n"]].to_dict("records")


def claim_values(study: PinningStudy, p: Parameters) -> dict[str, object]:
    """Every claim's value from the study (a per-run claim's: one row per run, with ``value``)."""
    T = p.train_length
    ape_all = study.seeds[study.seeds.encoding == "APE"]
    ape = ape_all[ape_all.table_init_std == DEFAULT_TABLE_INIT_STD]
    acc = study.accuracy
    default_acc = acc[(acc.encoding == "APE") & (acc.table_init_std == DEFAULT_TABLE_INIT_STD)]
    in_range = default_acc[(default_acc.metric == "in_range") & (default_acc.length == T)][["offset", "seed", "accuracy"]]
    chance = study.chance[study.chance.table_init_std == DEFAULT_TABLE_INIT_STD]
    chance_runs = chance.groupby(["offset", "seed"]).below_ceiling.apply(lambda below: int((~below).sum()))
    windows = acc[(acc.encoding == WINDOWS) & (acc.metric == "out_of_range")]
    windows_runs = windows[windows.length == 2 * T][["offset", "seed", "accuracy"]]
    windows_heads = study.seeds[study.seeds.encoding == WINDOWS]
    windows_far = windows[windows.length == p.longest][["offset", "seed", "accuracy"]]
    rope_far = acc[(acc.encoding == "RoPE") & (acc.metric == "out_of_range") & (acc.length == p.longest)]
    applicable = ape[ape.pinned_target_accuracy.notna()]
    return dict(rows_untouched=int((~ape_all.untrained_bitwise_equal.astype(bool)).sum()),
                in_range_accuracy=in_range.rename(columns={"accuracy": "value"}),
                chance_bound=chance_runs.rename("value").reset_index(),
                argmax_in_range=ape.assign(value=ape.in_range_share),
                pin_predicted=ape.assign(value=ape.predicted_is_pinned),
                windows_generalize=windows_runs.rename(columns={"accuracy": "value"}),
                windows_learned=windows_heads.assign(value=windows_heads.window_accuracy),
                windows_attend_relative=windows_heads.assign(value=windows_heads.relative_share_2T),
                windows_far_above_chance=windows_far.rename(columns={"accuracy": "value"}),
                windows_gap_to_rope=rope_far[["offset", "seed", "accuracy"]].merge(windows_far, on=["offset", "seed"])
                .assign(value=lambda d: d.accuracy_x - d.accuracy_y)[["offset", "seed", "value"]],
                windows_relative_2T=windows_heads.relative_share_2T.mean(),
                windows_relative_far=windows_heads.relative_share_far.mean(),
                windows_far_accuracy=windows_far.accuracy.mean(), rope_far_accuracy=rope_far.accuracy.mean(),
                ape_relative_share=ape.relative_share_2T.mean(),
                chance_beyond_T=int((~chance.chance_inside).sum()),
                pin_limit=ape.limit_share.mean(), pin_limit_min=ape.limit_share.min(),
                chance_upper_max=chance.ci_high.max() * p.vocab,
                pinned_target_accuracy=applicable.pinned_target_accuracy.mean(),
                pinned_target_runs=len(applicable),
                strict_pin_runs=int((ape.pinned_fraction >= STRICT_PIN_FRACTION).sum()),
                pinned_mass_mean=ape.mean_mass_on_pinned.mean(), entropy_mean=ape.entropy_share.mean())
