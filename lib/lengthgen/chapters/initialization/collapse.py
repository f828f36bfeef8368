"""Chapter 13's collapse cells and the rules that predict them: per (network, length), does the last position
collapse, and how well does a rule that knows only the configuration, or only the length, say so."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from .registered import NETWORK_KEYS


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
