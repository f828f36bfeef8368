"""The claims of ``lengthgen.chapters.carrier`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from ..analysis.carrier import FEASIBLE_QUANTILE
from ..chapters.carrier import FEASIBLE_DRAWS, NULL_QUANTILE
from . import Claim, reported

CLAIMS = (
    Claim("peak_at_k", "distance of the learned kernel's in-range peak from the target offset k", "<=", 0,
          "Exact: the argmax over the training offsets of the learned kernel must be k.", per_run=True, role="sanity"),
    Claim("carrier_r2", "variance share of the learned kernel on the training offsets explained by the aligned carrier",
          ">=", 0.9, "'Most of the kernel is the carrier', without claiming that the intermediate planes are aligned, "
          "which they are not exactly.", per_run=True),
    Claim("carrier_specific", f"learned carrier R^2 minus the {FEASIBLE_QUANTILE:.0%} quantile of the carrier R^2 of "
          f"{FEASIBLE_DRAWS} random kernels that fit the training offsets with the head's own margin and norm", ">", 0,
          "What a wrong account predicts: if training only had to fit the task, the head would be one of the many kernels "
          "that do, and any of them would score as well.", per_run=True),
    reported("mm_direction_excess", f"cosine between the head's coefficients and the amplitude-l1 max-margin kernel, "
             f"minus the {FEASIBLE_QUANTILE:.0%} quantile of the same cosine for the random kernels of carrier_specific, "
             f"largest over runs",
             "A bilinear head pays |q_m|^2 + |k_m|^2 >= 2 sqrt(d) a_m per plane, so the implicit-bias account makes the "
             "max-margin kernel in the l1 norm of plane amplitudes its limit: the head should lean towards it more than "
             "kernels that merely fit the task do."),
    reported("l2_direction_excess", "the same excess for the l2 max-margin kernel, largest over runs"),
    reported("direction_rise_min", "smallest gain in cosine with the amplitude-l1 max-margin kernel from step 10 to the "
             "end of training"),
    reported("group_over_l2_runs", "runs closer in direction to the amplitude-l1 max-margin kernel than to the l2 one "
             "(the bilinear parametrization predicts all of them)"),
    reported("rank_above_encoding", "runs whose 99 %-energy rank exceeds the features' (only exact rank is bounded)"),
    reported("carrier_r2_feasible", "carrier R^2 of the random task-solving kernels, mean over runs and draws"),
    reported("mm_beyond_T", "R^2 beyond T of the amplitude-l1 max-margin kernel minus that of the min-norm "
             "interpolant, mean over runs",
             "Registered as evidence before the first measurement (the max-margin kernel should predict the learned kernel "
             "beyond T at least as well as the min-norm extension of its in-range values)."),
    reported("r2_beyond_min_norm", "R^2 beyond T of the min-norm extension of the learned in-range kernel, mean"),
    reported("r2_beyond_carrier", "R^2 beyond T of the aligned carrier, mean over runs"),
    reported("null_share", "share of the learned coefficients invisible on the training offsets (null space), mean"),
    reported("cos_l2_mean", "cosine with the l2 max-margin kernel, mean over runs"),
    reported("coherence_mean", "mean phase coherence of the identifiable planes"),
    reported("coherence_over_null", f"runs whose coherence exceeds the {NULL_QUANTILE:.1%} quantile of its random-phase "
             "null"),
    reported("rank_gap_max", "largest |learned rank - random-phase rank| (low rank is the encoding's, not learned)"),
    reported("slow_error_filter", "mean slow-plane phase error against the matched filter (rad)"),
)
