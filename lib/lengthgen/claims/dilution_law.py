"""The claims of ``lengthgen.chapters.dilution_law`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

import math
from typing import Any

from ..chapters.dilution_law import HALF_LENGTH_OCTAVES
from . import Claim, reported

IN_RANGE_SHARE = 0.9  # the in-range law and its predicted delay hold when at least this share of runs is within the bar


def paths_tolerance(p: Any) -> float:
    """Four binomial standard errors of the difference of two accuracies near 1/2, each over ``eval_batch`` sequences."""
    return 4 * math.sqrt(2 * 0.25 / p.eval_batch)


CLAIMS = (
    Claim("half_length", "|log2(predicted / observed length at which last-query accuracy falls to 1/2)|, two-scale law",
          "<=", HALF_LENGTH_OCTAVES,
          "The two-scale law must place the collapse within one doubling (the grid of evaluated lengths doubles); it "
          "carries the slow planes beyond T, so this is a sanity check.",
          per_run=True, role="sanity"),
    Claim("mass_law", "largest |log10(law / exact target mass)| beyond T, two-scale law", "<=", 0.3,
          "Within a factor 2 at every length beyond T.", per_run=True, role="sanity"),
    Claim("paths_agree", "largest |forward-pass - Toeplitz-row observed accuracy| where both are measured", "<=",
          paths_tolerance, "The two observations sample different sequences: four binomial standard errors of a difference "
                           "near 1/2.",
          role="sanity", threshold_text="4 sqrt(0.5 / eval_batch)"),
    Claim("mc_row_error", "largest |Monte Carlo from the exact row - observed| accuracy", "<=", 0.05,
          "The mass-to-accuracy model itself, fed the exact row: three binomial standard errors near 1/2 plus its own Monte "
          "Carlo error.",
          role="sanity"),
    Claim("peak_memory_mb", "peak resident memory of any process (MB)", "<", 2048,
          "An evaluation out to thousands of training lengths must fit a laptop: the Toeplitz evaluation never builds "
          "an L x L matrix.", role="sanity"),
    reported("dilution_half_length", "median |log2(predicted / observed half-accuracy length)| of the pure dilution "
             "(Weyl) law"),
    reported("dilution_fails_runs", "runs in which the pure dilution law would fail half_length (the wrong account the "
             "check must reject)"),
    reported("wrap_slope", "slope of log observed half-accuracy length against log(1/theta_min) across bases "
             "(1: the collapse scales with the slowest plane's period)"),
    reported("closed_form_max_error", "largest |closed-form Gaussian accuracy - observed| (non-saturated points)"),
    reported("in_range_runs", "runs the in-range law is judged on: heads that learned (accuracy at T at least 0.99) "
             "whose error can decide against one doubling (a collapse beyond the horizon is only a bound)"),
    reported("in_range_within_runs", "judged runs whose collapse the in-range law places within one doubling (the law "
             f"holds if at least {IN_RANGE_SHARE:.0%} of them are)"),
    reported("in_range_half_length", "median |log2(predicted / observed half-accuracy length)| of the in-range law"),
    reported("in_range_constant_runs", "runs judged for the baseline: the geometric mean of the other seeds' collapses "
             "at the same offset and base"),
    reported("in_range_constant_within_runs", "judged runs whose collapse that baseline places within one doubling"),
    reported("delay_runs", "heads that learned and collapse within the horizon: the collapses logit scaling can delay"),
    reported("delayed_runs", "of those, collapses that logit scaling by log L / log T delays by at least one doubling "
             "(a lower bound where the scaled head holds to the horizon)"),
    reported("delay_judged", "collapses whose delay the in-range law is judged on (a law that predicts no collapse "
             "misses; a delay beyond the horizon is judged only where the bound decides)"),
    reported("delay_within_runs", "judged collapses whose delay the in-range law predicts within one doubling (it "
             f"holds if at least {IN_RANGE_SHARE:.0%} are)"),
    reported("delay_zero_judged", "collapses judged for the baseline 'no delay' (what a far key out-scoring the target "
             "predicts)"),
    reported("delay_zero_within_runs", "judged collapses whose delay 'no delay' places within one doubling"),
    reported("delay_median", "median observed delay of the collapse under logit scaling, in doublings (a lower bound "
             "where the scaled head holds to the horizon)"),
    reported("delay_in_range_median", "median delay the in-range law predicts, in doublings"),
)
