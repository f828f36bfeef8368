"""The claims of ``lengthgen.chapters.robustness`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from ..chapters.committed import SIGNIFICANCE, TOLERATED_FAILURE_RATE
from . import Claim, reported

CLAIMS = (
    Claim("missing_runs", "runs of the spec missing from the committed table (stale or never run)", "==", 0,
          "The committed sweep must hold every run its spec lists, made by the current code and notebooks.",
          role="sanity"),
    Claim("error_runs", "runs that stopped with an error before their claim check", "==", 0,
          "Every run of the sweep must reach its claim check.", role="sanity"),
    Claim("seeds_reused", "sweep runs that share a seed with the chapter's own defaults", "==", 0,
          "Held out means held out: no seed of the sweep was seen while the chapters and their thresholds were "
          "written.", role="sanity"),
    Claim("proof_failures", "proof checks that fail in any run of the sweep", "==", 0,
          "They verify theorems and hold for any model, trained or not: one failure is a bug, not a finding.",
          role="sanity",
          revised="Was 'proof and sanity checks'. The first full held-out sweep had one sanity check failing: chapter "
                  "2's in-range accuracy at T stayed below its floor for 2 of 10 seeds at offset 3, a training "
                  "precondition that tripped, not a construction that broke. Sanity failures are now reported "
                  "(sanity_failures) and listed, and the runs concerned are named on the summary page."),
    reported("sanity_failures", "sanity checks failing in some run of the sweep (listed in the chapter)"),
    reported("excess_failures", "claims of chapters 1-5 failing on more held-out runs than the tolerated rate allows",
             reason=f"Every claim stated per run is tested on the held-out runs against a failure rate of "
                    f"{TOLERATED_FAILURE_RATE:.0%} (an occasional optimization failure), with an exact one-sided "
                    f"binomial test at level {SIGNIFICANCE}: a claim does not hold when its count of failing runs "
                    f"would have probability below {SIGNIFICANCE} at that rate.",
             revised="Registered as a check (== 0). The first full held-out sweep found chapter 2's pin_limit "
                     "failing in 8 of 40 runs. A claim that does not reproduce on held-out seeds is a result: the "
                     "summary page reports it against the paper claim it qualifies, instead of stopping the book."),
    reported("evidence_runs_failed", "per-run evidence verdicts that fail across the sweep (listed in the chapter)"),
)
