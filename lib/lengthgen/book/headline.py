"""The landing page's headline figure: RoPE against APE beyond the training length, one head and one network, drawn
at build time from this build's records (chapter 2's accuracy curves, chapter 11's exact match)."""

from __future__ import annotations

import io
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from .plotting import ENCODING_PALETTE, plot_length_sweep, set_theme  # noqa: E402
from .size_plots import plot_exact_by_size  # noqa: E402

HEAD = "02_absolute_pinning"
NETWORK = "11_zoo_networks"
NETWORK_TASK = "shift"  # the network chapter's task that is the head's task on full sequences
NETWORK_NAMES = {"rope": "RoPE", "ape": "APE"}


def head_curves(record: dict) -> pd.DataFrame:
    """Chapter 2's last-query accuracy per run and length, with the length in multiples of T (empty without it)."""
    rows = pd.DataFrame(record.get("details", {}).get("accuracy", []))
    if rows.empty:
        return rows
    return rows.assign(ratio=rows.length / record["parameters"]["train_length"])


def network_curves(record: dict) -> pd.DataFrame:
    """Chapter 11's exact match of its RoPE and APE networks on shift, per seed and size, size in multiples of N."""
    rows = pd.DataFrame(record.get("details", {}).get("exact_match", []))
    if rows.empty:
        return rows
    rows = rows[(rows.task == NETWORK_TASK) & rows.encoding.isin(list(NETWORK_NAMES))]
    return rows.assign(encoding=rows.encoding.map(NETWORK_NAMES), ratio=rows["size"] / record["parameters"]["train_size"])


def at(curves: pd.DataFrame, encoding: str, ratio: float, column: str) -> str:
    """``"0.42 at 1.5"``: the mean over runs of ``column`` at the largest ratio not above ``ratio`` (ratio > 1: at the
    first ratio beyond the training range if none lies between), in words for a caption."""
    mine = curves[curves.encoding == encoding]
    beyond = mine[mine.ratio > 1]
    shown = mine[mine.ratio <= ratio + 1e-9]
    if ratio > 1 and (shown.empty or shown.ratio.max() <= 1) and len(beyond):
        shown = beyond
        where = beyond.ratio.min()
    elif len(shown):
        where = shown.ratio.max()
    else:
        return "no value"
    return f"{shown[shown.ratio == where][column].mean():.2f} at {where:.3g}"


def headline_figure(records: dict[str, dict]) -> tuple[str, str] | None:
    """The figure as inline SVG and its caption with this build's numbers; None when either record lacks its rows."""
    head, network = head_curves(records.get(HEAD, {})), network_curves(records.get(NETWORK, {}))
    if head.empty or network.empty:
        return None
    set_theme()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.2))
    parameters = records[HEAD]["parameters"]
    runs_as_units = head.assign(seed=head.seed * 1000 + head.offset)  # one line per (offset, seed) run
    plot_length_sweep(left, runs_as_units, parameters["train_length"], parameters["vocab"], hue="encoding",
                      palette=ENCODING_PALETTE, title="one position-only head (chapter 2)")
    left.set_ylabel("accuracy of the last query")
    left.text(2.3 * parameters["train_length"], 0.82, "the paper's claim: RoPE holds past $T$, APE does not",
              fontsize="small", color="0.25")
    plot_exact_by_size(right, network, records[NETWORK]["parameters"]["train_size"], math.nan, ENCODING_PALETTE,
                       title="a two-layer transformer on shift (chapter 11)")
    right.legend(fontsize="small", loc="center right")
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    plt.close(fig)
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg"):]
    longest = float(head.ratio.max())
    runs = {e: head[head.encoding == e].groupby(["offset", "seed"]).ngroups for e in ("RoPE", "APE")}
    seeds = {e: network[network.encoding == e].seed.nunique() for e in ("RoPE", "APE")}
    caption = (
        f"RoPE against APE beyond the training range (dashed line). Left, one head ({runs['RoPE']} RoPE and "
        f"{runs['APE']} APE runs): the last query's accuracy is {at(head, 'RoPE', longest, 'accuracy')}T for RoPE "
        f"and {at(head, 'APE', 1.01, 'accuracy')}T for APE; chance is dotted. Right, a two-layer transformer "
        f"({seeds['RoPE']} and {seeds['APE']} seeds): exact match is {at(network, 'APE', 1.01, 'exact')}N for APE, "
        f"and {at(network, 'RoPE', 1.5, 'exact')}N and {at(network, 'RoPE', 2, 'exact')}N for RoPE.")
    return svg, caption
