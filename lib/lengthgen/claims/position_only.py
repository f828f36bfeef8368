"""The claims of ``lengthgen.chapters.position_only`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from ..chapters.position_only import FACTORIZED_CELL_TOLERANCE, LG_ERROR, TOLERANCE_ABSOLUTE, TOLERANCE_RELATIVE
from . import Claim, reported

PREDICTION_TOLERANCE = f"{TOLERANCE_ABSOLUTE} + {TOLERANCE_RELATIVE} x predicted"


_TOLERANCE_REASON = ("The prediction is made from the training scales alone (gradient descent's iterate on the expected "
                     "loss after the step budget, equation eq-pola-gd, untrained operators at their init); SGD on sampled "
                     f"sequences follows it up to its sampling noise. Tolerance: {TOLERANCE_ABSOLUTE} absolute (half the solved "
                     f"threshold) plus {TOLERANCE_RELATIVE:.0%} of the prediction.")


_TOLERANCE_REVISED = ("The tolerance was set after a prototype run at the defaults (then batch 32, 400 steps) showed "
                      "deviations up to about 3 % of the prediction. The first full run (batch 16) missed it in 5 of "
                      "the about 13,000 rows of that run, all on tabular cells no table represents (sampling noise around the "
                      "least-squares compromise, up to 7.6 %); the batch was raised to 64, the tolerance kept.")


CLAIMS = (
    Claim("ape_fits_fixed_length", "at one fixed length, the full table (APE) fits every task: largest training error",
          "<=", 1e-9, "Proof check: at one length every causal target is some lower-triangular table, and APE has one "
          "operator per cell. Every other relation is a function of the cell, so its model class is a tying of "
          "APE's and cannot fit more (true by construction, not checked separately).", role="proof"),
    Claim("hand_verdicts", "(task, tabular relation) cells whose LRC verdict differs from the one derived by hand",
          "==", 0, "Sanity check of the LRC code against the verdicts written down from the definitions "
          "(REGISTERED_VERDICTS in the chapter's module).", role="sanity"),
    Claim("lg_iff_lrc_tabular", "(task, tabular relation) cells at zero init whose measured verdict differs from the LRC "
          "verdict", "==", 0, "Proof check: for a tabular relation, gradient descent from zero moves only the operators "
          "the training cells touch and leaves every other one at zero, so once it has converged the model "
          "generalizes exactly when every new operator's target is zero, which is LRC not growing.", role="proof"),
    Claim("prediction_matches_tabular", f"rows (tabular relation, init, scale) where the SGD-trained error misses the "
          f"closed-form prediction by more than {PREDICTION_TOLERANCE}", "==", 0,
          _TOLERANCE_REASON + " For a tabular relation the prediction is the weighted mean of each operator's targets "
          "and the untouched init elsewhere, which preconditioned SGD reaches by construction: this guards the "
          "measurement.", role="sanity", revised=_TOLERANCE_REVISED),
    Claim("prediction_matches_rotary", f"rows (RoPE, init, scale) where the SGD-trained error misses the closed-form "
          f"prediction by more than {PREDICTION_TOLERANCE}", "==", 0,
          _TOLERANCE_REASON + " The loss is linear least squares and every step draws a fresh batch, so the mean SGD "
          "iterate is exactly the expected-loss iterate of equation eq-pola-gd: this checks that the sampling noise "
          "is small and that the rotary model really extends by gradient descent's filter, not a new fact.",
          role="sanity", revised=_TOLERANCE_REVISED),
    Claim("random_init_rule", "(task, tabular relation, init scale, seed) cells at random init whose measured verdict "
          "differs "
          f"from 'generalizes iff LRC stops growing and sigma^2 U(n) / E(n) <= {LG_ERROR} at every test scale'", "==", 0,
          "U(n) is the expected squared error per unit init variance that the part of the init gradient descent "
          "leaves in place adds at scale n, E(n) the target energy; computed from the definitions before training. "
          "Bookkeeping rather than evidence: untouched operators cannot move, and the two init scales sit well on "
          "either side of the threshold for the cells where the rule has content (RPE and mirror cells that "
          "generalize from zero).", role="sanity"),
    Claim("factorized_fits_like_table", "largest |p_i^T A p_j - full table's least-squares value| over the training "
          "cells of every factorized-APE model (task, init std, seed)", "<=", FACTORIZED_CELL_TOLERANCE,
          "Sanity check: with rank at least the number of positions the training scales reach (enforced by the "
          "parameter check), p^T A p restricted to those positions can be any table, so the least-squares fit is the "
          "full table's, whose value on each cell is unique (the weighted mean of its targets, computed in closed "
          "form, not from the factorized model). What could fail is Adam on a non-convex loss from a random init "
          "stopping short (a saddle: zero is stationary; a small init starts near it) or off the optimum. Tolerance: "
          f"{FACTORIZED_CELL_TOLERANCE}, one hundredth of a unit target.", role="sanity"),
    Claim("factorized_verdicts", "factorized-APE models (task, init std, seed) whose measured verdict differs from "
          "the full table's (APE's LRC verdict; the random-init rule gives the same for APE)", "==", 0,
          "Proof check: the row p_i of a position no training instance reaches gets no gradient and keeps its init, "
          "so each cell of such a row is p_i^T A p_j with p_i random, however A and the other rows were trained; "
          "every task's target needs such cells, so the model fails beyond T once it fits the training scales, and "
          "cannot fit them where the full table cannot. It fails only if the fit does (factorized_fits_like_table) "
          "or if an unreached row moves.", role="proof"),
    reported("lrc_blind_scales", "test scales (task, relation, n) where LRC(n) = LRC(T) < inf but the zero-init model "
             "misses: LRC is not sufficient (possible only off the tabular relations)"),
    reported("lrc_rotary_cells", "RoPE (task) cells at zero init whose measured verdict differs from the LRC verdict"),
    reported("not_fit_in_budget", "(task, relation) cells at zero init that LRC calls representable at T but gradient "
             "descent had not fit at the training scales within the step budget"),
    reported("fits_beyond_ape", "(task, relation) cells that a relation fits across the training scales and APE does "
             "not (APE's (i, j) does not see the length)"),
    reported("generalizing_cells", "(task, relation) cells at zero init that generalize to the longest scale"),
)
