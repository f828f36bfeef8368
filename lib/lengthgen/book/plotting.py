"""The book's one plotting theme and the helpers every length sweep uses."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

ENCODING_PALETTE: dict[str, str] = {"RoPE": "#0072B2", "APE": "#D55E00", "NoPE": "#009E73", "linear": "#CC79A7"}


def set_theme() -> None:
    """Apply the shared seaborn theme (call once at the top of a chapter)."""
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind", font_scale=0.95)
    plt.rcParams.update({"figure.dpi": 110, "savefig.bbox": "tight", "axes.titleweight": "bold",
                         "figure.constrained_layout.use": True})


def mark_training_length(ax: plt.Axes, train_length: float, label: str = "training length $T$") -> None:
    """Mark the training-length boundary on a length axis with a dashed vertical line."""
    ax.axvline(train_length, color="0.3", linestyle="--", linewidth=1.2, label=label, zorder=0)


def chance_line(ax: plt.Axes, vocab: int) -> None:
    """A dotted horizontal line at chance accuracy ``1 / vocab``."""
    ax.axhline(1 / vocab, color="0.5", linestyle=":", linewidth=1.0, label=f"chance $1/V$ = {1 / vocab:.3f}")


def length_axis(ax: plt.Axes, lengths: list[int] | None = None) -> None:
    """A log2 x axis labelled as sequence length in tokens."""
    ax.set_xscale("log", base=2)
    if lengths is not None:
        ax.set_xticks(lengths, [str(n) for n in lengths])
        ax.minorticks_off()
    ax.set_xlabel("sequence length $L$ (tokens, log scale)")


def plot_length_sweep(
    ax: plt.Axes,
    accuracy: pd.DataFrame,
    train_length: int,
    vocab: int,
    hue: str = "metric",
    palette: dict[str, str] | None = None,
    title: str | None = None,
) -> None:
    """Accuracy vs length: one thin line per seed, the seed mean bold, T marked, chance dotted."""
    sns.lineplot(data=accuracy, x="length", y="accuracy", hue=hue, units="seed", estimator=None,
                 lw=0.8, alpha=0.35, ax=ax, palette=palette, legend=False)
    sns.lineplot(data=accuracy, x="length", y="accuracy", hue=hue, errorbar=None, lw=2.2,
                 marker="o", ax=ax, palette=palette)
    mark_training_length(ax, train_length)
    chance_line(ax, vocab)
    length_axis(ax, sorted(accuracy.length.unique()))
    ax.set_ylabel("accuracy (fraction correct)")
    ax.set_ylim(-0.03, 1.05)
    if title:
        ax.set_title(title)
    ax.legend(fontsize="small", loc="center left")
