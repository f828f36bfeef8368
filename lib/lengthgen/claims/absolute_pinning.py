"""The claims of ``lengthgen.chapters.absolute_pinning`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from typing import Any

from ..chapters.absolute_pinning import CHANCE_CEILING
from . import Claim, reported

FAR_CHANCE_MULTIPLE = 8  # windows_far_above_chance: four times the pinning account's practical ceiling of 2/V


def eight_over_v(p: Any) -> float:
    """``8/V``: four times the ceiling ``2/V`` a pinned head stays under, far below a head that carries the rule."""
    return FAR_CHANCE_MULTIPLE / p.vocab

CLAIMS = (
    Claim("rows_untouched", "APE runs with a table row >= T that moved from its initial value", "==", 0,
          "Bitwise, no tolerance: the rows beyond T get an exactly zero gradient, and Adam without weight decay turns a "
          "zero gradient into a zero update.", role="sanity"),
    Claim("in_range_accuracy", "in-range accuracy at length T (default init)", ">=", 0.99,
          "The task is noiseless; 0.99 leaves room for a handful of errors among the evaluation batch's T - k scored "
          "queries per sequence.", per_run=True, role="sanity"),
    Claim("chance_bound", "lengths at which the upper end of the exact 99.9 % interval of the out-of-range accuracy "
          f"exceeds {CHANCE_CEILING:g}/V, the pinned-target query excluded (default init)", "<=", 0,
          "At chance the head answers a far query right with probability 1/V; the ceiling 2/V allows at most 1/V above "
          "chance.",
          role="sanity", per_run=True, given="in_range_accuracy"),
    reported("chance_beyond_T", "(run, length) cells at which 1/V falls outside the exact 99.9 % interval of the "
             "out-of-range accuracy, the pinned-target query excluded (default init); at exact chance about 0.001 "
             "per cell"),
    Claim("argmax_in_range", "share of out-of-range queries whose most attended key lies inside [0, T) (default init)",
          ">=", 1.0, "Every out-of-range query must attend most to a trained position: the pin is absolute and inside the "
                     "training range.", role="sanity", per_run=True, given="in_range_accuracy"),
    Claim("pin_predicted", "out-of-range queries' most common argmax key is the key p* predicted for a vanishing "
          "initialization from the trained weights alone (1 if so, default init)", ">=", 1,
          "p* = argmax_s <W_q c, k_s> is computed with every untrained row set to zero.",
          role="sanity", per_run=True),
    reported("pin_limit", "share of out-of-range queries that attend most to p*, the key predicted for a vanishing "
             "initialization, mean over runs (default init)"),
    reported("pin_limit_min", "lowest share of out-of-range queries that attend most to p* over runs (default init)"),
    reported("chance_upper_max", "highest upper end of the exact 99.9 % interval of the out-of-range accuracy over "
             "(run, length) cells, in multiples of 1/V (default init)"),
    Claim("windows_generalize", "out-of-range accuracy at 2T of the APE head trained on windows over the whole table",
          ">=", 0.5,
          "The control that separates coverage from APE as such: with every row trained, the rule reaches positions beyond "
          "T.", per_run=True),
    Claim("windows_learned", "accuracy of the APE head trained on windows on its training task: length-T windows "
          "starting at 0, T, 2T, ... up to L - T", ">=", 0.95,
          "The head learned the rule at nearly every query of every window; its 1000 steps are shared by 16 times as "
          "many rows as the plain head's.", per_run=True, role="sanity"),
    Claim("windows_attend_relative", "share of the queries t in [T, 2T) of the APE head trained on windows whose most "
          "attended key is t - k", ">=", 0.5,
          "Close to forced for a head that learned: every query was trained to rank t - k above the T keys nearest it, "
          "and at 2T few keys lie farther.", per_run=True, given="windows_learned", role="sanity"),
    Claim("windows_far_above_chance", "out-of-range accuracy at the longest length (16T at the defaults) of the APE "
          "head trained on windows", ">=", eight_over_v,
          "Coverage predicts a decaying rule far above chance; a pinned head stays below the ceiling 2/V, a quarter of "
          "this threshold.", per_run=True, given="windows_learned", threshold_text="8/V"),
    Claim("windows_gap_to_rope", "out-of-range accuracy at the longest length of the rotary head minus that of the "
          "APE head trained on windows, same offset and seed", ">=", 0.2,
          "If coverage were the whole gap, a covered APE head would match the rotary head; a rotary rule that holds "
          "beyond T should lead by a wide margin.", per_run=True, given="windows_learned"),
    reported("windows_relative_2T", "share of the queries t in [T, 2T) of the APE head trained on windows whose most "
             "attended key is t - k, mean over runs"),
    reported("windows_relative_far", "share of the queries t in [L/2, L) of the APE head trained on windows whose most "
             "attended key is t - k, mean over runs (L the longest length)"),
    reported("windows_far_accuracy", "out-of-range accuracy at the longest length of the APE head trained on windows, "
             "mean over runs"),
    reported("rope_far_accuracy", "out-of-range accuracy at the longest length of the rotary head, mean over runs"),
    reported("ape_relative_share", "share of the queries t in [T, 2T) of the plain APE head (default init) whose most "
             "attended key is t - k, mean over runs"),
    reported("pinned_target_accuracy", "accuracy of the out-of-range query whose target is the pinned token, mean over "
             "the runs that have one (default init; NaN when none does)"),
    reported("strict_pin_runs", "runs (default init) whose most common key takes >= 0.9 of out-of-range queries"),
    reported("pinned_mass_mean", "mean attention mass on the pinned key beyond T (default init)"),
    reported("entropy_mean", "mean attention entropy beyond T, as a share of log L (default init)"),
    reported("pinned_target_runs", "runs whose pinned key lies in the last k positions of the training range"),
)
