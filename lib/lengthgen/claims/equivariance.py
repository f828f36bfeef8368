"""The claims of ``lengthgen.chapters.equivariance`` (the layer is described in :mod:`lengthgen.claims`)."""

from __future__ import annotations

from . import Claim, f32_toeplitz, reported

HIJACK_LAW_BAR = -0.1  # the first-hijack law must beat a per-offset constant fitted on other seeds by 0.1 decade

CLAIMS = (
    Claim("toeplitz_f64", "float64 logit matrix is Toeplitz, trained and untrained heads (relative deviation)", "<=", 1e-12,
          "A numerical check of the theorem, which holds for any rotary head: an order of magnitude above the rounding "
          "estimate L eps_64 at the longest length.", role="proof"),
    Claim("toeplitz_f32", "float32 logit matrix is Toeplitz, trained and untrained heads (relative deviation)", "<=",
          f32_toeplitz, "The same rounding argument in single precision: cos and sin of angles up to L radians carry an "
          "error of about L eps_32, and a factor 10 leaves room for the matrix product.", role="proof",
          threshold_text="10 L eps_32"),
    Claim("renormalized_f64", "renormalized long pattern equals the length-T pattern, trained and untrained heads", "<=",
          1e-12, "The same 10^-12 as the float64 Toeplitz check: attention weights are at most 1, so rounding stays far "
          "below it.", role="proof"),
    Claim("peak_at_k", "distance of the learned kernel's in-range peak from the target offset k", "<=", 0,
          "Exact: within the training range the learned kernel must peak at the target offset.", per_run=True,
          role="sanity"),
    Claim("worst_accuracy", "lowest accuracy of the run at any evaluated length", ">=", 0.95,
          "The rule learned at length T must be reproduced at every longer length: a head whose rule depends on absolute "
          "position (chapter 2) falls to chance 1/V there.",
          per_run=True),
    reported("hijack_judged_share", "share of the hijack heads that learned the task (in-range kernel peaking at k) "
             "and are hijacked within the horizon: the runs the hijack law is judged on"),
    reported("hijack_law_error", "median |log10(observed / predicted first hijack)| over the judged hijack heads, the "
             "prediction from the amplitudes and target logit measured at T"),
    reported("hijack_law_within_10", "share of the judged hijack heads whose first hijack lies within a factor 10 of the "
             "law's prediction"),
    reported("hijack_law_gain", "median |log10 error| of the random-phase law minus that of a per-offset constant fitted "
             "on the other seeds (the geometric mean of their first hijacks), over the judged hijack heads"),
    reported("untrained_worst_accuracy", "lowest accuracy of an untrained head beyond T (the proof checks hold for it)"),
    reported("margin_at_horizon_min", "smallest margin f(k) - max f beyond T over runs, at the horizon (nats)"),
    reported("hijack_bias", "median signed log10(observed / predicted first hijack) over the judged hijack heads "
             "(positive: the hijack comes later than the law predicts)"),
    reported("hijack_calibrated_error", "median |log10 error| of the law over the judged hijack heads after rescaling each "
             "prediction by the median ratio observed/predicted of the other seeds at its offset (the law's ranking of "
             "heads, its bias removed)"),
    reported("hijack_constant_error", "median |log10 error| of the per-offset constant fitted on the other seeds, over "
             "the judged hijack heads"),
)
