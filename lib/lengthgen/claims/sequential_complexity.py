"""The claims of ``lengthgen.chapters.sequential_complexity`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from ..chapters.sequential_complexity.registered import HELD_OUT_MINIMUM, INTERLEAVED_MINIMUM, PAGE_MINIMUM, PREFIX_TIE
from ..chapters.sequential_complexity.registered import REGISTERED_LBPE_SHARE as REGISTERED_LBPE_SHARE  # the dashboard's
from . import Claim, reported

GROWING_MINIMUM = 3  # learned held-out runs in cells where SRC grows (offsets, coupling, hint, LBPE) the 'only if' needs
HINT_GAP = 0.3  # answer accuracy at 2N, hint minus plain offsets, below which the dashboard qualifies Scale Hint

CLAIMS = (
    reported("registered_cells", "learned runs (of this page and of the whole committed sweep) whose measured verdict "
             "differs from the one SRC's conjecture gives their (task, scheme) cell (registered with the programs before "
             "any training)"),
    reported("not_learned_runs", "runs (of this page and of the whole committed sweep) that did not learn their task in "
             "range within their steps"),
    Claim("hint_generalizes", "learned runs with the scale hint, on a task with a position head, that do not "
          "generalize (answer accuracy below the floor at some scale N+1 .. 2N)", "==", 0,
          "Evidence for Scale Hint: with relations that know the scale every position read has one operator at every scale, "
          "so a model that found it carries it past N, and one that fitted the scales otherwise does not."),
    reported("hint_selects_needed", "learned runs with the scale hint, on a task with a position head, whose selected "
             "relation (most table mass, holding at least SHARE_FLOOR of it) and its largest entry are not a read of an "
             "SRC-invariant program",
             "Evidence that the bias learns the needed relation: among eight relations and hundreds of values, the one "
             "holding most of the L1-penalized mass must be one under which a head of the task costs the same at every "
             "scale, at the very value that head reads (reversal with the hint: i + j - 2n = -1)."),
    Claim("judged_groups", f"learned hint runs on a task with a position head, if fewer than {PAGE_MINIMUM}", "==", 0,
          "Sanity check that hint_generalizes (and the reported hint_selects_needed) judge enough runs: with one "
          "learned run or none their counts say almost nothing.", role="sanity"),
    reported("rpe_generalizes", "learned runs with plain offsets (rpe) that generalize, on tasks with a position head"),
    reported("rpe_learned", "runs with plain offsets (rpe) on tasks with a position head that learned in range"),
    Claim("held_out_hint_generalizes", "share of the committed sweep's learned scale-hint runs (held-out seeds; copy "
          "and reversal with distinct and with repeated tokens, parity with chain of thought) that generalize", ">=",
          0.75,
          "hint_generalizes on seeds and tasks nothing was chosen on."),
    Claim("held_out_hint_where_rpe_grows", "the committed sweep's first tasks' learned scale-hint runs that fail, in the "
          "cells where "
          "SRC grows under plain offsets and not under the hint", "==", 0,
          "Evidence for 'Scale Hint enables length generalization where plain offsets cannot': in these cells (copy and "
          "reversal with repeated tokens, parity with chain of thought) no offset program has a fixed set of operators, and "
          "the hint's relation gives one."),
    reported("held_out_hint_learned_where_rpe_grows", "learned scale-hint runs of the committed sweep's first tasks in the "
             "cells where "
             "SRC grows under plain offsets (what held_out_hint_where_rpe_grows judges)"),
    reported("held_out_hint_gap", "mean answer accuracy at 2N of every scale-hint run minus that of every plain-offset run "
             "(learned or not), over the first tasks' cells where SRC grows under plain offsets"),
    Claim("held_out_selects_needed", "share of the committed sweep's first tasks' learned scale-hint runs (tasks with a "
          "position head) "
          "whose selected relation (at least SHARE_FLOOR of the mass) and largest entry are a read of an SRC-invariant "
          "program", ">=", 0.75,
          "hint_selects_needed on held-out seeds and tasks, with the same tolerance as held_out_hint_generalizes."),
    reported("held_out_lbpe_selects_needed", "share of the committed sweep's first tasks' learned LBPE runs (tasks with a "
             "position "
             "head) whose selected relation (at least SHARE_FLOOR of the mass) and largest entry are a read of an "
             "SRC-invariant program",
             reason="Registered as evidence (>= REGISTERED_LBPE_SHARE) after the review of the first run, before any run "
                    "of the committed sweep; it does not hold there, and is reported."),
    reported("held_out_lbpe_invariant_mass", "mean, over the committed sweep's first tasks' learned LBPE runs with a position "
             "head, of "
             "the share of a run's used table mass on relations some SRC-invariant read of its task uses",
             reason="Defined after the committed sweep was read (see held_out_lbpe_selects_needed): descriptive, not "
                    "evidence."),
    Claim("held_out_growing_fails", "the committed sweep's first tasks' learned runs with offsets, coupling, the hint or LBPE "
          "in cells "
          "where SRC grows that generalize", "==", 0,
          "Evidence for the conjecture's 'only if': where every program needs new operators at every new scale (plain "
          "offsets on copy and reversal with repeated tokens and on parity with chain of thought), nothing trained up to N "
          "represents the reads at larger scales."),
    reported("held_out_growing_runs", "learned runs of the committed sweep's first tasks with offsets, coupling, the hint or "
             "LBPE in "
             f"cells where SRC grows (what held_out_growing_fails judges; the dashboard asks for {GROWING_MINIMUM})"),
    reported("held_out_absolute_generalizes", "learned APE and NoPE runs of the committed sweep's first tasks, on tasks with "
             "a position "
             "head, that generalize"),
    Claim("held_out_judged", f"held-out groups with fewer learned runs than their minimum (hint: "
          f"{HELD_OUT_MINIMUM['hint']}, LBPE: {HELD_OUT_MINIMUM['lbpe']}, of 15 each)", "==", 0,
          "Sanity check that the held-out shares judge enough runs.", role="sanity"),
    reported("held_out_invariant_share", "share of the committed sweep's first tasks' learned runs in cells where SRC is "
             "invariant that generalize (the conjecture's 'if': where training finds another program than the "
             "cheapest, this can be below one without contradicting what SRC says is possible)"),
    reported("held_out_invariant_cells_without_lg", "cells of the committed sweep's first tasks where SRC is invariant, with a "
             "position head, in which no run generalizes (learned or not): where the 'possible' of the conjecture is "
             "not shown by training"),
    reported("held_out_disagreements", "learned runs of the committed sweep's first tasks whose verdict differs from the "
             "conjecture's for their cell"),
    reported("held_out_lbpe_generalizes", "share of the committed sweep's first tasks' learned LBPE runs (tasks with a position "
             "head) that generalize"),
    reported("held_out_fire_generalizes", "share of the committed sweep's first tasks' learned FIRE runs (tasks with a position "
             "head) that generalize: the published learned relative bias, beside LBPE's"),
    reported("held_out_added_hint_generalizes", "share of the committed sweep's learned scale-hint runs on addition (the "
             "added task on which SRC grows under plain offsets and not under the hint) that generalize",
             reason="Scale Hint where plain offsets cannot, on a new kind of read: addition's digits are read at offsets "
                    "that move with n, while the hint relations i - j - 2n and i - j - n give each read one operator at "
                    "every scale."),
    reported("held_out_added_hint_runs", "learned scale-hint runs of the committed sweep on addition (what "
             "held_out_added_hint_generalizes judges)"),
    reported("held_out_added_growing_fails", "the committed sweep's learned runs on the added tasks with offsets, "
             "coupling, the hint or LBPE in cells where SRC grows that generalize",
             reason="The conjecture's 'only if' in two cells: addition under plain offsets, and interleaved parity under "
                    "coupled ids (x_t and z_t share an id, so z_(t-1) and x_(t-1) sit at one coupled offset and no one-head "
                    "coupled read singles out z_(t-1))."),
    reported("held_out_added_growing_runs", "learned runs on the added tasks in cells where SRC grows under a scheme "
             "with relation tables (what held_out_added_growing_fails counts)"),
    reported("held_out_added_invariant_share", "share of the committed sweep's learned runs on the added tasks, in cells "
             "where SRC is invariant, that generalize (the 'if', as held_out_invariant_share)"),
    reported("held_out_added_learned", "runs of the committed sweep on the added tasks that learned in range"),
    Claim("held_out_interleaved_generalizes", "share of the committed sweep's learned runs on interleaved parity (opened "
          "by the separator) in the cells where SRC is invariant (plain offsets, the hint, LBPE) that generalize", ">=",
          0.75,
          "Evidence for the conjecture's 'if': interleaved parity's one read is one offset at every scale, so a network "
          "that learned it in range through that offset carries it to 2N, and one that counted positions does not."),
    Claim("held_out_interleaved_judged", f"learned runs that held_out_interleaved_generalizes judges, if fewer than "
          f"{INTERLEAVED_MINIMUM} (of 9)", "==", 0,
          "Sanity check that the interleaved-parity share judges enough runs.", role="sanity"),
    reported("held_out_interleaved_runs", "learned runs on interleaved parity in the cells where SRC is invariant (what "
             "held_out_interleaved_generalizes judges)"),
    reported("held_out_added_disagreements", "learned runs of the committed sweep on the added tasks whose verdict "
             "differs from the conjecture's for their cell"),
    Claim("constant_prefix_tie", "largest logit difference, over the trained networks of this page and of the committed "
          "sweep (every task), between the output at the one token 1 and at the last of the tokens 1 1 1 (z_1's and "
          "z_2's queries of interleaved parity without the separator in front)",
          "<", PREFIX_TIE,
          "Proof check of why interleaved parity opens with the separator: with positions only in attention logits, two "
          "queries that see only equal tokens get the same output, trained or not.",
          role="proof"),
    reported("constant_prefix_opened", "smallest logit difference, over the trained interleaved-parity networks of this "
             "page and of the committed sweep, between the same two queries with the separator in front, as the layout "
             "has it (where the tie is broken)"),
    Claim("fresh_seeds", "seeds of this run or of the committed sweep that the pilot runs used, and committed runs "
          "outside the held-out seeds", "==", 0,
          "Sanity check: evidence comes from seeds nobody looked at while the recipe and the checks were chosen.",
          role="sanity"),
    Claim("committed_complete", "runs the committed sweep's spec lists that have no record made by this code and this "
          "notebook", "==", 0, "Sanity check: the sweep's runs are all there and none is stale.", role="sanity"),
)
