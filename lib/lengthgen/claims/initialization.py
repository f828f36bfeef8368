"""The claims of ``lengthgen.chapters.initialization`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from ..chapters.initialization import WIDE_INIT_BAR
from . import Claim, reported

CLAIMS = (
    Claim("fresh_seeds", "seeds of this run that chapter 6 trained at its defaults (0-2) or reserved for its held-out "
          "sweep (300-319)", "==", 0,
          "Sanity check: the predictions below were written before any of these networks was trained; the seeds must "
          "be ones nothing was chosen on.", role="sanity"),
    Claim("init_scale_applied", "largest relative error, over the weight groups of every network (query, key and "
          "value rows, attention and MLP projections, embedding, readout), of the group's norm at initialization "
          "against the GPT-2 initialization of the same seed times the factor its scheme gives that group", "<=", 1e-6,
          "Sanity check of the rescaling: 'q, k x s' scales the query and key rows only, 'all x s' every weight "
          "matrix; anything else (a scope that misses a group or scales one too many) is off by a factor s.",
          role="sanity",
          revised="First registered as the standard deviation of the first layer's query rows against 0.02 x s "
                  "(<= 0.05); a review showed it cannot tell the two scopes apart. Replaced before the held-out sweep "
                  "ran; the default run had passed both."),
    reported("not_learned", "networks below LEARNED_ACCURACY in-range accuracy at T (not judged beyond T)"),
    reported("without_retrieval_head", "learned networks with no retrieval head (not judged by the collapse prediction)"),
    Claim("wide_init_helps", "mean out-of-range accuracy at 2T of the learned base-10^4 networks initialized 'all x s' "
          "minus that of those initialized GPT-2 (both head widths)", ">=", WIDE_INIT_BAR,
          "The observation this chapter starts from, on fresh seeds and in this book's model. A reader measured, in a "
          "plain nanoGPT-style model of chapter 6's shape without its initialization function (so PyTorch's defaults: "
          "nn.Linear uniform with standard deviation about 0.072, nn.Embedding standard normal) and at a constant "
          "learning rate, 0.996 to 1.000 at 2T where the GPT-2 initialization gave 0.49 to 0.88 (three seeds each). "
          "'all x s' is that scale on every weight matrix, not PyTorch's default exactly. 0.1 is well below that gap; "
          "with three seeds per cell and seed spreads like those the difference has a standard error near 0.1, so "
          "the check has power only against a gap like the one observed there, not against a small one. Registered "
          "before any network of this chapter was trained."),
    reported("qk_init_gain_2T", "mean out-of-range accuracy at 2T, base 10^4: 'q, k x s' minus GPT-2 (learned networks; "
             "whether scaling the query and key alone carries the effect)"),
    Claim("fix_helps_gpt2", "mean out-of-range accuracy at 4T of the learned GPT-2-initialized networks at the "
          "identifiable base minus at base 10^4 (both head widths)", ">=", 0.1,
          "A replication of chapter 6's base fix on fresh seeds and a second head width, not a new finding about the "
          "initialization: with every plane turning within T no plane's phase is unseen, so the far kernel is the "
          "in-range one continued, and the fix must help at chapter 6's initialization. Registered before any network "
          "of this chapter was trained."),
    reported("fix_gain_wide_4T", "the same difference for the networks initialized 'all x s' (does the base fix still "
             "help at the wider initialization?)"),
    Claim("collapse_predicted", "balanced accuracy of the training-length prediction of last-position collapse over "
          "(learned network with a retrieval head, length 2T .. longest)", ">=", 0.75,
          "The prediction reads nothing beyond T: from the mean query and key of each retrieval head on training-length "
          "sequences, the kernel continued beyond T by its planes; a network is predicted to collapse at a length if, "
          "for one of its retrieval heads, some offset beyond T inside the sequence has a higher predicted logit than "
          "the target. Observed: last-position accuracy below COLLAPSE_ACCURACY. Balanced accuracy (the mean of the "
          "hit rates on collapsed and on held cells) is 0.5 for a constant rule; 0.75 asks the prediction to be right "
          "on most cells of both kinds. NaN (a failure) when one kind is absent. Registered before any network of this "
          "chapter was trained.",
          revised="Worded at registration as 'the offsets beyond T whose predicted logit beats the target's together "
                  "outweigh the target in the softmax'; each such offset alone outweighs it, so that is the rule above "
                  "(a review pointed it out). Reworded; the computation and the verdicts are unchanged. The softmax "
                  "version over every far offset is reported as collapse_softmax_rule."),
    reported("collapse_length_only", "balanced accuracy of the best rule that knows only the length (a verdict per "
             "length, chosen on these very cells)"),
    reported("collapse_config_rule", "balanced accuracy of the majority verdict of the other seeds of the same "
             "configuration (initialization, head width, base, offset) at the same length: a rule that knows the "
             "configuration but not the network (ties: collapsed)"),
    reported("collapse_predicted_split", "balanced accuracy of the training-length prediction on the (configuration, "
             "length) groups whose seeds disagree: what it knows about individual networks"),
    reported("collapse_split_cells", "cells in (configuration, length) groups whose seeds disagree"),
    reported("collapse_softmax_rule", "balanced accuracy of the softmax version of the prediction: collapse where every "
             "offset beyond T together outweighs the target under the predicted kernel"),
    reported("collapse_measured_rule", "balanced accuracy of the prediction's rule applied to the kernel measured beyond "
             "T (not a prediction: it reads the lengths it judges)"),
    reported("predicted_measured_agree", "share of cells on which the rule gives the same verdict from the predicted and "
             "from the measured kernel"),
    reported("unseen_plane_change_gpt2", "GPT-2 initialization: median relative change, from initialization to the end "
             "of training, of the query and key weights of the planes that do not turn a full circle within T "
             "(base 10^4)"),
    reported("unseen_plane_change_wide", "the same for the 'all x s' initialization"),
    Claim("unseen_share_wide_lower", "share of the pairs of learned base-10^4 networks (same seed, head width and "
          "offset: the same raw initial weights and data) in which the planes that turn less than once within T hold "
          "a larger share of the retrieval heads' kernel amplitude from the GPT-2 initialization than from 'all x s' "
          "(per network the median over its retrieval heads)", ">=", 0.8,
          "The account of what the initialization does: from the wider initialization the unseen planes keep a "
          "smaller part of the kernel, so their phases, which training cannot see, move the logit beyond T less. At "
          "initialization the share is the same in both (every plane scales alike). If the schemes left the planes "
          "alike each pair would be a coin flip: 5 of 6 or more has probability 7/64 per run, and every held-out run "
          "must pass. A wrong account (the wide initialization helps through the MLP or the embedding, with the "
          "planes alike) fails it.",
          revised="Formulated after the first run of this chapter at its defaults was read (there the median amplitude "
                  "of the unseen planes was 1.0 nats from the GPT-2 initialization against 0.28 from 'all x s', with the "
                  "turning planes near 8 to 9 nats in both), as a difference of median shares > 0; made a paired count "
                  "after a review, before any held-out run was read (the first sweep was stopped unread). Its evidence "
                  "is the held-out runs."),
    reported("unseen_share_init", "median unseen-plane share of the kernel amplitude at initialization (base 10^4, "
             "every scheme)"),
    reported("unseen_share_gpt2", "median unseen-plane share of the amplitude after training, GPT-2 initialization "
             "(base 10^4)"),
    reported("unseen_share_wide", "the same, 'all x s'"),
    reported("unseen_share_rank_correlation", "Spearman correlation, over the learned base-10^4 networks of every "
             "initialization, between the unseen-plane share and out-of-range accuracy at 2T"),
    reported("unseen_share_rank_within", "the same correlation within each initialization, averaged over the three"),
    reported("unseen_phase_lift_gpt2", "GPT-2 initialization, base 10^4: how much of the largest possible lift of the "
             "offsets in [T, 2T) over the target the phases of the planes that turn less than once within T give, "
             "continued beyond T: sum a cos(psi + arg c) / sum a over every learned network's retrieval heads (-1 to 1; "
             "psi = theta k + phi, c = mean over T <= D < 2T of exp(i theta (D - k)) - 1)"),
    reported("unseen_phase_lift_wide", "the same for the 'all x s' initialization"),
    reported("unseen_lift_nats_gpt2", "GPT-2 initialization, base 10^4: how far the unseen planes, continued beyond T, "
             "raise the offsets in [T, 2T) above the target on average, in nats per retrieval head (amplitude and phase "
             "together)"),
    reported("unseen_lift_nats_wide", "the same for the 'all x s' initialization"),
    reported("unseen_resultant_gpt2", "GPT-2 initialization, base 10^4: how alike the unseen planes' phases at the target "
             "are over the retrieval heads of every network (per plane, the length of the mean of exp(i psi); median over "
             "the unseen planes: 0 spread evenly, 1 all the same)"),
    reported("unseen_resultant_wide", "the same for the 'all x s' initialization"),
    reported("unseen_resultant_init", "the same length from the GPT-2 networks' phases at initialization (random weights): "
             "what heads with unrelated phases give at this count"),
    reported("unseen_phase_lift_gpt2_higher", "share of the pairs of learned base-10^4 networks (same seed, head width and "
             "offset) in which the phases of the planes that turn less than once within T give a larger share of the lift "
             "of the offsets in [T, 2T) over the target from the GPT-2 initialization than from 'all x s': sum a cos(psi + "
             "arg c) / sum a over a retrieval head's unseen planes (psi = theta k + phi, c = mean over T <= D < 2T of "
             "exp(i theta (D - k)) - 1; per network the median over its retrieval heads)",
             "What the initialization does to the unseen planes' phases, apart from their amplitude (unseen_share_wide_lower "
             "asserts that) and from which of them hold it: each plane's term is its far lift divided by the largest any "
             "phase could give it, so it is set by the phase alone. The account: from the GPT-2 initialization training "
             "sets the unseen planes at phases whose continuation favours the far offsets more than from the wide one. A "
             "wrong account (the phases alike across initializations, the wide initialization helping through the "
             "amplitude or elsewhere) fails it. It is necessary for the account, not sufficient: it does not show that "
             "these phases are what makes the networks collapse. A coin flip per pair passes with probability 7/64 at 6 "
             "pairs and 6/32 at 5; judged only when at least PHASE_MIN_PAIRED of the run's GPT-2 base-10^4 networks pair "
             "with a learned 'all x s' one (NaN, a failure, otherwise); judged again on every held-out run (held_out_phases).",
             revised="Formulated after the first run with phase measures was read at the defaults. A first version compared "
                     "the amplitude-weighted cos(theta k + phi) of the unseen planes (-0.54 from the GPT-2 initialization, "
                     "-0.08 from 'all x s' in that run); a review showed the cosine cannot say whether a slow plane lifts or "
                     "lowers the far offsets. A second compared the far lift per unit amplitude (0.18 and -0.02, 5 of 6 "
                     "pairs, read), which a second review showed depends on which planes hold the amplitude as much as on "
                     "the phases. This third version divides each plane's lift by the largest possible, and was registered "
                     "before it had been computed on any network; the directions at the target (138 and 98 degrees) and the "
                     "far lifts had been read, so it is not blind to this run. No held-out run of any version was read: its "
                     "evidence is the held-out runs. It was then asserted (>= REGISTERED_PHASE_LIFT_SHARE, 0.8) at the "
                     "defaults, and held there on the machine of the committed sweeps and of the book's earlier builds. On "
                     "a second machine (x86, PyTorch's CPU kernels at AVX2) it measures 0.667 (4 of 6 pairs) at the same "
                     "defaults, identically over reruns: training differs in the last bits between CPUs. Its held-out "
                     "counterpart (held_out_phases) had already not reproduced. A verdict at one seed set "
                     "that turns on the CPU's rounding is no evidence; the check is reported, and "
                     "held_out_phases still judges every held-out run against the registered bar."),
    Claim("adam_control_helps", "gain at 2T of the GPT-2 initialization trained at learning rate lr / s over the same "
          "networks trained at lr (mean out-of-range accuracy, paired by seed, head width and offset, base 10^4), as a "
          "fraction of the gain of 'all x s' over GPT-2 in the same run (wide_init_helps)", ">=", 0.5,
          "The test of the Adam reading of unseen_share_wide_lower: Adam's steps have about the learning rate's size "
          "whatever the weights', so at lr / s every step is the same fraction of the GPT-2 weight matrices as a step "
          "at lr is of the 'all x s' ones (not of the LayerNorm gains, which 'all x s' leaves as they are and which "
          "therefore move s times less, relatively, in the control). If the wide initialization helps because the steps "
          "are small next to the weights, the control must recover a good part of its gain: at least half. If it helps "
          "through what wider weights compute from the start (sharper attention, larger logits), the control starts "
          "exactly as the GPT-2 networks do and need not gain. A fraction rather than a fixed gain, because the wide "
          "gain varies from run to run (0.15 to 0.40 on the held-out runs) and the account predicts a gain like it. "
          "Judged only when the wide gain is at least wide_init_helps' bar (0.1) and at least ADAM_CONTROL_MIN_PAIRED "
          "of the control's networks learned the task with a learned GPT-2 twin; otherwise NaN, a failure, reported as "
          "inconclusive. A smaller rate is also less training, so a gain cannot separate small relative steps from "
          "less drift of what training does not constrain; a gain also does not exclude that the initial function "
          "contributes. Registered before any network at lr / s was trained; the GPT-2 and 'all x s' networks of the "
          "default seeds and of the held-out runs (seeds 500-508) had been read, the control's had not."),
    Claim("adam_control_share_lower", "share of the pairs of learned base-10^4 networks from the GPT-2 initialization "
          "(same seed, head width and offset: the same initial weights and data) in which the planes that turn less "
          "than once within T hold a larger share of the retrieval heads' kernel amplitude when trained at lr than at "
          "lr / s (per network the median over its retrieval heads)", ">=", 0.8,
          "What the Adam reading says the smaller steps do inside the network: the unseen planes, which the data "
          "barely constrain, drift from their small initial size by an amount that scales with the step, while the "
          "planes that turn are pulled to what the task needs; so their share drops. It tests that the unseen planes' "
          "growth is drift that scales with the step size (any drift account predicts it, the Adam reading among them), "
          "not the relative step size itself. It can fail: at initialization the unseen share is about 0.8 and training "
          "at lr lowers it to about 0.4, so if the smaller rate only trained less the control's share would stay higher. "
          "A coin flip per pair gives 5 of 6 or more with probability 7/64. Judged only with at least "
          "ADAM_CONTROL_MIN_PAIRED of the control's networks paired (NaN otherwise). Registered before any network at "
          "lr / s was trained; every held-out run must pass as well (held_out_adam_control)."),
    reported("adam_control_not_learned", "networks at lr / s below LEARNED_ACCURACY in range at T (not judged)"),
    reported("adam_control_paired", "control networks judged: learned, with a learned GPT-2 twin at lr"),
    reported("adam_control_gain_2T", "gain at 2T of the control over its GPT-2 twins at lr (paired mean, learned pairs)"),
    reported("adam_control_minus_wide_2T", "mean out-of-range accuracy at 2T, learned base-10^4 networks: GPT-2 at lr / s "
             "minus 'all x s' at lr"),
    reported("adam_control_change", "median relative change, over training, of the query and key weights of the unseen "
             "planes at lr / s (the Adam reading expects it near unseen_plane_change_wide)"),
    reported("adam_control_share", "median unseen-plane share of the amplitude after training at lr / s"),
    reported("adam_control_phase_lift", "the unseen planes' phase lift at lr / s (as unseen_phase_lift_gpt2)"),
    Claim("held_out_complete", "runs the committed sweep's spec lists that have no record made by this code and this "
          "notebook", "==", 0, "Sanity check: the held-out runs are all there and none is stale.", role="sanity"),
    Claim("held_out_failures", "held-out runs (committed sweep: seeds reserved from 500 before it ran, and offsets "
          "beside the default) in which an evidence check of this chapter fails", "==", 0,
          "Every prediction must hold where nothing was chosen: each held-out run asserts wide_init_helps, "
          "fix_helps_gpt2, collapse_predicted and unseen_share_wide_lower on its own networks. Registered before the "
          "sweep ran. Without a committed sweep there is no evidence, which counts as a failure. (A held-out run has "
          "no sweep to read, so its own copy of this check fails there by design.) A run that lacks one of the checks counts "
          "as failing it."),
    reported("held_out_phases", "held-out runs (committed sweep) in which unseen_phase_lift_gpt2_higher fails or is "
             "missing",
             "The phase account must hold where nothing was chosen: it was formulated on the defaults' seeds, so its "
             "evidence is here. Kept apart from held_out_failures, whose list of checks was registered before this check "
             "existed.",
             revised="Registered as a check (== 0; without a committed sweep, NaN, a failure) before any held-out run was "
                     "made with the phase check. Measured 1 of 3: at offset 7 (seeds 506-508) the GPT-2 network's unseen "
                     "planes have the larger phase lift in 4 of 6 pairs (0.67 < 0.8), at offsets 3 and 5 in 6 of 6 and 5 "
                     "of 6. The phase account does not reproduce on every held-out run; the check is reported, not "
                     "asserted, and the chapter says so."),
    Claim("held_out_adam_control", "held-out runs (committed sweep) in which adam_control_helps or "
          "adam_control_share_lower fails", "==", 0,
          "The Adam control's predictions must hold where nothing was chosen, in every held-out run; kept apart from "
          "held_out_failures, whose list of checks was registered before this control existed. Registered before any "
          "network at lr / s was trained. Without a committed sweep there is no evidence, which counts as a failure; a run "
          "that lacks one of the checks counts as failing it."),
)
