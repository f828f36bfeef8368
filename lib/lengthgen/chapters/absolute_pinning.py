"""Chapter 2 (``02_absolute_pinning``): untouched APE rows and the pinned absolute key."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd
import torch

from ..book.parameters import ParameterError, parameter
from ..model.evaluation import doubling_lengths, length_sweep
from ..model.heads import ApeHead
from ..model.training import TrainedRun
from .claims import Claim, reported
from .common import GB, Execution, HeadTraining, LengthSweep, head_run_configs, map_stacked
from .stats import binomial_interval

DEFAULT_TABLE_INIT_STD = 0.02  # the GPT-2 convention for learned position tables
STRICT_PIN_FRACTION = 0.9  # "one key": the most common argmax key takes at least this share of out-of-range queries


@dataclass(frozen=True)
class Parameters(HeadTraining, LengthSweep, Execution):
    """Chapter 2's parameters."""

    chapter = "02_absolute_pinning"
    ablation_table_init_std: float = parameter("APE table init std of the ablation (the default init is 0.02)", 1e-4, 10.0)

    def check(self) -> None:
        super().check()
        if self.ablation_table_init_std == DEFAULT_TABLE_INIT_STD:
            raise ParameterError(f"parameter 'ablation_table_init_std' = {self.ablation_table_init_std} is the default "
                                 f"init itself: the ablation must use another value in [1e-4, 10.0]")

    def memory_gb(self) -> float:
        return self.workers * (16 * self.longest**2 + 8 * self.eval_batch * (self.longest + 256 * self.vocab)) / GB

    def memory_rule(self) -> str:
        return "per worker: 16 bytes x longest length^2 for the out-of-range attention matrix, plus the evaluation batch"


CLAIMS = (
    Claim("rows_untouched", "APE rows >= T bitwise equal to their initial values (1 = all)", "==", 1,
          "Bitwise, no tolerance: the rows beyond T get an exactly zero gradient, and Adam without weight decay turns "
          "a zero gradient into a zero update.", role="sanity"),
    Claim("in_range_accuracy", "lowest in-range accuracy of any APE run", ">=", 0.99,
          "The task is noiseless; 0.99 leaves room for a handful of errors among 256 x 27 scored queries."),
    Claim("chance_outside_interval", "(run, length) cells whose exact 99.9 % interval excludes 1/V", "==", 0,
          "For every run and length 1/V must lie inside the exact (Clopper-Pearson) 99.9 % interval of the out-of-range "
          "accuracy; with 20 cells a correct claim fails by chance with probability about 2 %."),
    Claim("argmax_in_range", "out-of-range queries whose argmax key is inside [0, T) (1 = all)", "==", 1,
          "Every out-of-range query's most attended key must be a trained position.",
          revised="First asserted in the strict form 'the most common key takes >= 0.9 of the out-of-range queries, in "
                  "every seed'. It held in 4 of 5 seeds at the first measurement (seed 4: 0.81, queries split between two "
                  "keys), so only this robust form is asserted and the strict form is reported."),
    reported("strict_pin_seeds", "runs whose most common key takes >= 0.9 of out-of-range queries"),
)


@dataclass(frozen=True)
class TableMovement:
    """How far APE table rows moved from their initial values during training."""

    untrained_bitwise_equal: bool  # every row >= T equals its initial value bit for bit
    untrained_max_change: float
    trained_mean_change: float  # mean L2 change of the rows < T, for scale


def table_movement(head: ApeHead, initial_table: torch.Tensor, train_length: int) -> TableMovement:
    """Compare the trained table with its initialization, split at the training length."""
    table = head.table.detach()
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
    mean_mass_on_pinned: float  # mean attention weight on pinned_key


@torch.no_grad()
def pinning(head: ApeHead, train_length: int, length: int) -> Pinning:
    """Argmax statistics of the out-of-range queries ``t`` in ``[T, length)``."""
    queries = torch.arange(train_length, length)
    attn = head.attention(length, queries)
    keys = attn.argmax(-1)
    key = int(torch.mode(keys.cpu()).values)
    return Pinning(
        pinned_key=key,
        pinned_fraction=float((keys == key).double().mean()),
        pinned_in_range=key < train_length,
        mean_mass_on_pinned=float(attn[:, key].mean()),
    )


@dataclass
class PinningStudy:
    """Chapter 2's tables: per run; accuracy per run and length; the argmax key of every out-of-range query."""

    runs: dict[tuple[str, float], list[TrainedRun]]  # (encoding, table init std) -> runs over offsets x seeds
    seeds: pd.DataFrame  # encoding, table_init_std, offset, seed, untrained_bitwise_equal, ..., pinned_key, pinned_fraction, ...
    accuracy: pd.DataFrame  # encoding, table_init_std, offset, seed, length, metric, accuracy, n
    argmax: pd.DataFrame  # table_init_std, offset, seed, query, key (argmax key of every query at the longest length)


def measure_run(run: TrainedRun, job: tuple[str, float, list[int], int]) -> tuple[TrainedRun, dict, pd.DataFrame, pd.DataFrame]:
    """In the worker, after training: sweep the head's accuracy, and for APE measure its table and its pin."""
    encoding, std, lengths, eval_batch = job
    cfg, head = run.config, run.model
    T, longest = cfg.train_length, lengths[-1]
    label = dict(encoding=encoding, table_init_std=std, offset=cfg.offset, seed=cfg.seed)
    sweep = length_sweep(head, cfg, lengths, eval_batch, out_of_range_queries=512).assign(**label)
    row, argmax = dict(label), pd.DataFrame()
    if encoding == "APE":
        queries = torch.arange(T, longest)
        argmax = pd.DataFrame(dict(table_init_std=std, offset=cfg.offset, seed=cfg.seed, query=queries.numpy(),
                                   key=argmax_keys(head, longest, queries).numpy()))
        row.update(asdict(table_movement(head, run.initial_state["table"], T)), **asdict(pinning(head, T, longest)))
    return run, row, sweep, argmax


def pinning_study(p: Parameters, progress: bool = True) -> PinningStudy:
    """Train APE heads (default and ablation init) and RoPE heads; measure movement, accuracy, pinning."""
    lengths = doubling_lengths(p.train_length, p.length_factor)
    groups = {
        ("APE", DEFAULT_TABLE_INIT_STD): head_run_configs(p, "ape", table_init_std=DEFAULT_TABLE_INIT_STD),
        ("APE", p.ablation_table_init_std): head_run_configs(p, "ape", table_init_std=p.ablation_table_init_std),
        ("RoPE", 0.0): head_run_configs(p, "rope"),
    }
    jobs = [(cfg, (encoding, std, lengths, p.eval_batch)) for (encoding, std), cfgs in groups.items() for cfg in cfgs]
    results = map_stacked(measure_run, jobs, p.workers, progress)
    runs: dict[tuple[str, float], list[TrainedRun]] = {key: [] for key in groups}
    for (_, (encoding, std, *_)), (run, *_rest) in zip(jobs, results, strict=True):
        runs[(encoding, std)].append(run)
    _, rows, sweeps, argmax = zip(*results, strict=True)
    return PinningStudy(runs, pd.DataFrame(list(rows)), pd.concat(sweeps, ignore_index=True),
                        pd.concat([a for a in argmax if len(a)], ignore_index=True))


def chance_consistency(accuracy: pd.DataFrame, vocab: int, confidence: float = 0.999) -> pd.DataFrame:
    """Out-of-range rows with the exact binomial interval and whether chance ``1/V`` lies inside it."""
    rows = accuracy[accuracy.metric == "out_of_range"].copy()
    bounds = [binomial_interval(round(a * n), n, confidence) for a, n in zip(rows.accuracy, rows.n, strict=True)]
    rows["ci_low"], rows["ci_high"] = zip(*bounds, strict=True) if bounds else ([], [])
    rows["chance_inside"] = (rows.ci_low <= 1 / vocab) & (1 / vocab <= rows.ci_high)
    return rows
