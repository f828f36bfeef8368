"""The claims of ``lengthgen.chapters.connections`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from ..chapters.connections import EXTRAPOLATION_ERROR
from . import Claim, reported

CLAIMS = (
    Claim("targets_minimal_order", "targets whose exact response's Hankel rank differs from the declared minimal "
          "state", "==", 0, "Sanity check of the rank measurement on responses whose state dimension is known.",
          role="sanity"),
    Claim("rank_sees_extra_mode", "targets whose Hankel rank does not rise by one when a decaying mode with relative "
          f"error {EXTRAPOLATION_ERROR} at the longest length is added", "==", 0,
          "Sanity check of the rank tolerance (0.01 of the largest singular value): an extra state large enough to matter "
          "at the extrapolation threshold must count.", role="sanity"),
    Claim("small_init_minimal_state", "retrieval runs at the smallest init whose learned state dimension (Hankel rank) "
          "is not the minimal one", "==", 0,
          "Prediction (Cohen-Karlik et al. 2023): from a small init, gradient descent on an overparameterized linear RNN "
          "learns the lowest-dimensional system that fits the training length."),
    Claim("small_init_extrapolates", "runs at the smallest init whose relative error at the longest length exceeds "
          f"{EXTRAPOLATION_ERROR} (or is not finite)", "==", 0,
          "Sanity check: both targets have memories much shorter than T, so any stable system that fits the training "
          "length extrapolates; this guards the fit, the contrast is in the reported tail errors.", role="sanity"),
    reported("large_init_excess_state", "fraction of runs at the largest init whose state dimension exceeds the "
             "minimal one"),
    reported("large_init_long_error", "largest error at the longest length among runs at the largest init"),
    reported("tail_error_ratio", "median error on the lags training never sees (i >= T), largest init over smallest "
             "init, retrieval target"),
    reported("large_init_train_error", "largest training error among runs at the largest init (do they fit T?)"),
    reported("large_init_unstable", "runs at the largest init whose learned A has spectral radius above 1"),
    reported("small_init_extrapolation_max", "largest error at the longest length among runs at the smallest init"),
)
