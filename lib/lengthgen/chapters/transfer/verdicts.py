"""Chapter 6's claim values: every registered check and reported number, from the study and the page's summaries."""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import Parameters, TransferStudy, turning_planes
from .carrier_test import fisher_pooled
from .masking import collapse_table, masking_values, masking_verdicts
from .registered import IDENTIFIABLE, TURNING_ONLY

CARRIER_CHECKS = ("carrier_test_size", "carrier_test_power", "carrier_pooled", "carrier_power_half",
                  "carrier_beats_q95", "carrier_heads", "carrier_networks", "carrier_untested", "carrier_fit_r2_min",
                  "carrier_share_standard", "carrier_share_identifiable")
MASKING = ("masking_restores", "predicted_mask_restores", "masking_beats_control", "masking_beats_runners_up",
           "complement_restored", "all_far_restored")
HELD_OUT = ("held_out_complete", "held_out_masking", "held_out_other_failures", "held_out_carrier",
            "held_out_carrier_identifiable")


def rotary_labels(p: Parameters) -> list[str]:
    """The rotary networks the claims pool: every RoPE variant but the turning-planes ablation."""
    return ["RoPE", IDENTIFIABLE, f"RoPE, {p.compare_heads} heads"]


def claim_values(study: TransferStudy, p: Parameters, carrier: dict[str, float], control: pd.DataFrame,
                 held_values: dict[str, float]) -> dict[str, object]:
    """Every claim's value from the study, the carrier summary's values, chapter 3's single heads (``control``) and
    the committed sweep's held-out values."""
    T, acc, runs, heads = p.train_length, study.accuracy, study.runs, study.heads
    shift = acc[acc.task == "shift"]

    def at(label: str, length: int) -> pd.Series:
        sub = shift[(shift.label == label) & (shift.length == length) & (shift.metric == "out_of_range")]
        return sub.set_index(["offset", "seed"]).accuracy

    in_range = shift[(shift.metric == "in_range") & (shift.length == T)].groupby("label").accuracy.min()
    ape_runs = runs[(runs.label == "APE") & (runs.task == "shift")]
    equivariant = runs[(runs.task == "shift") & (runs.label != "APE")]
    rotary = rotary_labels(p)
    pooled = heads[heads.label.isin(rotary)]
    expected = {(label, target, seed) for label in rotary for target in p.offsets for seed in p.seed_list}
    with_heads = set(heads.groupby(["label", "offset", "seed"]).size().index)
    collapse = collapse_table(heads[heads.label != TURNING_ONLY], acc)
    judged = masking_verdicts(study.masking, p.mask_batch)
    turning_gain = at(TURNING_ONLY, 2 * T) - at("RoPE", 2 * T)  # paired by (offset, seed)
    turning_hijack = heads[heads.label == TURNING_ONLY].first_hijack
    turning_hijack = turning_hijack.where(turning_hijack >= 0, np.inf).min()
    return dict(
        rope_minus_ape_2T=at("RoPE", 2 * T).min() - at("APE", 2 * T).max(),
        ape_rows_untouched=int((~ape_runs.ape_rows_untouched.astype(bool)).sum()),
        ape_out_of_range=shift[(shift.label == "APE") & (shift.metric == "out_of_range")].accuracy.max() - 1 / p.vocab,
        shift_f64=equivariant.shift_f64.max(), shift_f32=equivariant.shift_f32.max(),
        ape_shift_f64=ape_runs.shift_f64.min(), runs_without_retrieval_head=len(expected - with_heads),
        kernel_peak_misses=int((pooled.kernel_argmax != pooled.offset).sum()),
        unexplained_collapses=int((~collapse.explained).sum()),
        **{name: value for name, value in masking_values(judged).items() if name in MASKING},
        **{name: held_values[name] for name in HELD_OUT},
        fix_margin_2T=at(IDENTIFIABLE, 2 * T).min() - at("RoPE", 2 * T).max(),
        fix_margin_4T=at(IDENTIFIABLE, 4 * T).min() - at("RoPE", 4 * T).max(),
        turning_only_learned=in_range[TURNING_ONLY] - in_range["RoPE"],
        turning_only_2T=turning_gain.mean(), turning_only_per_seed=int((turning_gain <= 0).sum()),
        turning_only_4T_gain=at(TURNING_ONLY, 4 * T).mean() - at("RoPE", 4 * T).mean(),
        turning_planes=turning_planes(p),
        turning_only_first_hijack=-1 if np.isinf(turning_hijack) else int(turning_hijack),
        masked_networks=len(judged),
        **{name: carrier[name] for name in CARRIER_CHECKS},
        single_head_carrier=fisher_pooled(control.carrier_p.to_numpy()),
        heads_clearing_null=int((heads.coherence > heads.null_q999).sum()),
        rope_out_of_range_16T=at("RoPE", p.longest).mean(), fixed_out_of_range_16T=at(IDENTIFIABLE, p.longest).mean())
