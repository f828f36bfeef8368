"""The claims of ``lengthgen.chapters.sequential_complexity`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from ..chapters.sequential_complexity import GROWING_MINIMUM, HELD_OUT_MINIMUM, INTERLEAVED_MINIMUM, PAGE_MINIMUM, PREFIX_TIE
from . import Claim, reported

_AFTER_FIRST_RUN = ("Added after a review of the first run at the defaults (seeds 900-902, reversal: every hint run learned "
                    "and kept its answers to 4N; no plain-offset run learned in range), before any run of the committed "
                    "sweep.")


_ADDED = ("Registered with the two added tasks, before any run of theirs (2026-12-03), when the committed sweep was "
          "regenerated a second time to add them; the checks registered with the first sweep keep judging its tasks. "
          "In that (third) version no run learned interleaved parity in range: its instances opened with x_1, and no "
          "network of this chapter can then answer more than three instances in four at scales >= 2 (chapter 12 "
          "proves it); the fourth version opens them with the separator (see held_out_interleaved_generalizes).")


_OPENING = ("Registered when interleaved parity's instances were given the opening separator (2026-12-03), before any "
            "held-out run of that layout, after a first pilot run (seed 0, plain offsets and LBPE: both learned it in "
            "range and generalized, their bias on offset = 1, the program's read); threshold and minimum unchanged "
            "since. The pilot on all of seeds 0-2 (not evidence) then measured: 7 of 9 runs of plain offsets, the hint "
            "and LBPE learned it in range (plain offsets on seed 1 and the hint on seed 0 did not), all 7 generalize "
            "(lowest answer accuracy over N+1 .. 2N from 0.91 to 1.0), each with its largest bias on offset = 1.")


CLAIMS = (
    reported("registered_cells", "learned runs (of this page and of the whole committed sweep) whose measured verdict "
             "differs from the one SRC's conjecture gives their (task, scheme) cell (registered with the programs before "
             "any training)"),
    reported("not_learned_runs", "runs (of this page and of the whole committed sweep) that did not learn their task in "
             "range within their steps"),
    Claim("hint_generalizes", "learned runs with the scale hint, on a task with a position head, that do not "
          "generalize (answer accuracy below the floor at some scale N+1 .. 2N)", "==", 0,
          "Evidence for Scale Hint: with relations that know the scale, every position read of these tasks has one "
          "operator at every scale (SRC invariant), so a model that found it carries it; a model that had fitted the "
          "training scales some other way (counting positions, or offsets combined with a count) loses its answers "
          "past N.",
          revised="Registered before any run on this chapter's seeds; the answer-accuracy criterion follows the "
                  "pilot (see PILOT)."),
    reported("hint_selects_needed", "learned runs with the scale hint, on a task with a position head, whose selected "
             "relation (most table mass, holding at least SHARE_FLOOR of it) and its largest entry are not a read of an "
             "SRC-invariant program",
             "Evidence that the bias learns the needed relation: among eight relations and hundreds of values, the one "
             "holding most of the L1-penalized mass must be one under which a head of the task costs the same at every "
             "scale, at the very value that head reads (reversal with the hint: i + j - 2n = -1). A model that spread "
             "its bias, or fitted the training scales through offsets or counting, fails this.",
             revised="Registered before any run on this chapter's seeds (then over hint and LBPE runs pooled, without "
                     "the share floor); the review of the first run split LBPE off (held_out_lbpe_selects_needed) and "
                     "added the floor, with the first run's shares at 1.0. It was then asserted (== 0) at the defaults, "
                     "and held there (0) on the machine of the first committed sweep and of the book's earlier builds. On a "
                     "second machine (x86, PyTorch's CPU kernels at AVX2) it measures 1 at the same defaults, identically "
                     "over reruns: training differs in the last bits between CPUs, and one learned hint run then selects "
                     "a relation that is not an invariant read. A count over this page's few runs that turns on the "
                     "CPU's rounding is no evidence; the check is reported, and its evidence is the committed sweep's "
                     "share (held_out_selects_needed, on held-out seeds and tasks)."),
    Claim("judged_groups", f"learned hint runs on a task with a position head, if fewer than {PAGE_MINIMUM}", "==", 0,
          "Sanity check that hint_generalizes (and the reported hint_selects_needed) judge enough runs: with one "
          "learned run or none their counts say almost nothing.", role="sanity",
          revised="A count of empty groups at first; a minimum of two runs after the review of the first run."),
    reported("rpe_generalizes", "learned runs with plain offsets (rpe) that generalize, on tasks with a position head"),
    reported("rpe_learned", "runs with plain offsets (rpe) on tasks with a position head that learned in range"),
    Claim("held_out_hint_generalizes", "share of the committed sweep's learned scale-hint runs (held-out seeds; copy "
          "and reversal with distinct and with repeated tokens, parity with chain of thought) that generalize", ">=",
          0.75,
          "hint_generalizes on seeds and tasks nothing was chosen on. Like chapter 11's held-out share, it tolerates an "
          "occasional straggler: it fails when more than a quarter of the learned runs do not carry their answers to "
          "2N. A point threshold; the exact interval is shown beside it.",
          revised="Registered with the sweep's spec, before any of its runs."),
    Claim("held_out_hint_where_rpe_grows", "the committed sweep's first tasks' learned scale-hint runs that fail, in the "
          "cells where "
          "SRC grows under plain offsets and not under the hint", "==", 0,
          "Evidence for 'Scale Hint enables length generalization where plain offsets cannot': in these cells (copy and "
          "reversal with repeated tokens, parity with chain of thought) no offset program has a fixed set of operators, "
          "and the hint's relation gives one. A learned hint run that still fails there would mean the hint does not "
          "do what SRC says it does. How many it judges is reported (held_out_hint_learned_where_rpe_grows), and the "
          "contrast with plain offsets on the same cells too (held_out_hint_gap).",
          revised=_AFTER_FIRST_RUN),
    reported("held_out_hint_learned_where_rpe_grows", "learned scale-hint runs of the committed sweep's first tasks in the "
             "cells where "
             "SRC grows under plain offsets (what held_out_hint_where_rpe_grows judges)"),
    reported("held_out_hint_gap", "mean answer accuracy at 2N of every scale-hint run minus that of every plain-offset run "
             "(learned or not), over the first tasks' cells where SRC grows under plain offsets"),
    Claim("held_out_selects_needed", "share of the committed sweep's first tasks' learned scale-hint runs (tasks with a "
          "position head) "
          "whose selected relation (at least SHARE_FLOOR of the mass) and largest entry are a read of an SRC-invariant "
          "program", ">=", 0.75,
          "hint_selects_needed on held-out seeds and tasks, with the same tolerance as held_out_hint_generalizes.",
          revised="Registered with the sweep's spec, before any of its runs, over hint and LBPE runs pooled; the review "
                  "of the first run split LBPE off and added the share floor."),
    reported("held_out_lbpe_selects_needed", "share of the committed sweep's first tasks' learned LBPE runs (tasks with a "
             "position "
             "head) whose selected relation (at least SHARE_FLOOR of the mass) and largest entry are a read of an "
             "SRC-invariant program",
             reason="Registered as evidence (>= REGISTERED_LBPE_SHARE) after the review of the first run, before any run "
                    "of the committed sweep; it does not hold there, and is reported.",
             revised="Registered as an evidence check (>= 0.75) before the sweep ran. The sweep as first made "
                     "measured 8 of 13 learned LBPE runs (0.62): LBPE puts each read's bias on two invariant relations "
                     "at once, coupled ids and the hint's relation, which give the same read (the L1 penalty is "
                     "indifferent to how a "
                     "logit is split between them), so the largest relation holds about half of the mass and often "
                     "misses the share floor. The check is reported as not reproducing; how much of LBPE's mass sits "
                     "on invariant relations is reported beside it (held_out_lbpe_invariant_mass), defined after the "
                     "sweep was read. Regenerated on a second machine, the sweep measured 11 of 13 (0.85), at or above "
                     "the registered bar, mostly through exact ties: in most runs counted, coupled ids and the hint's "
                     "relation hold half of the mass each, which the inclusive floor admits; LBPE still splits its "
                     "bias and picks no one relation, so the check stays a report (promoting it on a second "
                     "machine's result would be choosing the lucky machine)."),
    reported("held_out_lbpe_invariant_mass", "mean, over the committed sweep's first tasks' learned LBPE runs with a position "
             "head, of "
             "the share of a run's used table mass on relations some SRC-invariant read of its task uses",
             reason="Defined after the committed sweep was read (see held_out_lbpe_selects_needed): descriptive, not "
                    "evidence."),
    Claim("held_out_growing_fails", "the committed sweep's first tasks' learned runs with offsets, coupling, the hint or LBPE "
          "in cells "
          "where SRC grows that generalize", "==", 0,
          "Evidence for the conjecture's 'only if': where every program needs new operators at every new scale "
          "(plain offsets on copy and reversal with repeated tokens and on parity with chain of thought), nothing "
          "trained up to N represents the reads at larger scales. A network that generalized there would contradict "
          "it. APE and NoPE are left out: their tables grow by construction of the absolute relation "
          "(held_out_absolute_generalizes reports them). The check counts counterexamples, so with no learned run in "
          "these cells it passes without judging anything: held_out_growing_runs reports how many runs it judged, "
          f"and below {GROWING_MINIMUM} of them the claims dashboard qualifies the SRC conjecture's row.",
          revised="Registered with the sweep's spec, before any of its runs, over every scheme; restricted to the "
                  "schemes with relation tables after the review of the first run."),
    reported("held_out_growing_runs", "learned runs of the committed sweep's first tasks with offsets, coupling, the hint or "
             "LBPE in "
             f"cells where SRC grows (what held_out_growing_fails judges; the dashboard asks for {GROWING_MINIMUM})"),
    reported("held_out_absolute_generalizes", "learned APE and NoPE runs of the committed sweep's first tasks, on tasks with "
             "a position "
             "head, that generalize"),
    Claim("held_out_judged", f"held-out groups with fewer learned runs than their minimum (hint: "
          f"{HELD_OUT_MINIMUM['hint']}, LBPE: {HELD_OUT_MINIMUM['lbpe']}, of 15 each)", "==", 0,
          "Sanity check that the held-out shares judge enough runs.", role="sanity",
          revised="Minimums of 4 (hint, and hint with LBPE pooled) at first; raised, and LBPE given its own, after the "
                  "review of the first run, before any run of the committed sweep."),
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
             reason="Scale Hint where plain offsets cannot, on a read of a new kind: addition's digit s_t reads a_t and "
                    "b_t and, for the carry, a_(t-1) and b_(t-1), at offsets that move with n, while the hint relations "
                    "i - j - 2n (the a digits) and i - j - n (the b digits) give each read the same operators at every "
                    "scale. A report: pilot runs (seeds 0-2, not evidence) learned addition in range with the hint in "
                    "0 of 3 runs within the chapter's step budget, so an evidence check would likely judge nothing.",
             revised=_ADDED + " Written as an evidence check (>= 0.75, over both added tasks pooled) before any run; "
                     "restricted to addition after a review (interleaved parity, invariant under plain offsets too, "
                     "could have passed it alone), then made a report after the pilot runs above (in-range exact match "
                     "0.82, 0 and 0; with coupled ids 2 of 3 learned and generalized), before any held-out run."),
    reported("held_out_added_hint_runs", "learned scale-hint runs of the committed sweep on addition (what "
             "held_out_added_hint_generalizes judges)"),
    reported("held_out_added_growing_fails", "the committed sweep's learned runs on the added tasks with offsets, "
             "coupling, the hint or LBPE in cells where SRC grows that generalize",
             reason="The conjecture's 'only if' in two cells: addition under plain offsets, and interleaved parity under "
                    "coupled ids (x_t and z_t share an id, so z_(t-1) and x_(t-1) sit at one coupled offset and no "
                    "one-head coupled read singles out z_(t-1)). Registered as a report before any run of theirs: no "
                    "run with relation tables learned in range in any growing cell of the first sweep, so a count "
                    "here likely judges nothing; and the coupled cell's verdict rests on our one-layer programs, since "
                    "a two-layer coupled route exists (coupled offset 0 brings x_t into z_t's position, then coupled "
                    "offset 1 reads the pair at t - 1, from which z_(t-1) is decodable), so a coupled run that "
                    "generalizes there would show our program list incomplete rather than refute the conjecture.",
             revised=_ADDED + " Registered as an evidence check (== 0) at first; made a report after a review, before "
                     "any run of theirs."),
    reported("held_out_added_growing_runs", "learned runs on the added tasks in cells where SRC grows under a scheme "
             "with relation tables (what held_out_added_growing_fails counts)"),
    reported("held_out_added_invariant_share", "share of the committed sweep's learned runs on the added tasks, in cells "
             "where SRC is invariant, that generalize (the 'if', as held_out_invariant_share)"),
    reported("held_out_added_learned", "runs of the committed sweep on the added tasks that learned in range"),
    Claim("held_out_interleaved_generalizes", "share of the committed sweep's learned runs on interleaved parity (opened "
          "by the separator) in the cells where SRC is invariant (plain offsets, the hint, LBPE) that generalize", ">=",
          0.75,
          "Evidence for the conjecture's 'if' on a task whose one read, z_(t-1) one position back, is one offset at "
          "every scale: a network that learned it in range through that offset carries it to 2N; one that fitted the "
          "training scales by counting positions (the separator makes counting possible), or whose answers drift as "
          "sequences grow to twice the trained length, loses them past N. Asserted here, while the first tasks' 'if' "
          "(held_out_invariant_share) is reported, because this task has one program with one read, the simplest an "
          "offset makes, so no cheaper program can be missed by training. It does not tell SRC from RASP-L or from "
          "chapter 11's 'relative encodings carry a local rule', which predict the same here; the cell that tells "
          "them apart is coupled ids (reported, held_out_added_growing_fails). Same tolerance as the other held-out "
          "shares; the exact interval is shown beside it.",
          revised=_OPENING),
    Claim("held_out_interleaved_judged", f"learned runs that held_out_interleaved_generalizes judges, if fewer than "
          f"{INTERLEAVED_MINIMUM} (of 9)", "==", 0,
          "Sanity check that the interleaved-parity share judges enough runs.", role="sanity", revised=_OPENING),
    reported("held_out_interleaved_runs", "learned runs on interleaved parity in the cells where SRC is invariant (what "
             "held_out_interleaved_generalizes judges)"),
    reported("held_out_added_disagreements", "learned runs of the committed sweep on the added tasks whose verdict "
             "differs from the conjecture's for their cell"),
    Claim("constant_prefix_tie", "largest logit difference, over the trained networks of this page and of the committed "
          "sweep (every task), between the output at the one token 1 and at the last of the tokens 1 1 1 (z_1's and "
          "z_2's queries of interleaved parity without the separator in front)",
          "<", PREFIX_TIE,
          "Proof check of the reason interleaved parity opens with the separator: in a network whose positions enter "
          "only through attention logits, two queries that see only equal tokens get the same output whatever the "
          "weights, so trained or not this holds; it checks that the networks are built as the proof assumes.",
          role="proof", revised=_OPENING),
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
