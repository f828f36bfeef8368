"""The claims of ``lengthgen.chapters.initialization`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from ..chapters.initialization.registered import WIDE_INIT_BAR
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
          role="sanity"),
    reported("not_learned", "networks below LEARNED_ACCURACY in-range accuracy at T (not judged beyond T)"),
    reported("without_retrieval_head", "learned networks with no retrieval head (not judged by the collapse prediction)"),
    Claim("wide_init_helps", "mean out-of-range accuracy at 2T of the learned base-10^4 networks initialized 'all x s' "
          "minus that of those initialized GPT-2 (both head widths)", ">=", WIDE_INIT_BAR,
          "The observation this chapter starts from, on fresh seeds and in this book's model."),
    reported("qk_init_gain_2T", "mean out-of-range accuracy at 2T, base 10^4: 'q, k x s' minus GPT-2 (learned networks; "
             "whether scaling the query and key alone carries the effect)"),
    Claim("fix_helps_gpt2", "mean out-of-range accuracy at 4T of the learned GPT-2-initialized networks at the "
          "identifiable base minus at base 10^4 (both head widths)", ">=", 0.1,
          "A replication of chapter 6's base fix on fresh seeds and a second head width, not a new finding about the "
          "initialization: with every plane turning within T no plane's phase is unseen, so the far kernel is the in-range "
          "one continued, and the fix must help at chapter 6's initialization."),
    reported("fix_gain_wide_4T", "the same difference for the networks initialized 'all x s' (does the base fix still "
             "help at the wider initialization?)"),
    Claim("collapse_predicted", "balanced accuracy of the training-length prediction of last-position collapse over "
          "(learned network with a retrieval head, length 2T .. longest)", ">=", 0.75,
          "The prediction reads nothing beyond T: each retrieval head's mean query and key on training-length sequences, "
          "continued beyond T by its planes, predict a collapse where some far offset's logit beats the target's."),
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
    Claim("unseen_share_wide_lower", "share of pairs of learned base-10^4 networks (same seed, width and offset) whose "
                                     "unseen planes hold a larger share of the retrieval heads' kernel amplitude from the "
                                     "GPT-2 initialization than from 'all x s'", ">=", 0.8,
          "The account of what the initialization does: from the wider initialization the unseen planes keep a smaller part "
          "of the kernel, so their phases, which training cannot see, move the logit beyond T less."),
    reported("unseen_share_init", "median unseen-plane share of the kernel amplitude at initialization (base 10^4, "
             "every scheme)"),
    reported("unseen_share_gpt2", "median unseen-plane share of the amplitude after training, GPT-2 initialization "
             "(base 10^4)"),
    reported("unseen_share_wide", "the same, 'all x s'"),
    reported("unseen_share_rank_correlation", "Spearman correlation, over the learned base-10^4 networks of every "
             "initialization, between the unseen-plane share and out-of-range accuracy at 2T"),
    reported("unseen_share_rank_within", "the same correlation within each initialization, averaged over the three"),
    reported("unseen_phase_lift_gpt2", "GPT-2 initialization, base 10^4: the share of the largest possible lift of the "
                                       "offsets in [T, 2T) over the target that the unseen planes' phases give, continued "
                                       "beyond T (-1 to 1, over retrieval heads)"),
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
    reported("unseen_phase_lift_gpt2_higher", "share of pairs of learned base-10^4 networks (same seed, width and offset) "
                                              "whose unseen planes' phases give a larger share of the lift of offsets in "
                                              "[T, 2T) over the target from GPT-2 than from 'all x s'",
             "What the initialization does to the unseen planes' phases, apart from their amplitude "
             "(unseen_share_wide_lower asserts that) and from which of them hold it: each plane's term is its far lift "
             "divided by the largest any phase could give it, so it is set by the phase alone."),
    Claim("adam_control_helps", "gain at 2T of the GPT-2 initialization trained at learning rate lr / s over the same "
          "networks trained at lr (mean out-of-range accuracy, paired by seed, head width and offset, base 10^4), as a "
          "fraction of the gain of 'all x s' over GPT-2 in the same run (wide_init_helps)", ">=", 0.5,
          "The test of the Adam reading of unseen_share_wide_lower: at lr / s each Adam step is the same fraction of the "
          "GPT-2 weights as a step at lr is of the 'all x s' weights."),
    Claim("adam_control_share_lower", "share of pairs of learned base-10^4 GPT-2-initialized networks (same seed, width and "
                                      "offset) whose unseen planes hold a larger share of the retrieval heads' kernel "
                                      "amplitude at lr than at lr / s", ">=", 0.8,
          "What the Adam reading says the smaller steps do inside the network: the unseen planes, which the data barely "
          "constrain, drift from their small initial size by an amount that scales with the step, while the planes that "
          "turn are pulled to what the task needs; so their share drops."),
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
          "Every prediction must hold where nothing was chosen: each held-out run asserts wide_init_helps, fix_helps_gpt2, "
          "collapse_predicted and unseen_share_wide_lower on its own networks."),
    reported("held_out_phases", "held-out runs (committed sweep) in which unseen_phase_lift_gpt2_higher fails or is "
             "missing",
             "The phase account must hold where nothing was chosen: it was formulated on the defaults' seeds, so its "
             "evidence is here."),
    Claim("held_out_adam_control", "held-out runs (committed sweep) in which adam_control_helps or "
          "adam_control_share_lower fails", "==", 0,
          "The Adam control's predictions must hold where nothing was chosen, in every held-out run; kept apart from "
          "held_out_failures, whose list of checks was registered before this control existed."),
)
