"""The claims of ``lengthgen.chapters.zoo_networks`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from ..chapters.zoo_networks import HELD_OUT_MINIMUM
from . import Claim, reported

# checks were revised (see CLAIMS); evidence comes from seeds 710 and up


CLAIMS = (
    reported("registered_cells", "runs (encoding, task, seed) that learned in range and whose measured verdict differs "
             "from the verdict registered for their cell before any run (PREDICTED_VERDICTS)"),
    reported("not_learned_runs", "runs that did not learn their task in range within their steps"),
    Claim("absolute_never_generalize", "APE and sinusoidal runs that learned in range and generalize", "==", 0,
          "Sanity check: beyond the training sequences an absolute encoding leaves rows it never trained (APE) or vectors "
          "it never saw (sinusoidal).", role="sanity"),
    Claim("absolute_collapses_past_n", "APE and sinusoidal runs that learned in range and whose exact match at N + 1 "
          "and N + 2 is all at least the generalization floor", "==", 0,
          "Evidence, the contrast to relative_carries_past_n on the same window: one or two answers past the largest "
          "training instance, an absolute encoding reads rows or vectors no training sequence reached, so the rule it "
          "memorized has nothing to stand on (chapter 2)."),
    reported("relative_shift_generalizes", "RoPE and T5 shift runs that learned in range and do not generalize "
             "(exact match at least the floor at every size to 2N)"),
    Claim("relative_carries_past_n", "RoPE, T5 and partial-RoPE shift runs that learned in range and whose exact match "
          "at N + 1 and N + 2 is not all at least the generalization floor", "==", 0,
          "Evidence: an instance one or two answers longer than any trained one has a few queries at positions and offsets "
          "no training sequence had; offset-relative logits carry the rule there, while a network that read absolute "
          "position, as APE does (absolute_collapses_past_n), would drop at once."),
    reported("reversal_generalizes", "reversal runs that learned in range and generalize (registered: none, since "
             "reversal needs a relation of the query and the separator that no encoding of the zoo offers)",
             reason="Reported, not asserted: reversal is trained only in the committed sweep, whose runs the tests do not "
                    "repeat, and if no run learns it the count judges nothing (reversal_learned says how many did)."),
    reported("reversal_learned", "reversal runs that learned in range"),
    reported("committed_absolute_carries", "committed-sweep APE runs that learned copy or reversal and carry it to "
             "N + 1 and N + 2 (absolute_collapses_past_n on the sweep's runs, which the tests do not repeat)"),
    reported("committed_absolute_judged", "committed-sweep APE runs that learned copy or reversal"),
    Claim("held_out_relative_carries", "share of the committed sweep's held-out shift runs (seeds HELD_OUT_SHIFT_SEEDS, "
          "the chapter's defaults otherwise) with RoPE, T5 or partial RoPE that learned in range and whose exact match at "
          "N + 1 and N + 2 is all at least the generalization floor", ">=", 0.75,
          "Evidence on seeds nothing was chosen on: relative_carries_past_n asked of this page's two seeds per encoding; "
          "here the same window on three more."),
    Claim("held_out_absolute_carries", "the committed sweep's held-out APE or sinusoidal shift runs that learned in "
          "range and carry shift to N + 1 and N + 2", "==", 0,
          "Evidence, absolute_collapses_past_n on held-out seeds: one answer past the largest training instance the last "
          "query reads a row of the table no training sequence reached, so an absolute rule has nothing to stand on there."),
    Claim("held_out_judged", f"held-out groups with fewer learned runs than their minimum (relative: "
          f"{HELD_OUT_MINIMUM['relative']}, absolute: {HELD_OUT_MINIMUM['absolute']})", "==", 0,
          "Sanity check that held_out_relative_carries and held_out_absolute_carries judge enough runs: a share of one run, "
          "or a count over none, says nothing.", role="sanity"),
    reported("held_out_relative_runs", "held-out relative shift runs that learned in range (the held-out share's "
             "denominator)"),
    Claim("judged_groups", "groups of runs an evidence check judges (learned RoPE, T5 or partial-RoPE shift runs; "
          "learned APE or sinusoidal runs) that are empty", "==", 0,
          "Sanity check that relative_carries_past_n and absolute_collapses_past_n judge something: with no learned run in "
          "a group its count is zero for nothing.", role="sanity"),
    Claim("fresh_seeds", "seeds of this run or of the committed sweep that a prototype of the code used or that are "
          "reserved for the run that revised the checks (PROTOTYPE_SEEDS, REVISION_SEEDS: 700-709)", "==", 0,
          "Sanity check: evidence comes from seeds nobody looked at while the "
          "predictions, the checks and the code were written.", role="sanity"),
    Claim("committed_complete", "runs the committed sweep's spec lists that have no record made by this code and this "
          "notebook", "==", 0, "Sanity check: the sweep's runs shown beside this run's are all there and none is stale "
          "(a record made by other code or another notebook has another key and is not read).", role="sanity"),
    Claim("learned_somewhere", "tasks this page trains on which none of its runs learned in range", "==", 0,
          "Sanity check that the verdicts judge something: a broken trainer or an impossible task would learn "
          "nowhere, and every 'fails' would be vacuous.", role="sanity"),
    reported("learned_runs", "runs that learned in range"),
    reported("generalizing_cells", "(encoding, task) cells every run of which generalizes"),
)
