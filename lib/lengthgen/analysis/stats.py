"""Small statistics used by the claim checks: binomial intervals and seed summaries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import binomtest


def binomial_interval(successes: int, trials: int, confidence: float = 0.999) -> tuple[float, float]:
    """Exact (Clopper-Pearson) two-sided interval for a binomial proportion."""
    ci = binomtest(int(successes), int(trials)).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def consistent_with(p: float, accuracy: float, trials: int, confidence: float = 0.999) -> bool:
    """Whether ``p`` lies in the exact interval around an observed ``accuracy`` over ``trials``."""
    low, high = binomial_interval(round(accuracy * trials), trials, confidence)
    return low <= p <= high


def excess_failure_p_value(failures: int, trials: int, tolerated_rate: float) -> float:
    """Exact one-sided binomial p-value: the chance of at least ``failures`` failures in ``trials`` runs if each
    failed independently with probability ``tolerated_rate``. Small values say the failure rate exceeds it."""
    if trials == 0:
        return 1.0
    return float(binomtest(int(failures), int(trials), tolerated_rate, alternative="greater").pvalue)


def seed_summary(df: pd.DataFrame, value: str, by: list[str]) -> pd.DataFrame:
    """Mean, standard deviation, min and max of ``value`` over seeds, grouped by ``by``."""
    return df.groupby(by)[value].agg(["mean", "std", "min", "max", "count"]).reset_index()


def spread_text(values: pd.Series | list[float], fmt: str = ".2f") -> str:
    """``"mean ± sd (min–max, n runs)"``: how a number measured on several runs reads in prose."""
    v = pd.Series(values, dtype=float)
    if len(v) == 1:
        return f"{v.iloc[0]:{fmt}} (1 run)"
    return f"{v.mean():{fmt}} ± {v.std():{fmt}} ({v.min():{fmt}}–{v.max():{fmt}}, {len(v)} runs)"


@dataclass(frozen=True)
class Agreement:
    """How well a prediction matches observations: ``R^2`` and the largest absolute error."""

    r2: float
    max_abs: float
    n: int


def agreement(observed: Sequence[float], predicted: Sequence[float]) -> Agreement:
    """``R^2 = 1 - SS_res / SS_tot`` of ``predicted`` against ``observed``, and ``max |observed - predicted|``."""
    obs, pred = np.asarray(observed, dtype=float), np.asarray(predicted, dtype=float)
    residual = obs - pred
    total = ((obs - obs.mean()) ** 2).sum()
    r2 = float(1 - (residual**2).sum() / total) if total > 0 else float("nan")
    return Agreement(r2, float(np.abs(residual).max()) if len(obs) else float("nan"), len(obs))
