"""Chapter 9 (``09_connections``): the same implicit-bias story in recurrent models, and beside RASP-L.

Overparameterized linear RNNs (:mod:`lengthgen.model.linear_rnn`) are trained by gradient descent on the first ``T``
coefficients of an impulse response, from random inits of several scales, and judged on sequences of
``length_factor * T``: the learned state dimension (effective Hankel rank) and the extrapolation error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..analysis.lrc import lrc_verdicts
from ..book.parameters import ParameterError, parameter
from ..model import linear_rnn
from .common import Seeds

EXTRAPOLATION_ERROR = 0.01  # relative squared error at or below which a run extrapolates
RANK_TOLERANCE = 1e-2  # singular values above this fraction of the largest count toward the state dimension


@dataclass(frozen=True)
class Parameters(Seeds):
    """Chapter 9's parameters."""

    chapter = "09_connections"
    train_length: int = parameter("training sequence length T (coefficients g_0 .. g_{T-1} are fitted)", 4, 256)
    length_factor: int = parameter("longest evaluated length, in multiples of T", 2, 256)
    state_dim: int = parameter("state dimension d of the overparameterized RNN", 2, 256)
    shift: int = parameter("offset k of the retrieval target 1[i = k]", 0, 255)
    init_stds: tuple[float, ...] = parameter("init scales (A ~ N(0, std^2/d), B, C ~ N(0, std^2)), smallest first "
                                             "in the claims", 1e-3, 2.0)
    steps: int = parameter("gradient-descent steps", 1, 1_000_000)
    lr: float = parameter("learning rate", 1e-5, 1.0)
    clip: float = parameter("largest gradient norm of a step, per run", 1e-3, 1e6)

    def check(self) -> None:
        super().check()
        if self.shift >= self.train_length:
            raise ParameterError(f"parameter 'shift' = {self.shift} is out of range: must be < train_length = "
                                 f"{self.train_length} (the target must be seen in training)")
        if len(self.init_stds) < 2:
            raise ParameterError(f"parameter 'init_stds' = {list(self.init_stds)} is out of range: needs at least two "
                                 "scales (the claims compare the smallest with the largest)")
        if self.state_dim <= self.shift + 1:
            raise ParameterError(f"parameter 'state_dim' = {self.state_dim} is out of range: must exceed the minimal "
                                 f"state shift + 1 = {self.shift + 1} (the RNN is meant to be overparameterized)")

    @property
    def longest(self) -> int:
        return self.length_factor * self.train_length


@dataclass
class RnnStudy:
    """Per run: target, init scale, seed, training and extrapolation errors, state dimension, spectral radius; and
    the learned impulse responses."""

    runs: pd.DataFrame
    responses: pd.DataFrame  # target, init_std, seed, i, learned, target_value


def rnn_study(p: Parameters) -> RnnStudy:
    """Train every (target, init scale, seed) system together and measure it."""
    targets = [linear_rnn.RnnTarget("shift", p.shift), linear_rnn.RnnTarget("oscillator")]
    jobs = [(t, std, seed) for t in targets for std in p.init_stds for seed in p.seed_list]
    responses = np.stack([t.response(p.longest) for t, _, _ in jobs])
    a, b, c = linear_rnn.init_systems(p.state_dim, [std for _, std, _ in jobs], [seed for _, _, seed in jobs])
    a, b, c = linear_rnn.train_systems(a, b, c, responses, p.train_length, p.steps, p.lr, p.clip)
    learned = linear_rnn.impulse_response(a, b, c, p.longest).numpy()
    ranks = linear_rnn.hankel_rank(learned, p.train_length, RANK_TOLERANCE)
    radius = np.abs(np.linalg.eigvals(a.numpy())).max(axis=-1)
    train_error = linear_rnn.relative_error(learned, responses, p.train_length)
    long_error = linear_rnn.relative_error(learned, responses, p.longest)
    weight = linear_rnn.position_weights(p.longest)
    tail_error = (((learned - responses) ** 2 * weight)[:, p.train_length :].sum(-1)
                  / (responses**2 * weight).sum(-1))
    runs = pd.DataFrame([dict(target=t.name, minimal_order=t.minimal_order, init_std=std, seed=seed,
                              train_error=train_error[n], long_error=long_error[n], tail_error=tail_error[n],
                              state_dim=ranks[n],
                              spectral_radius=radius[n]) for n, (t, std, seed) in enumerate(jobs)])
    rows = [dict(target=t.name, init_std=std, seed=seed, i=i, learned=learned[n, i], target_value=responses[n, i])
            for n, (t, std, seed) in enumerate(jobs) for i in range(min(p.longest, 4 * p.train_length))]
    return RnnStudy(runs, pd.DataFrame(rows))


def minimal_order_mismatches(p: Parameters) -> int:
    """Targets whose exact response's Hankel rank is not their declared minimal order."""
    targets = [linear_rnn.RnnTarget("shift", p.shift), linear_rnn.RnnTarget("oscillator")]
    exact = np.stack([t.response(2 * p.train_length) for t in targets])
    ranks = linear_rnn.hankel_rank(exact, p.train_length, RANK_TOLERANCE)
    return int(sum(r != t.minimal_order for r, t in zip(ranks, targets, strict=True)))


def extra_mode_misses(p: Parameters, radius: float = 0.9) -> int:
    """Targets whose Hankel rank does not rise by one when a mode ``eps * radius^i`` is added, with ``eps`` set so
    that it alone is a relative error of :data:`EXTRAPOLATION_ERROR` at the longest length."""
    misses = 0
    for target in (linear_rnn.RnnTarget("shift", p.shift), linear_rnn.RnnTarget("oscillator")):
        exact = target.response(p.longest)
        mode = radius ** np.arange(p.longest)
        weight = linear_rnn.position_weights(p.longest)
        eps = np.sqrt(EXTRAPOLATION_ERROR * (exact**2 * weight).sum() / (mode**2 * weight).sum())
        rank = linear_rnn.hankel_rank((exact + eps * mode)[None, :], p.train_length, RANK_TOLERANCE)[0]
        misses += int(rank != target.minimal_order + 1)
    return misses


def failing(values: pd.Series, threshold: float) -> int:
    """How many values are above ``threshold`` or not finite (a diverged run fails)."""
    return int((~(values <= threshold)).sum())


def at_init(runs: pd.DataFrame, std: float) -> pd.DataFrame:
    """The runs at one init scale."""
    return runs[np.isclose(runs.init_std, std)]


# What the RASP-L study (Zhou et al.) reports for the task closest to each of chapter 8's tasks (the mapping is ours).
RASP_L_STUDY: dict[str, str] = {
    "shift": "not studied there (a one-step relative lookup)",
    "prefix_sum": "not studied there (their counting task emits successive integers; a running sum is not it)",
    "reversal": "not studied there",
    "copy": "generalizes with unique tokens, not with repeated ones",
    "unaligned_copy": "as copy",
    "parity_cot": "plain parity does not generalize (no short program); they report that scratchpad formats improve it a lot",
}
# Chapter 8's default settings, at which the position-only verdicts are recomputed (glued in the prose).
POLA_SETTINGS: dict[str, float] = dict(train_scale=8, scale_factor=8, shift=2, prefix_max=3, rope_dim=128, rope_base=10.0)


def rasp_l_table() -> pd.DataFrame:
    """Per task: the RASP-L study's finding beside the tabular relations under which position-only attention
    generalizes (LRC's verdict, exact for tabular relations); chapter 12 sets the transformer's runs beside both."""
    verdicts = lrc_verdicts(**POLA_SETTINGS)
    tabular = verdicts[verdicts.relation != "rope"]  # LRC is not sufficient for the rotary span (chapter 8)
    generalize = tabular[tabular.verdict == "generalizes"].groupby("task").relation.agg(
        lambda r: ", ".join(x.upper() for x in r))
    return pd.DataFrame({"RASP-L study (Zhou et al.), closest task": pd.Series(RASP_L_STUDY),
                         "POLA: tabular relations that generalize (LRC, exact there; chapter 8)":
                             generalize.reindex(list(RASP_L_STUDY)).fillna("none")})


def claim_values(study: RnnStudy, p: Parameters) -> dict[str, object]:
    """Every claim's value from the study: the smallest init scale's runs against the largest's."""
    small, large = min(p.init_stds), max(p.init_stds)
    runs = study.runs
    smallest, largest = at_init(runs, small), at_init(runs, large)
    small_shift = smallest[smallest.target == "shift"]
    tail = runs[runs.target == "shift"].groupby("init_std").tail_error.median()
    return dict(targets_minimal_order=minimal_order_mismatches(p), rank_sees_extra_mode=extra_mode_misses(p),
                small_init_minimal_state=int((small_shift.state_dim != small_shift.minimal_order).sum()),
                small_init_extrapolates=failing(smallest.long_error, EXTRAPOLATION_ERROR),
                large_init_excess_state=float((largest.state_dim > largest.minimal_order).mean()),
                large_init_long_error=largest.long_error.max(skipna=False),
                tail_error_ratio=tail[large] / max(tail[small], 1e-300),
                large_init_train_error=largest.train_error.max(),
                large_init_unstable=int((largest.spectral_radius > 1).sum()),
                small_init_extrapolation_max=smallest.long_error.max())
