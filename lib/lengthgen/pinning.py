"""Chapter 2's measurements: untouched APE rows and the pinned absolute key."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd
import torch

from .evaluation import length_sweep
from .heads import ApeHead
from .stats import binomial_interval
from .studies import doubling_lengths, run_configs
from .training import TrainedRun, train_many


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
    return head.attention(length, query_pos).argmax(-1)


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
    key = int(torch.mode(keys).values)
    return Pinning(
        pinned_key=key,
        pinned_fraction=float((keys == key).double().mean()),
        pinned_in_range=key < train_length,
        mean_mass_on_pinned=float(attn[:, key].mean()),
    )


@dataclass
class PinningStudy:
    """Chapter 2's tables: per seed and table-init std; accuracy per seed, encoding and length."""

    runs: dict[tuple[str, float], list[TrainedRun]]  # (encoding, table init std) -> runs over seeds
    seeds: pd.DataFrame  # encoding, table_init_std, seed, bitwise, in_range_acc, pinned_key, pinned_fraction, ...
    accuracy: pd.DataFrame  # encoding, table_init_std, seed, length, metric, accuracy, n
    argmax: pd.DataFrame  # table_init_std, seed, query, key (argmax key of every query, longest length)


def pinning_study(params: dict, progress: bool = True) -> PinningStudy:
    """Train APE heads (default and ablation init) and RoPE heads; measure movement, accuracy, pinning."""
    T, V = params["train_length"], params["vocab"]
    lengths = doubling_lengths(T, params["length_factor"])
    longest = lengths[-1]
    groups = {
        ("APE", 0.02): run_configs(params, "ape", table_init_std=0.02),
        ("APE", params["ablation_table_init_std"]): run_configs(params, "ape", table_init_std=params["ablation_table_init_std"]),
        ("RoPE", 0.0): run_configs(params, "rope"),
    }
    runs = {key: train_many(cfgs, progress=progress) for key, cfgs in groups.items()}
    seed_rows, acc, argmax = [], [], []
    for (encoding, std), group in runs.items():
        for run in group:
            seed, head = run.config.seed, run.head
            sweep = length_sweep(head, lengths, T, params["offset"], V, seed, batch=params["eval_batch"])
            acc.append(sweep.assign(encoding=encoding, table_init_std=std, seed=seed))
            row = dict(encoding=encoding, table_init_std=std, seed=seed)
            if encoding == "APE":
                move = table_movement(head, run.initial_state["table"], T)
                pin = pinning(head, T, longest)
                queries = torch.arange(T, longest)
                argmax.append(pd.DataFrame(dict(table_init_std=std, seed=seed, query=queries.numpy(),
                                                key=argmax_keys(head, longest, queries).numpy())))
                row.update(asdict(move), **asdict(pin))
            seed_rows.append(row)
    return PinningStudy(runs, pd.DataFrame(seed_rows), pd.concat(acc, ignore_index=True), pd.concat(argmax, ignore_index=True))


def chance_consistency(accuracy: pd.DataFrame, vocab: int, confidence: float = 0.999) -> pd.DataFrame:
    """Out-of-range rows with the exact binomial interval and whether chance ``1/V`` lies inside it."""
    rows = accuracy[accuracy.metric == "out_of_range"].copy()
    bounds = [binomial_interval(round(a * n), n, confidence) for a, n in zip(rows.accuracy, rows.n, strict=True)]
    rows["ci_low"], rows["ci_high"] = zip(*bounds, strict=True) if bounds else ([], [])
    rows["chance_inside"] = (rows.ci_low <= 1 / vocab) & (1 / vocab <= rows.ci_high)
    return rows
