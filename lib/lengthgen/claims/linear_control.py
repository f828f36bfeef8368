"""The claims of ``lengthgen.chapters.linear_control`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from ..chapters.linear_control import LAW_TOLERANCE
from . import Claim, reported

CLAIMS = (
    Claim("sgd_to_pinv", "SGD from zero: largest relative distance to the min-norm interpolant", "<=", 1e-3,
          "With well-conditioned features the fit is limited only by the number of steps.", role="proof"),
    Claim("gd_closed_form", "standard frequencies: GD vs its closed form (relative)", "<=", 1e-3,
          "The closed-form trajectory is exact; 10^-3 leaves room for accumulated rounding over the steps.", role="proof"),
    Claim("gd_far_from_pinv", "standard frequencies: smallest relative distance of GD to pinv", ">=", 0.1,
          "With badly conditioned features GD must still be far from the min-norm interpolant: the spectral filter, not "
          "convergence, explains where it is.", role="sanity"),
    Claim("replicates_differ", "smallest relative distance between two seeds' min-norm kernels beyond T", ">=", 0.1,
          "Seeds jitter the frequencies and the key's phases, so each seed's min-norm kernel is a different object "
          "beyond T (inside T every interpolant is e_k; with phases alone the kernels were identical to 1e-15, and "
          "'every seed' was n = 1).", role="sanity"),
    Claim("linear_fits_T", "every head of section 2: lowest accuracy at length T", ">=", 0.99,
          "Every head is trained (or solved) to fit the training lengths; a head that does not fit says nothing about "
          "extrapolation.", role="sanity"),
    Claim("ablation_fits_T", "Adam and random-init SGD kernels: largest |Phi q - e_k| on the training offsets", "<=",
          1e-3, "Both ablations must still interpolate, or their distance from the min-norm interpolant means nothing.",
          role="sanity"),
    Claim("family_bound", "upper bound on the accuracy of ANY unnormalized kernel of the family at the longest length "
          "(Gaussian bins)", "<", 0.5,
          "With a unit key, f(k) <= |q|/sqrt 2 and the far energy per offset is |q|^2/2d, so target^2/energy <= d for "
          "every q: a theorem about the family, whatever training does.", role="proof"),
    Claim("error_law", "largest |measured - exact expected squared error| in measured standard errors", "<=", 4.0,
          "The formula is exact; each length's mean over the evaluation batch has a measured standard error, and 4 of them "
          "bound every one of a handful of lengths with room to spare.", role="proof"),
    Claim("law_linear", "linear head (SGD from zero): largest |measured - predicted accuracy| over lengths",
          "<=", LAW_TOLERANCE,
          "Predicted from quantities at T only: the kernel on the training offsets and the plane amplitudes of q, continued "
          "with random phases.", per_run=True),
    reported("law_squared", "normalized f² head: largest |measured - predicted accuracy| over lengths"),
    Claim("squared_longest", "normalized f² head: accuracy at the longest length", "<", 0.5,
          "Normalization without the exponential keeps a finite collapse length: by the longest length the f² head "
          "must have lost the target too.", per_run=True),
    Claim("linear_longest", "linear kernel: accuracy at the longest length", "<", 0.5,
          "Without normalization the accumulated offsets must win at the longest length.", role="proof", per_run=True),
    Claim("softmax_beats_linear", "softmax minus linear accuracy, smallest over the lengths where the law puts the "
          "linear head below 0.5", ">=", 0.25,
          "Where the prediction says the linear kernel has collapsed, the exponential map must still retrieve: the "
          "comparison is made at the same lengths, chosen by the prediction, not by the measurement.", per_run=True),
    Claim("no_interpolant_extrapolates", "least-bad interpolant (lowest expected squared error at the longest length): "
          "accuracy there", "<", 0.5,
          "The interpolant with the whole future in view still loses the target: a measured instance of family_bound "
          "(which it must obey), not evidence about gradient descent.", role="proof", per_run=True),
    Claim("error_slope", "smallest log-log slope of the linear kernel's error in L", ">=", 0.8,
          "The exact error formula predicts slope 1 for a kernel that oscillates with constant energy beyond T; it is "
          "computed from that formula, so it holds for any kernel with far energy.", role="proof"),
    reported("min_norm_vs_least_bad", "expected error at the longest length: min-norm over least-bad interpolant "
             "(mean over runs)"),
    reported("collapse_linear", "predicted collapse length of the linear head, in multiples of T (median over runs)"),
    reported("collapse_squared", "predicted collapse length of the normalized f² head, in multiples of T (median)"),
    reported("gaussian_law_linear", "linear head: largest |measured - Gaussian-bin prediction| (the law first "
             "registered; it holds only where bins hold many offsets)"),
    reported("gaussian_law_squared", "normalized f² head: largest |measured - Gaussian-bin prediction|"),
    reported("softmax_longest", "softmax head: mean accuracy at the longest length"),
    reported("law_random_q", "linear map, an untrained random interpolant: largest |measured - predicted| (a negative "
             "control: does the law hold without training?)"),
    reported("law_squared_random_q", "f² map, the same random interpolant: largest |measured - predicted| (does the f² "
             "law fail for learned phases or for any kernel?)"),
    reported("law_softmax", "softmax head: largest |measured - predicted| accuracy (not registered as a claim: the "
             "softmax head's law is chapter 4's)"),
    reported("adam_distance", "Adam from zero: mean relative distance to the min-norm interpolant"),
    reported("random_init_distance", "SGD from a random init: mean relative distance to the min-norm interpolant"),
)
