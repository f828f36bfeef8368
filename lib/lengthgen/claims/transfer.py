"""The claims of ``lengthgen.chapters.transfer`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from ..chapters.transfer.registered import CARRIER_LEVEL, CONTROL_HEADS
from . import Claim, f32_toeplitz, reported

CLAIMS = (
    Claim("rope_minus_ape_2T", "lowest RoPE minus highest APE out-of-range accuracy at 2T", ">=", 0.2,
          "RoPE must beat APE beyond T by a clear margin in every seed."),
    Claim("ape_rows_untouched", "APE networks with a moved row beyond T", "==", 0,
          "Zero gradient and Adam without weight decay leave those rows exactly at their initialization.", role="sanity"),
    Claim("ape_out_of_range", "highest APE out-of-range accuracy minus chance", "<=", 0.02,
          "With 64 sequences and at least 32 scored positions the standard error at chance is at most 0.0027, so 0.02 is "
          "more than seven standard errors.", role="sanity"),
    Claim("shift_f64", "largest float64 shift deviation (rotary and NoPE)", "<=", 1e-12,
          "Exact shift equivariance of the architecture, up to rounding.", role="proof"),
    Claim("shift_f32", "largest float32 shift deviation (rotary and NoPE)", "<=", f32_toeplitz,
          "The single-precision rounding argument of chapter 1.", role="proof", threshold_text="10 L eps_32"),
    Claim("ape_shift_f64", "smallest APE shift deviation (the test can fail)", ">", 0.1,
          "APE must fail the same test, which shows the test can fail.", role="sanity"),
    Claim("runs_without_retrieval_head", "rotary networks without a retrieval head", "==", 0,
          "The kernel analyses need at least one retrieval head per rotary network.", role="sanity"),
    Claim("kernel_peak_misses", "retrieval heads whose kernel peaks away from k", "==", 0,
          "Every retrieval head's content-averaged kernel must peak at k in range.", role="sanity"),
    Claim("unexplained_collapses", "collapses before any hijacking offset", "==", 0,
          "Every collapse of the last position must come at a length that already contains a hijacking offset.", role="sanity"),
    Claim("masking_restores", "share of collapsed rotary networks whose last position is right again at its collapse "
          "length once the hijacking offsets (read from the measured kernel) of its retrieval heads are masked", ">=",
          0.8,
          "Where the failure sits: if it is the retrieval heads' mass moving to the few far offsets whose logit beats the "
          "target's, removing them must bring the answer back; if it came from other heads, the MLPs or logits that depend "
          "on content, it stays."),
    Claim("predicted_mask_restores", "share of collapsed rotary networks whose last position is right again once the "
          "offsets where the kernel of the retrieval heads' mean query and key (training-length sequences) beats its "
          "value at k are masked", ">=", 0.5,
          "The test of the cause: the planes of the mean query and key are measured on training-length sequences only, and "
          "continued beyond T they say where the head will be hijacked."),
    Claim("masking_beats_control", "mean accuracy gain from masking the hijacking offsets minus the gain from masking "
          "as many other offsets beyond T, drawn at random (collapsed rotary networks)", ">=", 0.25,
          "A guard, not evidence: an offset that does not beat the target holds less mass than the target, so removing a "
          "few of them barely moves a collapsed head, whatever the mechanism.", role="sanity"),
    Claim("masking_beats_runners_up", "mean accuracy gain from masking the hijacking offsets minus the gain from "
          "masking as many of the offsets whose logit comes next below the target's (collapsed rotary networks)", ">=",
          0.25,
          "A guard, for the same reason as the random control: even the most attended offsets that do not beat the "
          "target hold less mass than it.", role="sanity"),
    reported("complement_restored", "share of collapsed rotary networks right again when every offset beyond T except "
             "the hijacking offsets is masked (dilution would restore them; hijacking would not)"),
    reported("all_far_restored", "share of collapsed rotary networks right again when every offset beyond T is masked "
             "(the ceiling of any mask)"),
    Claim("fix_margin_2T", "lowest fixed-base minus highest base-10^4 out-of-range accuracy at 2T", ">", 0,
          "With every plane identifiable every seed must beat every base-10^4 seed."),
    Claim("fix_margin_4T", "lowest fixed-base minus highest base-10^4 out-of-range accuracy at 4T", ">", 0,
          "With every plane identifiable every seed must beat every base-10^4 seed."),
    Claim("held_out_complete", "runs the committed sweep's spec lists that have no record made by this code and this "
          "notebook", "==", 0, "Sanity check: the held-out runs are all there and none is stale.", role="sanity"),
    Claim("held_out_masking", "held-out runs (committed sweep: seeds never used while this chapter was written, "
          "offsets beside the default) in which a masking check fails", "==", 0,
          "The causal test must hold where nothing was chosen: each held-out run asserts the three masking checks on its "
          "own collapsed networks."),
    reported("held_out_other_failures", "other evidence checks failing in held-out runs (RoPE against APE, the base "
             "fix, the turning-planes ablation), counted over (run, check)"),
    reported("masked_networks", "collapsed rotary networks the masking test judges (collapsed on its own batch too)"),
    Claim("turning_only_learned", "lowest in-range accuracy at T of the turning-planes networks minus the lowest of "
          "RoPE rotating all planes", ">=", -0.02,
          "Sanity check that makes the ablation interpretable: the network rotating fewer planes must learn the task "
          "in range as well as the one it is compared with.", role="sanity"),
    Claim("turning_only_2T", "mean out-of-range accuracy at 2T of RoPE (base 10^4) rotating only its identifiable "
          "planes minus that of RoPE rotating all (the same seeds, default head width)", ">=", 0.2,
          "The ablation that asks which planes are responsible: the account says the collapse comes from planes that do not "
          "turn within T, whose phase training cannot see."),
    Claim("turning_only_per_seed", "seeds (of every offset) at which the turning-planes network does not beat RoPE "
          "rotating all planes at 2T (out-of-range accuracy; the two share their initial weights and data)", "==", 0,
          "The same prediction seed by seed: a mean can be carried by one seed."),
    reported("turning_only_4T_gain", "the mean difference of turning_only_2T at 4T"),
    reported("turning_planes", "identifiable planes per head at base 10^4 and the default head width (the planes the "
             "ablation rotates)"),
    reported("turning_only_first_hijack", "earliest hijacking offset (measured kernel beats the target) of any "
             "turning-planes retrieval head (-1: none within the longest length)"),
    reported("carrier_pooled", "pooled p-value (Bonferroni over a network's heads, Fisher across networks) that the rotary "
                               "networks' retrieval-head kernels are no closer to their aligned carrier than random kernels "
                               "solving the task as efficiently",
             "The carrier test with the selection taken out."),
    Claim("carrier_test_size", "rejection rate of the pooled carrier test when every head's kernel is replaced by one "
          "of its own null kernels (left out of its null)", "<=", 0.01,
          "Sanity check of the p-values' arithmetic (ranks, Bonferroni, Fisher): under its own null the test must reject at "
          "about its level (1e-3, less because the p-values are discrete and Bonferroni is conservative); 0.01 allows the "
          "Monte Carlo error of POWER_REPLICATES draws many times over.",
          role="sanity"),
    Claim("carrier_test_power", "rejection rate of the pooled carrier test when every head's kernel is replaced by its "
          "aligned carrier (the head's amplitudes, every plane in phase at k)", ">=", 0.99,
          "Sanity check that the test can reject at all: a perfect carrier beats all of its head's null kernels, and pooled "
          "over the default nine networks that is far below the level (it needs about four networks).", role="sanity"),
    reported("carrier_power_half", "power of the pooled carrier test when every head's kernel is replaced by the half-way "
                                   "mixture of its aligned carrier and one of its null kernels, scored against the head's "
                                   "own null"),
    reported("carrier_beats_q95", "share of tested retrieval heads whose carrier R^2 beats the 95 % quantile of their "
             "own null (chapter 3's per-head criterion)"),
    reported("carrier_heads", "retrieval heads the pooled carrier test judges"),
    reported("carrier_networks", "rotary networks with at least one judged head (the units Fisher's method pools)"),
    reported("carrier_untested", "retrieval heads whose kernel does not separate the target on every training offset "
             "(not tested)"),
    reported("carrier_fit_r2_min", "smallest variance share of a retrieval head's measured kernel kappa explained by "
             "planes fitted to it (rotary features plus a constant, every measured offset)"),
    reported("held_out_carrier", "held-out runs (committed sweep) in which the pooled carrier test does not reject at "
             "CARRIER_LEVEL"),
    reported("carrier_share_standard", "share of the base-10^4 RoPE retrieval heads whose carrier R^2 beats their "
             "null's 95 % quantile"),
    reported("carrier_share_identifiable", "the same share for the identifiable-base RoPE retrieval heads"),
    reported("held_out_carrier_identifiable", "held-out runs (committed sweep) in which the share of identifiable-base "
          "retrieval heads beating their null's 95 % quantile (carrier_share_identifiable) is not larger than that of "
          "the base-10^4 heads (carrier_share_standard)",
             "A prediction from the default run, tested where nothing was seen: there the base-10^4 heads were no closer to "
             "the carrier than equally efficient random kernels (0 of 12 above their null's 95 % quantile) while the "
             "identifiable-base heads were (10 of 12)."),
    Claim("single_head_carrier", f"pooled p-value of the same carrier test on {CONTROL_HEADS} single rotary heads "
          "trained as in chapter 3 at this chapter's offset and training length (Fisher's method over heads)", "<=",
          CARRIER_LEVEL,
          "Positive control: the test must reject where chapter 3 finds a carrier, or a failure in the network says "
          "nothing.", role="sanity"),
    reported("heads_clearing_null", "retrieval heads whose coherence, over the planes whose phase is measurable within T "
             "(theta_m T > 1), clears the null"),
    reported("rope_out_of_range_16T", "RoPE (base 10^4) mean out-of-range accuracy at 16T"),
    reported("fixed_out_of_range_16T", "identifiable-base RoPE mean out-of-range accuracy at 16T"),
)
