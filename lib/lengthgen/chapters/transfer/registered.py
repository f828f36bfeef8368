"""Chapter 6's fixed settings: reserved seeds, the variants' labels, and the carrier and masking tests' constants."""

from ..seeds import seeds

HELD_OUT_SEEDS = seeds("06_transfer", "held_out")  # the committed sweep's runs draw here, reserved before any of them ran
RESTORE_MARGIN_SE = 3.0  # a restored answer also gains this many worst-case standard errors (0.5 / sqrt(mask_batch))
MASKING_CHECKS = ("masking_restores", "predicted_mask_restores")  # the masking test's evidence checks
MASK_CONDITIONS = ("unmasked", "hijackers", "predicted", "control", "runners_up", "complement", "all_far")
IDENTIFIABLE_TURNS = 1.0  # a plane is identifiable when it turns at least this many full circles within T
COHERENCE_QUANTILE = 0.999  # the quantile of the random-phase null that a head's coherence is compared with (reported)
MEASURABLE_RADIANS = 1.0  # a plane's phase is measurable within T when it turns at least this far (the coherence test)
IDENTIFIABLE = "RoPE, all planes identifiable"  # RoPE at the identifiable base
TURNING_ONLY = "RoPE, turning planes only"  # the ablation: only the identifiable planes rotate (rope_planes)
MAX_FALSI_STEPS = 60  # regula falsi steps for a null kernel's length (it stops sooner once the bracket is exhausted)
KERNEL_RCOND = 1e-3  # directions the training offsets show below this (relative) singular value are lost in kappa's noise
CARRIER_DRAWS = 60  # task-solving random kernels per retrieval head: the carrier test's null, conditional on the task
CARRIER_LEVEL = 1e-3  # level of the pooled carrier test (the threshold of carrier_pooled)
POWER_MIXES = (0.0, 0.25, 0.5, 0.75, 1.0)  # weight of the aligned carrier in the alternatives the power is computed for
POWER_REPLICATES = 4000  # draws of one alternative kernel per head when computing the pooled test's power
CONTROL_HEADS = 5  # single rotary heads (chapter 3's, at this chapter's offset and length) that the carrier test is run on
FULL_SEQUENCE_SWEEP = "zoo_networks"  # chapter 11's committed sweep: copy and reversal in this decoder, read, not retrained
FULL_SEQUENCE_ENCODINGS = ("rope", "ape", "nope")  # the encodings of this chapter, in chapter 11's names
CHAPTER3_HEAD = dict(dim=64, steps=1000, batch=64, lr=0.01, rope_base=10_000.0)  # chapter 3's defaults (a test keeps them)
