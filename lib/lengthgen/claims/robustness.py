"""The claims of ``lengthgen.chapters.robustness`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from . import Claim, reported

CLAIMS = (
    Claim("missing_runs", "runs of the spec missing from the committed table (stale or never run)", "==", 0,
          "The committed sweep must hold every run its spec lists, made by the current code and notebooks.",
          role="sanity"),
    Claim("error_runs", "runs that stopped with an error before their claim check", "==", 0,
          "Every run of the sweep must reach its claim check.", role="sanity"),
    Claim("seeds_reused", "sweep runs that share a seed with the chapter's own defaults", "==", 0,
          "Held out means held out: no seed of the sweep is a chapter's default (seeds looked at before a check was "
          "registered are excluded for that check).", role="sanity"),
    Claim("proof_failures", "proof checks that fail in any run of the sweep", "==", 0,
          "They verify theorems and hold for any model, trained or not: one failure is a bug, not a finding.",
          role="sanity"),
    reported("sanity_failures", "sanity checks failing in some run of the sweep (listed in the chapter)"),
    reported("excess_failures", "claims of chapters 1-5 failing on more held-out runs than the tolerated rate allows",
             reason="Every claim stated per run is tested on the held-out runs against a failure rate of 5% (an occasional "
                    "optimization failure), with an exact one-sided binomial test at level 0.01: a claim does not hold when "
                    "its count of failing runs would have probability below 0.01 at that rate."),
    reported("underpowered", "claims whose held-out failure test would flag a 30 % failure rate with probability below "
             "0.8 (too few runs: their 'holds' rules out little)",
             reason="The test's power: a claim failing in three runs of ten does not hold, and a test that would miss "
                    "that more often than one time in five cannot call it held."),
    reported("evidence_runs_failed", "per-run evidence verdicts that fail across the sweep (listed in the chapter)"),
    reported("in_range_share", "share of the held-out runs of chapter 4 whose collapse the in-range law places within one "
             "doubling (pooled; the law holds at 90 %)"),
    reported("delay_share", "share of the judged held-out runs of chapter 4 whose delay under logit scaling the in-range "
             "law predicts within one doubling (pooled; it holds at 90 %)"),
    reported("in_range_constant_share", "the same share for the baseline: the geometric mean of the other seeds' "
             "collapses at the same offset and base"),
    reported("delay_zero_share", "the same share for the baseline of no delay"),
    reported("delayed_share", "share of the collapses of the held-out heads of chapter 4 that logit scaling delays by "
             "at least one doubling"),
    reported("hijack_law_gain_max", "largest, over the held-out runs of chapter 1 (one offset, ten seeds each), median "
             "|log10 error| of the first-hijack law minus that of a per-offset constant fitted on the other seeds"),
)
