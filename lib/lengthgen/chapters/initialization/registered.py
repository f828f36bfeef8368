"""Chapter 13's fixed settings: the initializations, reserved seeds, and the bars its checks and reports use."""

from ..seeds import every_seed, seeds

CHAPTER = "13_initialization"  # the chapter these settings belong to (its Parameters.chapter)

INIT_SCHEMES = ("gpt2", "qk", "all")
INIT_LABELS = {"gpt2": "GPT-2 (sd 0.02)", "qk": "q, k x s", "all": "all x s"}
GPT2_STD = 0.02  # the standard deviation of chapter 6's initialization (lengthgen.model.transformer.gpt2_init)
STANDARD_BASE = 10_000.0
LEARNED_ACCURACY = 0.99  # in-range accuracy at T a network must reach before its extrapolation is judged
# every seed chapter 6 trains at its defaults or reserves for its held-out sweep (the seed ledger's)
CHAPTER6_SEEDS = every_seed("06_transfer")
INIT_HELD_OUT_SEEDS = seeds("13_initialization", "held_out")  # this chapter's committed sweep draws here, reserved before it ran
HELD_OUT_CHECKS = ("wide_init_helps", "fix_helps_gpt2", "collapse_predicted", "unseen_share_wide_lower")
# The control for the Adam reading: the GPT-2 initialization trained at learning rate lr / s (base 10^4, both head
# widths), so that Adam's steps are the same fraction of its weights as lr is of the 'all x s' weights. Its networks are
# kept out of every pool above; registered, with ADAM_CONTROL_CHECKS, before any of them was trained.
ADAM_CONTROL = "gpt2_lr"
ADAM_CONTROL_LABEL = "GPT-2, lr / s"
ADAM_CONTROL_CHECKS = ("adam_control_helps", "adam_control_share_lower")
PHASE_CHECKS = ("unseen_phase_lift_gpt2_higher",)  # judged on every held-out run by held_out_phases
# unseen_phase_lift_gpt2_higher's registered bar, kept after the check was made a report: held_out_phases and the
# held-out table judge every run against it
REGISTERED_PHASE_LIFT_SHARE = 0.8
PHASE_MIN_PAIRED = 0.8  # share of the GPT-2 base-10^4 networks that must pair with a learned 'all x s' one to judge it
ADAM_CONTROL_MIN_PAIRED = 0.8  # share of the control's networks that must be learned, with a learned GPT-2 twin, to judge
WIDE_INIT_BAR = 0.1  # the gain of "all x s" over GPT-2 that wide_init_helps requires; below it the Adam control is not judged


NETWORK_KEYS = ["init", "head_dim", "base_kind", "offset", "seed"]
