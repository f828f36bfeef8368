"""Plots against instance size for the full-sequence tasks: exact match per size and training-loss curves.

The length sweeps of the single-head chapters (:mod:`lengthgen.book.plotting`) put sequence length on a log axis
and chance on the accuracy axis; an instance of a full-sequence task is scored whole (exact match, where chance
is zero) at every size from 1 to a few times the largest trained one, so these plots use a linear size axis
and mark the end of the range a verdict judges instead.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from .plotting import mark_training_length


def encoding_palette(encodings: list[str]) -> dict[str, tuple[float, float, float]]:
    """One colorblind-safe colour per encoding, in the order given, so every figure of a chapter agrees."""
    return dict(zip(encodings, sns.color_palette("colorblind", len(encodings)), strict=True))


def plot_exact_by_size(ax: plt.Axes, accuracy: pd.DataFrame, train_size: int, floor: float,
                       palette: dict[str, tuple[float, float, float]], title: str | None = None) -> None:
    """Exact match against instance size, one line per encoding (mean over seeds, band from lowest to highest seed);
    the largest training size ``N`` dashed, ``2N`` dotted, the generalization ``floor`` dashed across.

    ``accuracy`` has columns ``encoding``, ``seed``, ``size`` and ``exact``."""
    for encoding, g in accuracy.groupby("encoding", sort=False):
        curve = g.groupby("size").exact.agg(["mean", "min", "max"])
        ax.plot(curve.index, curve["mean"], marker="o", ms=2.5, lw=1.3, color=palette.get(encoding), label=encoding)
        ax.fill_between(curve.index, curve["min"], curve["max"], color=palette.get(encoding), alpha=0.15, lw=0)
    mark_training_length(ax, train_size, "largest training size $N$")
    ax.axvline(2 * train_size, color="0.6", ls=":", lw=1.0, label="$2N$: end of the verdict's range")
    ax.axhline(floor, color="0.5", ls="--", lw=0.8)
    ax.set_xlabel("instance size $n$ (answers per instance)")
    ax.set_ylabel("exact match (share of instances)")
    ax.set_ylim(-0.02, 1.02)
    if title:
        ax.set_title(title, fontsize="small")


def plot_loss_curves(ax: plt.Axes, losses: pd.DataFrame, palette: dict[str, tuple[float, float, float]],
                     dashed: tuple[str, ...] = ("reversal",)) -> None:
    """Training loss (mean over seeds) against step on a log axis, one line per (encoding, task); the tasks in
    ``dashed`` dashed. ``losses`` has columns ``encoding``, ``task``, ``seed``, ``step`` and ``loss``."""
    for (encoding, task), g in losses.groupby(["encoding", "task"], sort=False):
        curve = g.groupby("step").loss.mean()
        ax.plot(curve.index, curve.values, lw=1.0, ls="--" if task in dashed else "-", color=palette.get(encoding),
                label=f"{encoding}, {task}")
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("training loss (nats per answer, log scale)")
    ax.legend(fontsize="xx-small", ncol=3)


def placeholder_figure(message: str) -> plt.Figure:
    """A small figure that says, in words, why there is nothing to plot (a committed sweep with no fresh runs)."""
    fig, ax = plt.subplots(figsize=(4, 1))
    ax.text(0.5, 0.5, message, ha="center", va="center")
    ax.set_axis_off()
    return fig
