"""The claims of ``lengthgen.chapters.transfer`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from ..chapters.transfer import CARRIER_LEVEL, CONTROL_HEADS
from . import Claim, f32_toeplitz, reported

CLAIMS = (
    Claim("rope_minus_ape_2T", "lowest RoPE minus highest APE out-of-range accuracy at 2T", ">=", 0.2,
          "RoPE must beat APE beyond T by a clear margin in every seed.",
          revised="Set after the first measurement gave 0.51 for RoPE against chance for APE."),
    Claim("ape_rows_untouched", "APE networks with a moved row beyond T", "==", 0,
          "Zero gradient and Adam without weight decay leave those rows exactly at their initialization.", role="sanity"),
    Claim("ape_out_of_range", "highest APE out-of-range accuracy minus chance", "<=", 0.02,
          "With 64 sequences and at least 32 scored positions the standard error at chance is at most 0.0027, so 0.02 "
          "is more than seven standard errors. A sanity check: rows beyond T are untouched by training, so an APE "
          "network has no position signal there by construction.", role="sanity"),
    Claim("shift_f64", "largest float64 shift deviation (rotary and NoPE)", "<=", 1e-12,
          "Exact shift equivariance of the architecture, up to rounding.", role="proof"),
    Claim("shift_f32", "largest float32 shift deviation (rotary and NoPE)", "<=", f32_toeplitz,
          "The single-precision rounding argument of chapter 1.", role="proof", threshold_text="10 L eps_32"),
    Claim("ape_shift_f64", "smallest APE shift deviation (the test can fail)", ">", 0.1,
          "APE must fail the same test, which shows the test can fail.", role="sanity"),
    Claim("runs_without_retrieval_head", "rotary networks without a retrieval head", "==", 0,
          "The kernel analyses need at least one retrieval head per rotary network.", role="sanity"),
    Claim("kernel_peak_misses", "retrieval heads whose kernel peaks away from k", "==", 0,
          "Every retrieval head's content-averaged kernel must peak at k in range. A sanity check: heads are selected "
          "for putting at least half their mass on offset k, which nearly guarantees the peak.", role="sanity"),
    Claim("unexplained_collapses", "collapses before any hijacking offset", "==", 0,
          "Every collapse of the last position must come at a length that already contains a hijacking offset. A "
          "sanity check: the hijacking offsets fall inside the doubling grid, so every length past the first one "
          "contains one. The causal test is masking_restores.", role="sanity"),
    Claim("masking_restores", "share of collapsed rotary networks whose last position is right again at its collapse "
          "length once the hijacking offsets (read from the measured kernel) of its retrieval heads are masked", ">=",
          0.8,
          "Where the failure sits: if it is the retrieval heads' mass moving to the few far offsets whose logit beats "
          "the target's, removing them must bring the answer back; if it came from other heads, the MLPs or logits "
          "that depend on content, it stays. For a head in the last layer this is close to renormalizing the "
          "attention already measured (the mass on the target and on the hijackers), so it locates the failure but "
          "does not test why the hijackers are there. 'Collapsed' and 'right again' are judged on the masking batch "
          "itself (unmasked below, masked at or above COLLAPSE_ACCURACY, with a gain of at least RESTORE_MARGIN_SE "
          "standard errors). 0.8 leaves one network in five to another cause; no collapsed network fails it.",
          revised="First registered without the guards on the masking batch (a network chosen as collapsed by the "
                  "evaluation batch's noise could count as restored); the guards were added after a review, before "
                  "the held-out sweep ran. On the default seeds it held in 8 of 8 networks without them."),
    Claim("predicted_mask_restores", "share of collapsed rotary networks whose last position is right again once the "
          "offsets where the kernel of the retrieval heads' mean query and key (training-length sequences) beats its "
          "value at k are masked", ">=", 0.5,
          "The test of the cause: the planes of the mean query and key are measured on training-length sequences "
          "only, and continued beyond T they say where the head will be hijacked. If slow planes whose phase training "
          "cannot see make the hijackers, masking the predicted offsets restores the answer without reading anything "
          "beyond T. The mean vectors are a coarse stand-in for the content-averaged kernel (chapter 3 measures the "
          "gap), so half the networks is the bar. Registered before it was first run."),
    Claim("masking_beats_control", "mean accuracy gain from masking the hijacking offsets minus the gain from masking "
          "as many other offsets beyond T, drawn at random (collapsed rotary networks)", ">=", 0.25,
          "A guard, not evidence: an offset that does not beat the target holds less mass than the target, so "
          "removing a few of them barely moves a collapsed head, whatever the mechanism. It shows that masking as "
          "such does not bring the answer back.", role="sanity",
          revised="Registered as evidence; relabelled sanity after a review showed the bound above, before the "
                  "held-out sweep ran."),
    Claim("masking_beats_runners_up", "mean accuracy gain from masking the hijacking offsets minus the gain from "
          "masking as many of the offsets whose logit comes next below the target's (collapsed rotary networks)", ">=",
          0.25,
          "A guard, for the same reason as the random control: even the most attended offsets that do not beat the "
          "target hold less mass than it.", role="sanity",
          revised="Registered as evidence (after the random control had been seen), with the reason that dilution "
                  "would make it fail; a review showed it cannot tell dilution from hijacking, and it was relabelled "
                  "sanity before the held-out sweep ran."),
    reported("complement_restored", "share of collapsed rotary networks right again when every offset beyond T except "
             "the hijacking offsets is masked (dilution would restore them; hijacking would not)"),
    reported("all_far_restored", "share of collapsed rotary networks right again when every offset beyond T is masked "
             "(the ceiling of any mask)"),
    Claim("fix_margin_2T", "lowest fixed-base minus highest base-10^4 out-of-range accuracy at 2T", ">", 0,
          "With every plane identifiable every seed must beat every base-10^4 seed.",
          revised="The identifiable base was found and first tested on seeds 0-2, the chapter's defaults; the held-out "
                  "sweep (seeds never used here, other offsets) reports it (held_out_other_failures); it is not asserted "
                  "there."),
    Claim("fix_margin_4T", "lowest fixed-base minus highest base-10^4 out-of-range accuracy at 4T", ">", 0,
          "With every plane identifiable every seed must beat every base-10^4 seed.",
          revised="As for 2T: found and tested on the default seeds 0-2; reported, not asserted, on held-out seeds."),
    Claim("held_out_complete", "runs the committed sweep's spec lists that have no record made by this code and this "
          "notebook", "==", 0, "Sanity check: the held-out runs are all there and none is stale.", role="sanity"),
    Claim("held_out_masking", "held-out runs (committed sweep: seeds never used while this chapter was written, "
          "offsets beside the default) in which a masking check fails", "==", 0,
          "The causal test must hold where nothing was chosen: each held-out run asserts the three masking checks on its "
          "own collapsed networks. Registered with them, before the sweep ran. Without a committed sweep there is no "
          "evidence, which counts as a failure."),
    reported("held_out_other_failures", "other evidence checks failing in held-out runs (RoPE against APE, the base "
             "fix, the turning-planes ablation), counted over (run, check)"),
    reported("masked_networks", "collapsed rotary networks the masking test judges (collapsed on its own batch too)"),
    Claim("turning_only_learned", "lowest in-range accuracy at T of the turning-planes networks minus the lowest of "
          "RoPE rotating all planes", ">=", -0.02,
          "Sanity check that makes the ablation interpretable: the network rotating fewer planes must learn the task "
          "in range as well as the one it is compared with.", role="sanity"),
    Claim("turning_only_2T", "mean out-of-range accuracy at 2T of RoPE (base 10^4) rotating only its identifiable "
          "planes minus that of RoPE rotating all (the same seeds, default head width)", ">=", 0.2,
          "The ablation that asks which planes are responsible: the account says the collapse comes from planes that do "
          "not turn within T, whose phase training cannot see. Take those planes' rotation away and keep the base: the "
          "drift beyond T goes with them, and what is left is the turning planes' kernel continued, which only recurs "
          "near offsets where those few planes line up again as at k (the first near k + 119 for the two planes at "
          "T = 32). The account predicts a large gain; 0.2 is a fifth of the accuracy range, with RoPE near 0.5 at 2T "
          "on the default seeds. A retrained network can differ in other ways too, so a pass is evidence for the "
          "account, not proof; and at fixed T and base the unseen planes are exactly the slowest ones, so it does not "
          "tell 'unseen' from 'slow' (the cut of p-RoPE, Barbero et al. 2025). Registered before the ablation was first "
          "trained.",
          revised="Registered as >= 0.1 on the mean; raised to 0.2 with turning_only_per_seed added after a review, "
                  "before the ablation was first trained."),
    Claim("turning_only_per_seed", "seeds (of every offset) at which the turning-planes network does not beat RoPE "
          "rotating all planes at 2T (out-of-range accuracy; the two share their initial weights and data)", "==", 0,
          "The same prediction seed by seed: a mean can be carried by one seed. Registered before the ablation was "
          "first trained."),
    reported("turning_only_4T_gain", "the mean difference of turning_only_2T at 4T"),
    reported("turning_planes", "identifiable planes per head at base 10^4 and the default head width (the planes the "
             "ablation rotates)"),
    reported("turning_only_first_hijack", "earliest hijacking offset (measured kernel beats the target) of any "
             "turning-planes retrieval head (-1: none within the longest length)"),
    reported("carrier_pooled", "pooled p-value, over the rotary networks' retrieval heads (base 10^4, identifiable base, "
          "fewer heads; not the turning-planes ablation), of the hypothesis that each head's kernel on the training "
          "offsets is no closer to its aligned carrier (chapter 3's carrier R^2) than random kernels that separate the "
          "target on every training offset as efficiently (the head's margin at the head's norm); Bonferroni over a "
          "network's heads, Fisher's method across networks",
             "The carrier test with the selection taken out. Heads are selected for attending to k, so their kernels peak "
          "there and their fast planes must line up at k whatever training prefers; the old coherence test against "
          "random phases could not separate that from a carrier. Every kernel of this null peaks at k with the head's "
          "margin and norm too, so what remains is whether training picked the carrier among the kernels that solve the "
          "task as well, as chapter 3's single heads do one by one (carrier_specific). If it picked any of them, each "
          "network's p-value is uniform or larger and the pooled one falls below the level at most once in a thousand "
          "builds. Head and null are read only through what the training offsets show (the minimum-norm coefficients "
          "of kappa on [0, T)), so the test says nothing about the slow planes' phases beyond T, which the hijacking "
          "analysis covers.",
          revised="Registered (commit 464bd56) with the planes fitted to kappa over every measured offset, null kernels "
                  "projected from random starts at the fitted norm, and Fisher's method over heads. A review before any "
                  "result was read showed that it could pass by construction: noise or drift beyond T inflates the "
                  "fitted norm through nearly invisible directions, and null kernels drawn at that norm are large random "
                  "oscillations; projected null kernels were also less margin-efficient than the head; and heads of one "
                  "network are not independent. Changed then to the version above. One run of the registered version "
                  "had finished; it was deleted unread. At its first computation in that form it failed the other way "
                  "(pooled p = 0.9998, no head of 30 above "
                  "its null's 95 % quantile; the single heads of chapter 3, tested once for calibration, passed with "
                  "every p-value 0.03 or less). Inspecting one network's heads showed why: their learned carrier R^2 "
                  "was -13 to -125, because the minimum-norm reading kept directions that the training offsets see with "
                  "singular value 3e-6 of the largest and multiplied kappa's measurement noise into amplitudes 5 to 8 "
                  "times the kernel's own (the single heads' kernels are exact, without noise). The reading was changed "
                  "to keep only directions above KERNEL_RCOND = 1e-3 (on those four heads the learned carrier R^2 is "
                  "0.92-0.98 and the same for every cut from 1e-4 to 3e-2), and the test was rerun without any other "
                  "change (a timing check of the new reading printed those four heads' p-values, 0.03 to 0.07, before the "
                  "rerun); the positive control single_head_carrier was registered before that rerun. So the threshold "
                  "is unchanged, but the measurement was fixed after one failing result. At that rerun it failed again, "
                  "by less: pooled p = 0.0072 > 1e-3 (half the heads above their null's 95 % quantile, the positive "
                  "control at 2e-5). It does not reproduce at the registered level and is reported; by variant, the "
                  "base-10^4 heads do not lean (0 of 12 above their null's 95 % quantile), the identifiable-base heads "
                  "do (10 of 12), and so do the wider base-10^4 heads (5 of 6), which became a held-out prediction "
                  "for the first two (held_out_carrier_identifiable)."),
    Claim("carrier_test_size", "rejection rate of the pooled carrier test when every head's kernel is replaced by one "
          "of its own null kernels (left out of its null)", "<=", 0.01,
          "Sanity check of the p-values' arithmetic (ranks, Bonferroni, Fisher): under its own null the test must reject "
          "at about its level (1e-3, less because the p-values are discrete and Bonferroni is conservative); 0.01 allows "
          "the Monte Carlo error of POWER_REPLICATES draws many times over. It does not exercise the reading of kappa.",
          role="sanity"),
    Claim("carrier_test_power", "rejection rate of the pooled carrier test when every head's kernel is replaced by its "
          "aligned carrier (the head's amplitudes, every plane in phase at k)", ">=", 0.99,
          "Sanity check that the test can reject at all: a perfect carrier beats all of its head's null kernels, and "
          "pooled over the default nine networks that is far below the level (it needs about four networks). The "
          "coherence test it replaces could barely have rejected (its random-phase null's top 0.1 % sat at 0.98-0.99 "
          "of perfect alignment). The power curve at weights between 0 and 1 is shown, not asserted.", role="sanity"),
    reported("carrier_power_half", "power of the pooled carrier test when every head's kernel is replaced by the "
             "half-way mixture of its aligned carrier and one of its null kernels, scored against the head's own null "
             "(not one matched to the mixture's efficiency, which a review estimated would lower it, e.g. from 39 to "
             "28 heads of 40 beating the 95 % quantile at the identifiable base)"),
    reported("carrier_beats_q95", "share of tested retrieval heads whose carrier R^2 beats the 95 % quantile of their "
             "own null (chapter 3's per-head criterion)"),
    reported("carrier_heads", "retrieval heads the pooled carrier test judges"),
    reported("carrier_networks", "rotary networks with at least one judged head (the units Fisher's method pools)"),
    reported("carrier_untested", "retrieval heads whose kernel does not separate the target on every training offset "
             "(not tested)"),
    reported("carrier_fit_r2_min", "smallest variance share of a retrieval head's measured kernel kappa explained by "
             "planes fitted to it (rotary features plus a constant, every measured offset)"),
    reported("held_out_carrier", "held-out runs (committed sweep) in which the pooled carrier test does not reject at "
             "CARRIER_LEVEL",
             revised="Registered as a claim (== 0) with carrier_pooled, before either was first computed; reported with "
                     "it once carrier_pooled did not reproduce on the default seeds, before the sweep ran."),
    reported("carrier_share_standard", "share of the base-10^4 RoPE retrieval heads whose carrier R^2 beats their "
             "null's 95 % quantile"),
    reported("carrier_share_identifiable", "the same share for the identifiable-base RoPE retrieval heads"),
    reported("held_out_carrier_identifiable", "held-out runs (committed sweep) in which the share of identifiable-base "
          "retrieval heads beating their null's 95 % quantile (carrier_share_identifiable) is not larger than that of "
          "the base-10^4 heads (carrier_share_standard)",
             "A prediction from the default run, tested where nothing was seen: there the base-10^4 heads were no closer to "
          "the carrier than equally efficient random kernels (0 of 12 above their null's 95 % quantile) while the "
          "identifiable-base heads were (10 of 12). The reading it tests: the more of a kernel's directions the "
          "training offsets show (every plane turning within T shows most of them; at base 10^4 the slow planes show "
          "almost nothing), the more training lines the planes up at k beyond what solving the task as efficiently "
          "forces. What a pass cannot tell: the test is calibrated in both geometries (a head drawn from its own null "
          "beats its 95 % quantile about 5 % of the time either way), but it sees a given lean less well where fewer "
          "directions are visible, because the efficient kernels are then nearly carriers already; so a pass rules "
          "out 'no lean anywhere' and supports 'more lean where more is seen' only together with the size of the gap. "
          "Registered after the default run was read and before the held-out sweep ran; the same seeds and offsets as "
          "every held-out check of the chapter. Reported, not asserted: the split was read off the default run "
          "after the registered pooled test had failed there, so the summary page qualifies the claim with it (any "
          "held-out run against it) instead of the chapter asserting it."),
    Claim("single_head_carrier", f"pooled p-value of the same carrier test on {CONTROL_HEADS} single rotary heads "
          "trained as in chapter 3 at this chapter's offset and training length (Fisher's method over heads)", "<=",
          CARRIER_LEVEL,
          "Positive control: the test must reject where chapter 3 finds a carrier, or a failure in the network says "
          "nothing. Registered after it was measured once, on chapter 3's default heads (offsets 3, 5, 9, seeds 0-4: "
          "every head's p-value 0.03 or less, pooled 4e-14), and after carrier_pooled had first failed; so it is a "
          "sanity check that the test can see a learned carrier, not evidence.", role="sanity"),
    reported("heads_clearing_null", "retrieval heads whose coherence, over the planes whose phase is measurable within T "
             "(theta_m T > 1), clears the null"),
    reported("rope_out_of_range_16T", "RoPE (base 10^4) mean out-of-range accuracy at 16T"),
    reported("fixed_out_of_range_16T", "identifiable-base RoPE mean out-of-range accuracy at 16T"),
)
