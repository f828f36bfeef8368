"""Chapter 12's fixed settings: its tasks, floors, reserved seeds and the bars its checks count against."""

from ..seeds import seeds

FIRE = "fire"  # the published learned relative bias (Li et al. 2023), trained beside the schemes; not an SRC scheme
FIRST_SWEEP_TASKS = ("copy", "copy_repeat", "reversal", "reversal_repeat", "parity_cot", "mode", "parity")
INTERLEAVED = "parity_cot_interleaved"  # parity with the chain of thought between the bits, opened by the separator
ADDED_TASKS = (INTERLEAVED, "addition")  # trained from the second regeneration of the sweep on; own checks
TRAINED_TASKS = (*FIRST_SWEEP_TASKS, *ADDED_TASKS)
LEARNED_FLOOR = 0.99  # exact match at every evaluated training scale below which a run has not learned (the issue's)
GENERALIZES_FLOOR = 0.9  # lowest answer accuracy over scales N+1 .. 2N of a run that generalizes
SELECTING_SCHEMES = ("rpe_scale_hint", "lbpe")  # schemes whose bias chooses among several relations
# the seeds of the pilot runs that chose the recipe (table scale, L1, steps, learning rate)
PILOT_SEEDS = seeds("12_sequential_complexity", "pilot")
# the committed sweep's runs draw here, reserved before any of them ran
HELD_OUT_SEEDS = seeds("12_sequential_complexity", "held_out")
HELD_OUT_MINIMUM = {"hint": 8, "lbpe": 6}  # learned held-out runs (of 15 per scheme) each held-out share needs
REGISTERED_LBPE_SHARE = 0.75  # held_out_lbpe_selects_needed's threshold when it was registered (see its revision)
PAGE_MINIMUM = 2  # learned hint runs this page's checks need (of its seeds, 3 at the defaults)
SHARE_FLOOR = 0.5  # share of the tables' used mass the selected relation must hold to count as the selection
INTERLEAVED_MINIMUM = 4  # learned held-out interleaved-parity runs (of 9) in its invariant cells its share needs
TABLE_SCHEMES = ("rpe", "coupled", "rpe_scale_hint", "lbpe")  # schemes that can represent a read moving with n
PREFIX_TIE = 1e-4  # logits: float rounding, below which two outputs count as the same (the proof check's bar)
LOSS_EVERY = 25  # steps between the kept points of a training-loss curve
