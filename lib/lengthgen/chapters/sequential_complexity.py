"""Chapter 12 (``12_sequential_complexity``): Sequential Representation Complexity, Scale Hint and a learned
position-relation encoding, tested in a small decoder whose positions enter only as learned relation biases.

The conjecture's verdict of every (task, scheme) cell is :func:`lengthgen.model.programs.src_table`'s, registered
with that module before any model was trained on the reasoning tasks. A run of
:class:`lengthgen.model.relation_network.RelationTransformer` is trained on scales ``1 .. N`` and scored at every
evaluated scale. It *has not learned* its task when its exact match at a training scale is below
:data:`LEARNED_FLOOR`; it *generalizes* when its answer accuracy (the share of answers right) is at least
:data:`GENERALIZES_FLOOR` at every scale ``N+1 .. 2N``, and *fails* otherwise. Which relation a run selected is read
from its tables (:func:`lengthgen.model.relation_network.table_usage`) and compared with the reads of the programs
whose SRC stays invariant (:func:`lengthgen.model.programs.invariant_reads`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..book.parameters import ParameterError, parameter
from ..book.paths import SWEEPS_DIR
from ..book.sweep import expand, load_spec, stored_records
from ..model import programs
from ..model.reasoning_tasks import check_task, sequence_length
from ..model.relation_network import (
    SCHEMES,
    RelationNetworkConfig,
    RelationRunConfig,
    constant_prefix_gap,
    exact_match,
    table_usage,
)
from ..model.training import TrainedRun
from .claims import Claim, reported
from .common import GB, Execution, Seeds, map_stacked

FIRE = "fire"  # the published learned relative bias (Li et al. 2023), trained beside the schemes; not an SRC scheme
FIRST_SWEEP_TASKS = ("copy", "copy_repeat", "reversal", "reversal_repeat", "parity_cot", "mode", "parity")
INTERLEAVED = "parity_cot_interleaved"  # parity with the chain of thought between the bits, opened by the separator
ADDED_TASKS = (INTERLEAVED, "addition")  # trained from the second regeneration of the sweep on; own checks
TRAINED_TASKS = (*FIRST_SWEEP_TASKS, *ADDED_TASKS)
LEARNED_FLOOR = 0.99  # exact match at every evaluated training scale below which a run has not learned (the issue's)
GENERALIZES_FLOOR = 0.9  # lowest answer accuracy over scales N+1 .. 2N of a run that generalizes
SELECTING_SCHEMES = ("rpe_scale_hint", "lbpe")  # schemes whose bias chooses among several relations
PILOT_SEEDS = (0, 1, 2)  # the seeds of the pilot runs that chose the recipe (table scale, L1, steps, learning rate)
HELD_OUT_SEEDS = tuple(range(920, 940))  # the committed sweep's runs draw here, reserved before any of them ran
HELD_OUT_MINIMUM = {"hint": 8, "lbpe": 6}  # learned held-out runs (of 15 per scheme) each held-out share needs
PAGE_MINIMUM = 2  # learned hint runs this page's checks need (of its seeds, 3 at the defaults)
SHARE_FLOOR = 0.5  # share of the tables' used mass the selected relation must hold to count as the selection
INTERLEAVED_MINIMUM = 4  # learned held-out interleaved-parity runs (of 9) in its invariant cells its share needs
GROWING_MINIMUM = 3  # learned held-out runs in cells where SRC grows (offsets, coupling, hint, LBPE) the 'only if' needs
REGISTERED_LBPE_SHARE = 0.75  # held_out_lbpe_selects_needed's threshold when it was registered (see its revision)
HINT_GAP = 0.3  # answer accuracy at 2N, hint minus plain offsets, below which the dashboard qualifies Scale Hint
TABLE_SCHEMES = ("rpe", "coupled", "rpe_scale_hint", "lbpe")  # schemes that can represent a read moving with n
PREFIX_TIE = 1e-4  # logits: float rounding, below which two outputs count as the same (the proof check's bar)
LOSS_EVERY = 25  # steps between the kept points of a training-loss curve

# What the pilot runs (seeds 0-2, before this module was written; their records were not kept) chose and showed.
PILOT = ("Pilot runs (seeds 0-2, N = 8; their records were not kept) chose the recipe of the defaults: the number of "
         "steps, the learning rate, the tables' scale and their L1 weight, with which the learned entries sat on one "
         "relation and value per head. They also showed exact match decaying gradually beyond N in runs whose every "
         "read stays right, since one wrong answer among up to 2N spoils an instance: the generalization criterion "
         "therefore reads answer accuracy, and exact match is shown beside it.")
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


@dataclass(frozen=True)
class Parameters(Seeds, Execution):
    """Chapter 12's parameters."""

    chapter = "12_sequential_complexity"
    tasks: tuple[str, ...] = parameter("reasoning tasks to train", choices=TRAINED_TASKS)
    schemes: tuple[str, ...] = parameter("position schemes (each a set of relations the bias learns), or 'fire' (FIRE's "
                                         "learned bias, no tables)", choices=(*SCHEMES, FIRE))
    train_scale: int = parameter("largest training scale N (scales 1 .. N are trained)", 2, 64)
    scale_factor: int = parameter("largest evaluated scale, in multiples of N", 2, 8)
    vocab: int = parameter("vocabulary (copy and reversal draw distinct tokens: it must hold the largest scale's)",
                           8, 4096)
    dim: int = parameter("model width", 8, 1024)
    layers: int = parameter("decoder blocks", 1, 12)
    heads: int = parameter("attention heads per block (dim / heads must be an integer)", 1, 64)
    steps: int = parameter("Adam steps per run", 1, 100_000)
    batch: int = parameter("training instances per step", 1, 4096)
    lr: float = parameter("peak Adam learning rate (linear warm-up over the first 10 % of steps)", 1e-6, 1.0)
    eval_batch: int = parameter("evaluation instances per scale", 1, 65_536)
    table_scale: float = parameter("the bias is this multiple of the relation tables (moves logits faster)", 0.01, 1000.0)
    table_l1: float = parameter("weight of the L1 penalty on the relation tables", 0.0, 10.0)
    committed_sweep: str = parameter("committed sweep of this chapter (a folder of data/sweeps) whose runs are judged "
                                     "beside this run's; '' for none (what the sweep's own runs use)")

    def check(self) -> None:
        super().check()
        if self.dim % self.heads:
            raise ParameterError(f"parameter 'heads' = {self.heads} is out of range: dim / heads must be an integer "
                                 f"(dim = {self.dim})")
        for task in self.tasks:
            try:
                check_task(task, self.largest_scale, self.vocab)
            except ValueError as err:
                raise ParameterError(f"parameter 'vocab' = {self.vocab} is out of range for task {task!r} at the "
                                     f"largest evaluated scale {self.largest_scale}: {err}") from err
        if self.committed_sweep and not (SWEEPS_DIR / self.committed_sweep / "spec.yaml").exists():
            known = sorted(p.parent.name for p in SWEEPS_DIR.glob("*/spec.yaml"))
            raise ParameterError(f"parameter 'committed_sweep' = {self.committed_sweep!r} is out of range: no "
                                 f"data/sweeps/{self.committed_sweep}/spec.yaml; committed sweeps: {known} (or '')")
        if self.committed_sweep and set(self.seed_list) & set(HELD_OUT_SEEDS):
            raise ParameterError(f"parameter 'seed_start' = {self.seed_start} is out of range: with a committed sweep, "
                                 f"this page's seeds must avoid the sweep's held-out seeds {HELD_OUT_SEEDS[0]} .. "
                                 f"{HELD_OUT_SEEDS[-1]}")

    @property
    def largest_scale(self) -> int:
        return self.scale_factor * self.train_scale

    @property
    def longest(self) -> int:
        """Tokens in the longest evaluated instance of any task."""
        return max(sequence_length(t, self.largest_scale) for t in self.tasks)

    def memory_gb(self) -> float:
        attention = 16 * self.layers * self.heads * self.longest**2
        return self.workers * self.eval_batch * (attention + 8 * self.longest * (self.vocab + 8 * self.dim)) / GB

    def memory_rule(self) -> str:
        return "workers x eval_batch x (layers x heads x longest^2 attention + longest x (vocab + 8 dim) activations)"


def evaluated_scales(p: Parameters) -> list[int]:
    """``1``, ``N/2``, ``N``, every scale ``N+1 .. 2N`` (the verdict's range), then ``3N .. scale_factor N``."""
    n = p.train_scale
    return sorted({1, max(1, n // 2), *range(n, 2 * n + 1), *(f * n for f in range(3, p.scale_factor + 1))})


def network_config(p: Parameters, scheme: str, task: str) -> RelationNetworkConfig:
    """The relation network of a scheme; for ``fire``, FIRE's bias with its threshold at the longest training sequence
    (as chapter 11's) and no tables."""
    model = RelationNetworkConfig(vocab=p.vocab, dim=p.dim, layers=p.layers, heads=p.heads, scheme=scheme,
                                  max_length=p.longest, table_l1=p.table_l1, table_scale=p.table_scale)
    if scheme == FIRE:
        return model.with_(scheme="nope", encoding=FIRE,
                           fire_threshold=float(sequence_length(task, p.train_scale)))
    return model


def scheme_of(cfg: RelationRunConfig) -> str:
    """The scheme label of a run: its relations' scheme, or ``fire``."""
    return FIRE if cfg.model.encoding == FIRE else cfg.model.scheme


def run_configs(p: Parameters) -> list[RelationRunConfig]:
    """One run per (scheme, task, seed)."""
    return [RelationRunConfig(model=network_config(p, scheme, task), task=task, train_scale=p.train_scale,
                              steps=p.steps, batch=p.batch, lr=p.lr, seed=seed, device=p.device)
            for scheme in p.schemes for task in p.tasks for seed in p.seed_list]


def measure_run(run: TrainedRun, job: tuple[list[int], int]) -> dict[str, list[dict]]:
    """In the worker: exact match and answer accuracy per scale, the table usage, the training loss (mean over
    each :data:`LOSS_EVERY` steps) and the constant-prefix gaps (:func:`constant_prefix_gap`, without and with the
    separator in front)."""
    scales, eval_batch = job
    cfg = run.config
    ids = dict(scheme=scheme_of(cfg), task=cfg.task, seed=cfg.seed)
    curve = np.asarray(run.losses, dtype=float)
    ends = sorted(set(range(LOSS_EVERY, len(curve) + 1, LOSS_EVERY)) | {len(curve)})
    usage = [dict(**ids, **{k: (str(v) if k.endswith("value") else v) for k, v in row.items()})
             for row in table_usage(run.model)]
    return dict(accuracy=[dict(**ids, **row) for row in exact_match(run.model, cfg, scales, eval_batch)],
                usage=usage,
                losses=[dict(**ids, step=end, loss=float(curve[max(0, end - LOSS_EVERY): end].mean())) for end in ends],
                prefix=[dict(**ids, tied=constant_prefix_gap(run.model, opened=False),
                             opened=constant_prefix_gap(run.model, opened=True))])


def conjecture(train_scale: int, scale_factor: int) -> pd.DataFrame:
    """SRC's verdict of every (task, scheme) cell (:func:`lengthgen.model.programs.src_table`), indexed by both."""
    return pd.DataFrame(programs.src_table(train_scale, scale_factor)).set_index(["task", "scheme"])


def has_position_head(task: str) -> bool:
    """Whether some program of the task reads by position (mode and parity read uniformly)."""
    return any(h.build is not None for heads in programs.PROGRAMS[task].values() for h in heads)


def invariant_reads(task: str, scheme: str, train_scale: int, scale_factor: int) -> dict[str, set[int]]:
    """:func:`lengthgen.model.programs.invariant_reads` in the network's relations (``hint_offset_0`` is ``offset``);
    none for a scheme that is not an SRC scheme (FIRE)."""
    if scheme not in programs.SCHEMES:
        return {}
    needed: dict[str, set[int]] = {}
    for relation, keys in programs.invariant_reads(task, scheme, train_scale, scale_factor).items():
        needed.setdefault("offset" if relation == "hint_offset_0" else relation, set()).update(keys)
    return needed


def invariant_text(task: str, scheme: str, train_scale: int, scale_factor: int) -> str:
    """The invariant reads of a cell in words: ``"hint_mirror_2 = -1; offset = 1"`` (``"none"``)."""
    return "; ".join(f"{r} = {', '.join(map(str, sorted(k)))}"
                     for r, k in sorted(invariant_reads(task, scheme, train_scale, scale_factor).items())) or "none"


def selection(usage: pd.DataFrame, train_scale: int, scale_factor: int) -> pd.DataFrame:
    """Per run: the relation holding most of the tables' used mass (``selected``; ``none`` when no entry is used),
    its largest positive entry across layers and heads (``value``, ``bias``), and whether that is a read of an
    SRC-invariant program of the task, the relation holding at least :data:`SHARE_FLOOR` of the mass (``needed``), and
    the share of the used mass on relations of the task's invariant reads (``invariant_mass``;
    offsets stand for ``hint_offset_0``, the same relation). A run with no usage rows (no tables) is not in the
    table; :func:`verdict_table` marks it as selecting nothing."""
    rows = []
    for (scheme, task, seed), g in (usage.groupby(["scheme", "task", "seed"], sort=False) if len(usage) else ()):
        mass = g.groupby("relation").mass.sum()
        selected = str(mass.idxmax()) if mass.max() > 0 else "none"
        needed = invariant_reads(task, scheme, train_scale, scale_factor)
        value, bias, ok = "", float("nan"), False
        if selected != "none":
            peak = g[g.relation == selected].sort_values("peak_bias").iloc[-1]
            value, bias = str(peak.peak_value), float(peak.peak_bias)
            ok = (selected in needed and selected != "absolute" and bias > 0 and int(value) in needed[selected]
                  and mass.max() >= SHARE_FLOOR * mass.sum())
        rows.append(dict(scheme=scheme, task=task, seed=seed, selected=selected, value=value, bias=bias,
                         share=float(mass.max() / mass.sum()) if mass.sum() > 0 else 0.0, needed=ok,
                         invariant_mass=float(mass[mass.index.isin(list(needed))].sum() / mass.sum())
                         if mass.sum() > 0 else 0.0,
                         invariant_reads=invariant_text(task, scheme, train_scale, scale_factor)))
    return pd.DataFrame(rows, columns=["scheme", "task", "seed", "selected", "value", "bias", "share", "needed",
                                       "invariant_mass", "invariant_reads"])


def measured_verdict(in_range: float, worst_answers: float) -> str:
    """Not learned, generalizes or fails, from the lowest exact match at training scales and the lowest answer
    accuracy over ``N+1 .. 2N``."""
    if in_range < LEARNED_FLOOR:
        return "not learned"
    return "generalizes" if worst_answers >= GENERALIZES_FLOOR else "fails"


def verdict_table(accuracy: pd.DataFrame, usage: pd.DataFrame, train_scale: int, scale_factor: int) -> pd.DataFrame:
    """One row per run: lowest exact match at the evaluated training scales, lowest answer accuracy over
    ``N+1 .. 2N``, exact match at ``N+1`` and ``2N``, SRC at ``N`` and at the largest scale, the measured and the
    conjecture's verdicts, and what the tables selected (:func:`selection`)."""
    src = conjecture(train_scale, scale_factor)
    n, rows = train_scale, []
    for (scheme, task, seed), g in accuracy.groupby(["scheme", "task", "seed"], sort=False):
        at = g.set_index("scale")
        beyond = at[(at.index > n) & (at.index <= 2 * n)]
        in_range = float(at.exact[at.index <= n].min())
        worst = float(beyond.token.min())
        measured = measured_verdict(in_range, worst)
        registered = (task, scheme) in src.index  # FIRE is compared with the schemes, not an SRC scheme
        cell = src.loc[(task, scheme)] if registered else pd.Series(dict(src_train=np.nan, src_largest=np.nan,
                                                                             predicted="", program=""))
        rows.append(dict(scheme=scheme, task=task, seed=seed, in_range=in_range, worst_answers=worst,
                         exact_n1=float(at.exact[n + 1]), exact_2n=float(at.exact[2 * n]),
                         answers_2n=float(at.token[2 * n]), src_n=cell.src_train, src_largest=cell.src_largest,
                         registered=registered, grows=cell.predicted == "fails", predicted=cell.predicted,
                         program=cell.program, measured=measured, learned=measured != "not learned",
                         agrees=registered and measured == cell.predicted, position_head=has_position_head(task)))
    verdicts = pd.DataFrame(rows).merge(selection(usage, train_scale, scale_factor), on=["scheme", "task", "seed"],
                                        how="left")
    return verdicts.fillna({"selected": "none", "value": "", "share": 0.0, "needed": False, "invariant_mass": 0.0,
                            "invariant_reads": "none"}).astype({"needed": bool})


def _share(judged: pd.DataFrame, column: str) -> float:
    return float(judged[column].mean()) if len(judged) else float("nan")


def rpe_growing_tasks(train_scale: int, scale_factor: int, tasks: tuple[str, ...] = FIRST_SWEEP_TASKS) -> tuple[str, ...]:
    """The tasks (of ``tasks``: by default those the first-sweep checks judge) on which SRC grows under plain offsets
    and not under the scale hint."""
    src = conjecture(train_scale, scale_factor).predicted
    return tuple(t for t in tasks if src[(t, "rpe")] == "fails" and src[(t, "rpe_scale_hint")] == "generalizes")


def held_out_groups(committed: pd.DataFrame, train_scale: int, scale_factor: int) -> dict[str, pd.DataFrame]:
    """The committed sweep's runs each held-out check judges (one definition for the checks and the prose). The checks
    registered with the first sweep judge its tasks (:data:`FIRST_SWEEP_TASKS`); the ``added_*`` groups hold the
    tasks added later (:data:`ADDED_TASKS`), which have their own checks."""
    added = committed[committed.task.isin(ADDED_TASKS)]
    committed = committed[committed.task.isin(FIRST_SWEEP_TASKS)]
    learned = committed[committed.learned]
    positional = learned[learned.position_head]
    where_rpe_grows = committed.task.isin(rpe_growing_tasks(train_scale, scale_factor))
    added_learned = added[added.learned]
    interleaved = added_learned[added_learned.task == INTERLEAVED]
    return dict(
        first=committed,
        learned=learned,
        hint=positional[positional.scheme == "rpe_scale_hint"],
        lbpe=positional[positional.scheme == "lbpe"],
        fire=positional[positional.scheme == FIRE],
        hint_where_rpe_grows=learned[(learned.scheme == "rpe_scale_hint") & learned.task.isin(
            rpe_growing_tasks(train_scale, scale_factor))],
        hint_all_where_rpe_grows=committed[(committed.scheme == "rpe_scale_hint") & where_rpe_grows],
        rpe_all_where_rpe_grows=committed[(committed.scheme == "rpe") & where_rpe_grows],
        growing=learned[learned.grows & learned.scheme.isin(TABLE_SCHEMES)],
        absolute=positional[positional.scheme.isin(["ape", "nope"])],
        invariant=learned[learned.registered & ~learned.grows],
        invariant_cells=committed[committed.registered & ~committed.grows & committed.position_head],
        added=added,
        added_learned=added_learned,
        added_hint=added_learned[(added_learned.scheme == "rpe_scale_hint") & added_learned.task.isin(
            rpe_growing_tasks(train_scale, scale_factor, ADDED_TASKS))],
        added_growing=added_learned[added_learned.grows & added_learned.scheme.isin(TABLE_SCHEMES)],
        added_invariant=added_learned[added_learned.registered & ~added_learned.grows],
        interleaved_invariant=interleaved[interleaved.registered & ~interleaved.grows],
    )


def claim_values(own: pd.DataFrame, committed: pd.DataFrame | None = None, train_scale: int = 8,
                 scale_factor: int = 4) -> dict[str, float]:
    """Every claim's value from this page's run verdicts and, when given, the committed sweep's (at its ``train_scale``
    and ``scale_factor``). Without a committed sweep the held-out checks get NaN: they judged nothing, and fail."""
    everything = own if committed is None else pd.concat([own, committed], ignore_index=True)
    hint = own[own.learned & own.position_head & (own.scheme == "rpe_scale_hint")]
    rpe = own[(own.scheme == "rpe") & own.position_head]
    nan = float("nan")
    values = dict(
        registered_cells=float((everything.learned & everything.registered & ~everything.agrees).sum()),
        not_learned_runs=float((~everything.learned).sum()),
        hint_generalizes=float((hint.measured != "generalizes").sum()),
        hint_selects_needed=float((~hint.needed).sum()),
        judged_groups=float(len(hint) < PAGE_MINIMUM),
        rpe_generalizes=float((rpe.learned & (rpe.measured == "generalizes")).sum()),
        rpe_learned=float(rpe.learned.sum()),
        fresh_seeds=float(everything.seed.isin(PILOT_SEEDS).sum()
                          + (0 if committed is None else (~committed.seed.isin(HELD_OUT_SEEDS)).sum())),
    )
    if committed is None:
        return values | dict.fromkeys([c.name for c in CLAIMS if c.name.startswith("held_out")], nan)
    g = held_out_groups(committed, train_scale, scale_factor)
    generalizes = {name: g[name].measured == "generalizes" for name in g}
    hint_gap = (g["hint_all_where_rpe_grows"].answers_2n.mean() - g["rpe_all_where_rpe_grows"].answers_2n.mean()
                if len(g["hint_all_where_rpe_grows"]) and len(g["rpe_all_where_rpe_grows"]) else nan)
    cells_without = g["invariant_cells"].groupby(["task", "scheme"]).measured.agg(lambda m: not (m == "generalizes").any())
    return values | dict(
        held_out_hint_generalizes=_share(g["hint"].assign(ok=generalizes["hint"]), "ok"),
        held_out_hint_where_rpe_grows=float((~generalizes["hint_where_rpe_grows"]).sum()),
        held_out_hint_learned_where_rpe_grows=float(len(g["hint_where_rpe_grows"])),
        held_out_hint_gap=float(hint_gap),
        held_out_selects_needed=_share(g["hint"], "needed"),
        held_out_lbpe_selects_needed=_share(g["lbpe"], "needed"),
        held_out_lbpe_invariant_mass=_share(g["lbpe"], "invariant_mass"),
        held_out_growing_fails=float(generalizes["growing"].sum()),
        held_out_growing_runs=float(len(g["growing"])),
        held_out_absolute_generalizes=float(generalizes["absolute"].sum()),
        held_out_judged=float((len(g["hint"]) < HELD_OUT_MINIMUM["hint"]) + (len(g["lbpe"]) < HELD_OUT_MINIMUM["lbpe"])),
        held_out_invariant_share=_share(g["invariant"].assign(ok=generalizes["invariant"]), "ok"),
        held_out_invariant_cells_without_lg=float(cells_without.sum()),
        held_out_disagreements=float((g["learned"].registered & ~g["learned"].agrees).sum()),
        held_out_lbpe_generalizes=_share(g["lbpe"].assign(ok=generalizes["lbpe"]), "ok"),
        held_out_fire_generalizes=_share(g["fire"].assign(ok=generalizes["fire"]), "ok"),
        held_out_added_hint_generalizes=_share(g["added_hint"].assign(ok=generalizes["added_hint"]), "ok"),
        held_out_added_hint_runs=float(len(g["added_hint"])),
        held_out_added_growing_fails=float(generalizes["added_growing"].sum()),
        held_out_added_growing_runs=float(len(g["added_growing"])),
        held_out_added_invariant_share=_share(g["added_invariant"].assign(ok=generalizes["added_invariant"]), "ok"),
        held_out_added_learned=float(len(g["added_learned"])),
        held_out_added_disagreements=float((g["added_learned"].registered & ~g["added_learned"].agrees).sum()),
        held_out_interleaved_generalizes=_share(g["interleaved_invariant"].assign(
            ok=generalizes["interleaved_invariant"]), "ok"),
        held_out_interleaved_judged=float(len(g["interleaved_invariant"]) < INTERLEAVED_MINIMUM),
        held_out_interleaved_runs=float(len(g["interleaved_invariant"])),
    )


def cell_table(verdicts: pd.DataFrame, seconds: dict[tuple[str, str], float] | None = None) -> pd.DataFrame:
    """One row per (task, scheme), in the order of :data:`TRAINED_TASKS` and of the schemes (FIRE last, anything else
    after it): SRC at N and at the largest scale (NaN for FIRE, which is not an SRC scheme), the conjecture's verdict,
    the measured verdicts (runs of each), runs agreeing among the learned, mean exact match at N + 1 and 2N, mean
    answer accuracy at 2N, what the tables selected and, when ``seconds`` gives them (a committed sweep's
    :attr:`CommittedRuns.cell_seconds`), the wall time of the run record that trained the cell's seeds."""
    order = {name: k for k, name in enumerate((*TRAINED_TASKS, *SCHEMES, FIRE))}
    rows = []
    for (task, scheme), g in sorted(verdicts.groupby(["task", "scheme"], sort=False),
                                    key=lambda cell: tuple(order.get(name, len(order)) for name in cell[0])):
        learned = g[g.learned]
        rows.append(dict(task=task, scheme=scheme, src_N=g.src_n.iloc[0], src_largest=g.src_largest.iloc[0],
                         predicted=g.predicted.iloc[0],
                         measured=", ".join(f"{m} x{k}" for m, k in g.measured.value_counts().items()),
                         agree=f"{int(learned.agrees.sum())} of {len(learned)}" if g.registered.iloc[0] else "n/a",
                         exact_N1=g.exact_n1.mean(),
                         exact_2N=g.exact_2n.mean(), answers_2N=g.answers_2n.mean(),
                         selected=", ".join(sorted({f"{s} = {v}" if s != "none" else s
                                                    for s, v in zip(g.selected, g.value, strict=True)}))))
        if seconds is not None:
            rows[-1]["wall_s"] = seconds.get((task, scheme), np.nan)
    return pd.DataFrame(rows, columns=["task", "scheme", "src_N", "src_largest", "predicted", "measured", "agree",
                                       "exact_N1", "exact_2N", "answers_2N", "selected",
                                       *(["wall_s"] if seconds is not None else [])])


def disagreements(verdicts: pd.DataFrame) -> str:
    """The learned runs whose measured verdict differs from the conjecture's, per cell, in words (``"none"``)."""
    learned = verdicts[verdicts.learned & verdicts.registered]
    runs = learned.groupby(["scheme", "task"]).size()
    return "; ".join(f"{scheme} on {task}: conjecture {g.predicted.iloc[0]}, measured {g.measured.iloc[0]} in "
                     f"{len(g)} of {runs[(scheme, task)]} learned runs"
                     for (scheme, task), g in learned[~learned.agrees].groupby(["scheme", "task"], sort=False)) or "none"


@dataclass
class ComplexityStudy:
    """Everything chapter 12 measures, or reads from the runs of a committed sweep."""

    accuracy: pd.DataFrame  # scheme, task, seed, scale, exact, token, n
    usage: pd.DataFrame  # scheme, task, seed, layer, head, relation, used, mass, share, top/peak value and bias
    losses: pd.DataFrame  # scheme, task, seed, step, loss
    prefix: pd.DataFrame  # scheme, task, seed, tied, opened (constant_prefix_gap without and with the separator)
    verdicts: pd.DataFrame  # one row per run (verdict_table)

    def details(self) -> dict[str, list[dict]]:
        """What the chapter's record carries, so that a sweep of the chapter keeps every run's measurements."""
        return dict(accuracy=self.accuracy.to_dict("records"), usage=self.usage.to_dict("records"),
                    losses=self.losses.to_dict("records"), prefix=self.prefix.to_dict("records"))


def study_from(results: list[dict[str, list[dict]]], train_scale: int, scale_factor: int) -> ComplexityStudy:
    """The study of measured runs (:func:`measure_run`'s dictionaries)."""
    accuracy, usage, losses, prefix = (pd.DataFrame([row for r in results for row in r[k]])
                                       for k in ("accuracy", "usage", "losses", "prefix"))
    return ComplexityStudy(accuracy, usage, losses, prefix, verdict_table(accuracy, usage, train_scale, scale_factor))


def prefix_values(*studies: ComplexityStudy | None) -> dict[str, float]:
    """constant_prefix_tie (the largest gap without the separator, over every network of the given studies) and
    constant_prefix_opened (the smallest with it, over their interleaved-parity networks; NaN when there are none)."""
    prefix = pd.concat([s.prefix for s in studies if s is not None], ignore_index=True)
    opened = prefix.opened[prefix.task == INTERLEAVED]
    return dict(constant_prefix_tie=float(prefix.tied.max()),
                constant_prefix_opened=float(opened.min()) if len(opened) else float("nan"))


def complexity_study(p: Parameters, progress: bool = True) -> ComplexityStudy:
    """Train every (scheme, task, seed) relation network and measure it."""
    jobs = [(cfg, (evaluated_scales(p), p.eval_batch)) for cfg in run_configs(p)]
    return study_from(map_stacked(measure_run, jobs, p.workers, progress), p.train_scale, p.scale_factor)


@dataclass
class CommittedRuns:
    """The runs of a committed sweep of this chapter that its spec lists now (fresh: same code, same notebook)."""

    study: ComplexityStudy | None  # None when no run is present
    expected: int  # chapter runs the spec lists
    missing: int  # of those, runs with no stored record
    train_scale: int
    scale_factor: int
    wall_seconds: list[float]  # each present record's wall time
    cell_seconds: dict[tuple[str, str], float]  # (task, scheme): wall time of the record that trained the cell


def committed_runs(name: str) -> CommittedRuns:
    """Read the committed sweep ``data/sweeps/<name>``: every fresh run record's measurements."""
    folder = SWEEPS_DIR / name
    runs = [r for r in expand(load_spec(folder / "spec.yaml")) if r.chapter == Parameters.chapter]
    records = list(stored_records(folder, {r.key for r in runs}))
    if not records:
        return CommittedRuns(None, len(runs), len(runs), 0, 0, [], {})
    settings = {(int(r["parameters"]["train_scale"]), int(r["parameters"]["scale_factor"])) for r in records}
    if len(settings) != 1:
        raise ValueError(f"the committed sweep {name} mixes training scales or factors {sorted(settings)}")
    train_scale, factor = settings.pop()
    study = study_from([r["details"] for r in records], train_scale, factor)
    if study.verdicts.duplicated(["scheme", "task", "seed"]).any():
        raise ValueError(f"the committed sweep {name} has two runs of the same (scheme, task, seed)")
    seconds = [float(r["wall_time_s"]) if r["wall_time_s"] is not None else float("nan") for r in records]
    cells = {(row["task"], row["scheme"]): wall for r, wall in zip(records, seconds, strict=True)
             for row in r["details"]["accuracy"]}
    return CommittedRuns(study, len(runs), len(runs) - len(records), train_scale, factor, seconds, cells)
