"""The claims of ``lengthgen.chapters.zoo`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from ..chapters.committed import SIGNIFICANCE, TOLERATED_FAILURE_RATE
from ..chapters.zoo import (
              ABSOLUTE_FLOOR,
              FIRE_DRIFT_TOLERANCE,
              GENERALIZES_FLOOR,
              HELD_OUT_MIN_JUDGED,
              LEARNED_FLOOR,
              LEARNED_MAJORITY,
              XPOS_MIN_EFFECT,
              XPOS_PAIRED_SHARE,
)
from . import Claim, reported

_FIRST_RUN = ("First run (seeds 300-304, then the chapter's defaults): T5 failed in 5 of 5 runs (lowest out-of-range "
              "accuracy 0.20 +- 0.02, registered: generalizes), partial RoPE generalized in 5 of 5 (0.975 +- 0.012, "
              "registered: fails), one FIRE run did not learn in range (registered: fails).")


_SPLIT = ("Split from one check registered after the first run ('revised_verdicts': runs whose generalizes-or-not "
          "differs from REVISED_VERDICTS, == 0), which passed on seeds 400-404 but could not fail for the encodings "
          "revised to not generalize, since an untrained head agrees with them. The split checks were registered after "
          "seeing seeds 400-404 and are asserted on seeds 500+.")


CLAIMS = (
    Claim("relative_by_construction", "largest relative Toeplitz deviation of the float64 logit matrix to the longest "
          "length, over every head of the encodings that are functions of the offset (NoPE, ALiBi, T5, RoPE, partial "
          "RoPE, xPos), trained and at init", "<=", 1e-12,
          "Proof check, chapter 1's generalized: each of these logits depends on i - j alone by construction, so the "
          "deviation is float64 rounding whatever was learned.", role="proof"),
    Claim("absolute_seen", "smallest relative Toeplitz deviation of a trained APE or sinusoidal head", ">=",
          ABSOLUTE_FLOOR, "Sanity check that the offset test can see an encoding that is not relative: a trained "
          f"absolute head's logits differ along a diagonal by far more than rounding ({ABSOLUTE_FLOOR} of the "
          "largest logit).", role="sanity"),
    reported("registered_verdicts", "runs (encoding, offset, seed) whose measured verdict differs from the verdict "
             "registered for their encoding before any run (PREDICTED_VERDICTS)",
             revised="Registered as an evidence check (== 0). " + _FIRST_RUN + " A prediction that does not hold is a "
                     "result: it is reported against the a-priori verdicts, and the verdicts were revised with their "
                     "reasons (REVISED_VERDICTS) and tested on other seeds."),
    Claim("fresh_seeds", "seeds of this run that were used to revise the verdicts or to design the checks "
          "(REVISION_SEEDS, DESIGN_SEEDS)", "==", 0,
          "Sanity check: the revised verdicts and the split checks are evidence only on seeds that were not looked at "
          "while writing them.", role="sanity"),
    Claim("generalizes_as_revised", "RoPE and partial-RoPE runs that do not generalize", "==", 0,
          f"Evidence, a replication: RoPE's verdict is chapter 1's, partial RoPE's was revised after seeing it "
          f"generalize on other seeds. A run generalizes when its in-range accuracy at T is at least {LEARNED_FLOOR} "
          f"(chapter 2's floor) and its lowest out-of-range accuracy at least {GENERALIZES_FLOOR} (chapter 1's).",
          revised=_SPLIT),
    Claim("fails_when_learned", "runs of the encodings revised to fail (APE, sinusoidal, T5, FIRE) that learned in "
          "range and still generalize", "==", 0,
          "Evidence: the mechanism says what these encodings leave beyond T (untrained rows, a non-relative bilinear "
          "form, untouched far buckets, a drifting normalizer); a run that did not learn is not judged (learned_majority "
          "guards against judging none).", revised=_SPLIT),
    Claim("learned_majority", "encodings expected to learn in range (all but NoPE, ALiBi and randomized) that learned "
          f"in at most {LEARNED_MAJORITY:.0%} of their runs", "==", 0,
          "Sanity check that the runs fails_when_learned judges exist: an encoding whose head is broken or untrainable "
          "would learn in none, and its 'fails' would be vacuous. An occasional run just under the floor is an "
          "optimization failure, not a verdict.", role="sanity", revised=_SPLIT),
    Claim("not_learnable", "NoPE, ALiBi and randomized runs that learned the task in range", "==", 0,
          "Sanity check: these heads have no position signal that can single out the k-th previous token (constant "
          "logits, a fixed bias peaking at offset 0, positions whose offsets are random). An untrained or broken head "
          "passes too, so it carries no evidence.", role="sanity", revised=_SPLIT),
    Claim("t5_far_outweigh", "T5 runs in which some bucket no training distance reaches has a logit at or below the "
          "largest logit of a reached non-target bucket", "==", 0,
          "Evidence for the revised T5 mechanism: untouched far buckets stay at their init while training pushes every "
          "reached distractor bucket down, so each far key outweighs every trained distractor. A T5 head whose far "
          "buckets were trained (shared with data distances, or moved by some coupling) or whose distractors were not "
          "pushed down would fail it.", revised="Registered after seeing seeds 400-404's attention masses (not this "
          "comparison); asserted on seeds 500+."),
    reported("t5_far_mass", "attention of the last query at the longest length on offsets of at least T (distances no "
             "training sequence has), T5 heads (mean over runs)"),
    reported("t5_argmax_target", "share of T5 out-of-range queries at the longest length whose most-attended key is "
             "the target (mean over runs): near 1 means the failure is dilution, not a far offset out-scoring the "
             "target"),
    Claim("fire_drift", "largest over FIRE runs of the median |log2((d + 1) / (d* + 1))| over out-of-range queries at "
          "the longest length: d the offset of the most-attended key, d* the offset predicted from the learned c and L",
          "<=", FIRE_DRIFT_TOLERANCE,
          "Evidence for the registered FIRE mechanism, a prediction from quantities learned at the training length "
          "(c, L) confirmed at queries beyond T and L: there the target's normalized input psi(k)/psi(q) shrinks, so the "
          "query favours the offset d* whose input equals the target's training input, psi^-1(z_k psi(q)), against k "
          "if nothing drifted. It tests that nothing but FIRE's normalization moves the attention (pinning, a far "
          "offset out-scoring, recency would fail it) and that the MLP's peak between its trained inputs stays at z_k. "
          "Tolerance: a factor of two in d + 1, registered before measuring; it does not separate d* from a fixed "
          "fraction of q fitted to the measurement, whose score is reported beside it (fire_fraction_error).",
          revised="Queries restricted to those beyond both T and L, and the no-drift and fixed-fraction scores added, "
                  "after a review of the first run on seeds 500-504 (drift error 0.022); the tolerance is unchanged. "
                  "Since the held-out registration (before any held-out run), a FIRE head whose score cannot be "
                  "computed (no query beyond both T and L) counts as failing; it was skipped before."),
    reported("fire_fraction_error", "the same median score for the best fixed fraction of q fitted to the measured "
             "offsets (largest over FIRE runs): a one-parameter alternative to d*, which has none"),
    reported("fire_no_drift_error", "the same median score for d = k, no drift (smallest over FIRE runs)"),
    reported("fire_threshold", "largest trained FIRE threshold L, in multiples of T (FIRE is relative for i <= L)"),
    reported("generalizing_encodings", "encodings every run of which generalizes"),
    Claim("xpos_generalizes", "xPos runs that do not generalize (not learned in range, or below the floor beyond T)",
          "==", 0,
          "Evidence, a prediction registered before any xPos head was trained (PREDICTED_VERDICTS). The RoPE runs of "
          "these seeds, which start from the same initialization, had been seen to generalize; the xPos runs had not "
          f"been run. Judged like every other run (in range at least {LEARNED_FLOOR}, every out-of-range accuracy at "
          f"least {GENERALIZES_FLOOR}); a run that does not learn counts as failing, since the verdict says it learns."),
    Claim("xpos_far_predicted", "share of xPos runs whose far attention (mean over the out-of-range diagnostic "
          "queries at the longest length of the attention on offsets of at least T) is closer, in log ratio, to the "
          "prediction from their RoPE twin (the twin's trained head with xPos's decay applied) than to the twin's own; "
          "a run is judged only when both twins learned in range and the prediction differs from the twin by more than "
          f"a factor {XPOS_MIN_EFFECT:g}, and a run not judged counts as failing; with no xPos run the share is 1 "
          "(nothing to judge, as for the T5 and FIRE checks)", ">=", XPOS_PAIRED_SHARE,
          "Evidence that an xPos head is its RoPE twin (same offset and seed, same initialization, same data) with the "
          "decay acting beyond T: the prediction is computed from a head trained at the training length only and "
          "tested on a separately trained xPos head, against the null that the decay changes nothing beyond T (the "
          "twin itself). Since the twins share their start and data and the decay inside T is at most "
          "1 - zeta_0^(T/gamma), what this tests is that training does not use the decay to learn a different rule: a "
          "statement about optimization as much as about the encoding, which the parameter gap reported beside it "
          "measures directly. Untrained twins do not learn and are not judged, so they fail it; a decay too weak to "
          "move the prediction leaves nothing to test, so those pairs fail it too. Threshold: the book's paired share "
          "(chapter 13). Registered before any xPos run and before any prediction was computed, after two reviews of "
          "earlier registrations (commits 70eaca7 and d87b879): the first compared the xPos run with its twin only "
          "('lower far attention', by a Jensen argument that fails for the slow planes' drift) and passed on untrained "
          "twins; the second asked for the predicted direction and a factor-2 band, which a decay that changes "
          "nothing passes."),
    reported("xpos_parameter_gap", "mean over judged pairs of |theta_xpos - theta_rope| / |theta_rope - theta_init| "
             "over the query and key vectors: how far training took the twins apart, against how far it took them"),
    reported("xpos_lower_share", "share of judged xPos runs whose far attention is below their RoPE twin's (the "
             "first registration's comparison, kept as a number)"),
    reported("xpos_lower_at_init", "the same share over the same pairs at initialization (a baseline: the decay "
             "alone, no training)"),
    reported("xpos_predicted_lower", "share of judged pairs whose prediction lies below the twin (a constant rule "
             "'lower' would score this on the direction)"),
    Claim("held_out_complete", "runs the committed sweep's spec lists that have no record made by this code and this "
          "notebook", "==", 0, "Sanity check: the held-out runs are all there and none is stale.", role="sanity"),
    Claim("held_out_design", "held-out runs away from the registered design (HELD_OUT_DESIGN: offsets 3, 5 and 7, each "
          "with seeds of its own in HELD_OUT_SEEDS, every parameter but offsets, seeds, seed_start, committed_sweep, "
          "workers and device at the notebook's defaults), plus the design's (offset, seed) heads no run has", "==", 0,
          "Sanity check that the evidence read is the evidence registered: a spec with other settings, a pruned grid "
          "point or a run on seeds seen elsewhere would be counted here.", role="sanity"),
    reported("held_out_verdicts", "encodings expected to learn (APE, sinusoidal, T5, RoPE, partial RoPE, FIRE, xPos) whose "
             "held-out heads miss their revised verdict more often than the tolerated rate allows, or that have too "
             "few judged heads",
             "Registered as the primary held-out check (== 0), before any held-out run: each (encoding, verdict) cell "
             "of REVISED_VERDICTS tested on heads no choice was made on, pooled over the sweep. For a 'generalizes' "
             "verdict every head is judged and one that does not learn counts as a miss; for a 'fails' verdict the "
             "heads that learned are judged, a miss being one that generalizes; a cell needs at least "
             f"{HELD_OUT_MIN_JUDGED} judged heads and fails when its misses are unlikely under a miss rate of "
             f"{TOLERATED_FAILURE_RATE} (exact one-sided binomial p below {SIGNIFICANCE}; chapter 7's rule). Power: "
             "with 30 judged heads a cell fails at 6 misses or more, with 10 at 4 or more; per-offset cells are "
             "reported (held_out_offset_cells). NoPE, ALiBi and randomized are covered by not_learnable only.",
             revised="Registered first (commit a668f4f, before any held-out run) as a per-run count over all evidence "
                     "checks; two reviews before any run made it this pooled check (commits d576853, 2d3b973). The held-out "
                     "sweep then found partial RoPE's revised verdict wrong: 20 of its 30 heads generalize (offset 3: "
                     "1 of 10, lowest accuracy beyond T 0.88; offset 5, the offset it was revised on: 9 of 10; offset "
                     "7: 10 of 10), p = 1e-6; the six other cells hold (0 misses each). A registered check that does "
                     "not reproduce is reported: the partial-RoPE verdict depends on the offset, and neither the "
                     "a-priori 'fails' nor the revised 'generalizes' states that."),
    Claim("held_out_mechanisms", "mechanism checks (T5's far buckets, FIRE's drift, xPos against its RoPE twin) that do "
          "not hold when pooled over the held-out heads", "==", 0,
          "Evidence that the mechanisms behind the verdicts hold where nothing was chosen, each judged over heads: a T5 "
          "head misses when some bucket no training distance reaches does not outweigh every reached distractor "
          "(t5_far_outweigh's test), a FIRE head that learned misses when its drift score exceeds the tolerance or "
          "cannot be computed (fire_drift's), each with the binomial rule of held_out_verdicts and at least "
          f"{HELD_OUT_MIN_JUDGED} judged heads; for xPos, the share of held-out xPos heads closer to the prediction "
          f"from their twin than to the twin must reach {XPOS_PAIRED_SHARE} over at least {HELD_OUT_MIN_JUDGED} heads "
          "(xpos_far_predicted's rule, unjudged heads failing). Registered before any held-out run, after two reviews "
          "(see held_out_verdicts)."),
    reported("held_out_run_failures", "held-out runs in which one of the chapter's evidence checks fails or is missing: "
             "the stricter per-run reading, every head of a run"),
    reported("held_out_offset_cells", "(encoding, offset) cells of the encodings expected to learn that would fail "
             "held_out_verdicts' rule on their own heads (ten per cell)"),
    reported("held_out_partial_argmax", "held-out partial-RoPE heads that fail (learned, below the floor beyond T): "
             "mean share of the out-of-range diagnostic queries at the longest length whose most-attended key is the "
             "target (1: the target still wins and the failure is dilution; below 1: another key out-scores it, the "
             "a-priori mechanism); reported after the held-out sweep, as a reading of the finding above"),
    reported("held_out_other_failures", "proof and sanity checks failing in held-out runs, counted over (run, check)"),
    reported("held_out_agreement", "share of held-out heads (encoding, offset, seed) of the encodings expected to learn "
             "that learned in range, whose measured verdict is the revised one"),
    reported("held_out_predicted_disagreements", "held-out heads whose measured verdict differs from the verdict "
             "registered before any run (PREDICTED_VERDICTS)"),
)
