"""The claims of ``lengthgen.chapters.position_only`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from ..chapters.position_only import FACTORIZED_CELL_TOLERANCE, LG_ERROR, TOLERANCE_ABSOLUTE, TOLERANCE_RELATIVE
from . import Claim, reported

PREDICTION_TOLERANCE = f"{TOLERANCE_ABSOLUTE} + {TOLERANCE_RELATIVE} x predicted"






CLAIMS = (
    Claim("ape_fits_fixed_length", "at one fixed length, the full table (APE) fits every task: largest training error",
          "<=", 1e-9, "Proof check: at one length every causal target is some lower-triangular table, and APE has one "
                      "operator per cell.", role="proof"),
    Claim("hand_verdicts", "(task, tabular relation) cells whose LRC verdict differs from the one derived by hand",
          "==", 0, "Sanity check of the LRC code against the verdicts written down from the definitions "
          "(REGISTERED_VERDICTS in the chapter's module).", role="sanity"),
    Claim("lg_iff_lrc_tabular", "(task, tabular relation) cells at zero init whose measured verdict differs from the LRC "
          "verdict", "==", 0, "Proof check: for a tabular relation, gradient descent from zero moves only the operators "
          "the training cells touch and leaves every other one at zero, so once it has converged the model "
          "generalizes exactly when every new operator's target is zero, which is LRC not growing.", role="proof"),
    Claim("prediction_matches_tabular", f"rows (tabular relation, init, scale) where the SGD-trained error misses the "
          f"closed-form prediction by more than {PREDICTION_TOLERANCE}", "==", 0,
          "The prediction is made from the training scales alone (gradient descent's iterate on the expected loss after the "
          "step budget, equation eq-pola-gd, untrained operators at their init); SGD on sampled sequences follows it up to "
          "its sampling noise.", role="sanity"),
    Claim("prediction_matches_rotary", f"rows (RoPE, init, scale) where the SGD-trained error misses the closed-form "
          f"prediction by more than {PREDICTION_TOLERANCE}", "==", 0,
          "The prediction is made from the training scales alone (gradient descent's iterate on the expected loss after the "
          "step budget, equation eq-pola-gd, untrained operators at their init); SGD on sampled sequences follows it up to "
          "its sampling noise.",
          role="sanity"),
    Claim("random_init_rule", "(task, tabular relation, init scale, seed) cells at random init whose measured verdict "
          "differs "
          f"from 'generalizes iff LRC stops growing and sigma^2 U(n) / E(n) <= {LG_ERROR} at every test scale'", "==", 0,
          "U(n) is the expected squared error per unit init variance that the part of the init gradient descent leaves in "
          "place adds at scale n, E(n) the target energy; computed from the definitions before training.", role="sanity"),
    Claim("factorized_fits_like_table", "largest |p_i^T A p_j - full table's least-squares value| over the training "
          "cells of every factorized-APE model (task, init std, seed)", "<=", FACTORIZED_CELL_TOLERANCE,
          "Sanity check: with rank at least the number of positions the training scales reach, p^T A p can be any table "
          "there, so the least-squares fit is the full table's, computed in closed form.", role="sanity"),
    Claim("factorized_verdicts", "factorized-APE models (task, init std, seed) whose measured verdict differs from "
          "the full table's (APE's LRC verdict; the random-init rule gives the same for APE)", "==", 0,
          "Proof check: the row of a position no training instance reaches gets no gradient and keeps its init, so every "
          "task needing such cells fails beyond T once it fits the training scales.", role="proof"),
    reported("lrc_blind_scales", "test scales (task, relation, n) where LRC(n) = LRC(T) < inf but the zero-init model "
             "misses: LRC is not sufficient (possible only off the tabular relations)"),
    reported("lrc_rotary_cells", "RoPE (task) cells at zero init whose measured verdict differs from the LRC verdict"),
    reported("not_fit_in_budget", "(task, relation) cells at zero init that LRC calls representable at T but gradient "
             "descent had not fit at the training scales within the step budget"),
    reported("fits_beyond_ape", "(task, relation) cells that a relation fits across the training scales and APE does "
             "not (APE's (i, j) does not see the length)"),
    reported("generalizing_cells", "(task, relation) cells at zero init that generalize to the longest scale"),
)
