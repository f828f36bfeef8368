"""Copy and reversal in chapter 6's decoder, read from chapter 11's committed sweep (not retrained)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ...analysis.held_out import committed_runs
from ...analysis.network_zoo import CHAPTER, PREDICTED_VERDICTS, NetworkZooStudy, cell_numbers, cell_table, zoo_study
from ...model.sequence_tasks import sequence_length
from .registered import (
    FULL_SEQUENCE_ENCODINGS,
    FULL_SEQUENCE_SWEEP,
)


@dataclass
class FullSequenceRuns:
    """Chapter 11's committed copy and reversal runs of this chapter's decoder, for this chapter's encodings."""

    study: NetworkZooStudy | None  # None when the sweep has no current run
    train_size: int  # chapter 11's largest training size N
    numbers: dict[str, str | int]  # what the prose quotes: the setting, counts, and per (task, encoding) cell
    table: pd.DataFrame  # chapter 11's cell table (registered and measured verdicts, means) of these runs


FULL_SEQUENCE_TASKS = ("copy", "reversal")


def full_sequence_runs() -> FullSequenceRuns:
    """Read :data:`FULL_SEQUENCE_SWEEP` for :data:`FULL_SEQUENCE_ENCODINGS` on copy and reversal: the runs, chapter 11's
    setting of them (its defaults under each run's overrides), the counts of runs, learned runs and generalizing runs,
    RoPE's runs that carry past N, and chapter 11's numbers and measured verdicts per cell ("not run" without runs)."""
    full = committed_runs(FULL_SEQUENCE_SWEEP, CHAPTER, zoo_study)
    train_size = full.setting("train_size") if full.records else 0
    swept = full.study.select(FULL_SEQUENCE_TASKS) if full.study is not None else None
    keys = ["full_N", "full_tokens", "full_steps", "full_batch", "full_lr", "full_seeds", "full_runs", "full_learned",
            "full_generalize", "z_rope_carries"]
    numbers: dict[str, str | int] = dict.fromkeys(keys, "not run")
    numbers |= {f"z_{task}_{encoding}_measured": "not run"
                for task in FULL_SEQUENCE_TASKS for encoding in FULL_SEQUENCE_ENCODINGS}
    numbers |= dict(full_present=full.expected - full.missing, full_expected=full.expected,
                    rope_copy_registered=PREDICTED_VERDICTS[("rope", "copy")][0])
    if swept is None:
        ours, table = None, pd.DataFrame()
    else:
        ours = NetworkZooStudy(*(df[df.encoding.isin(FULL_SEQUENCE_ENCODINGS)]
                                 for df in (swept.accuracy, swept.losses, swept.verdicts)))
        settings = [q for q in full.parameters if "shift" not in q["tasks"]]  # each run's parameters, from its record
        verdicts = ours.verdicts
        learned = verdicts[verdicts.learned]
        rope = verdicts[verdicts.encoding == "rope"]
        table = cell_table(verdicts)
        numbers |= dict(full_N=train_size, full_tokens=sequence_length("copy", train_size, 0),
                        full_seeds=f"{verdicts.seed.min()}-{verdicts.seed.max()}", full_runs=len(verdicts),
                        full_learned=len(learned), full_generalize=int((learned.measured == "generalizes").sum()),
                        z_rope_carries=f"{int(rope.carries.sum())} of {len(rope)}")
        numbers |= {f"full_{name}": ", ".join(str(v) for v in sorted({s[name] for s in settings}))
                    for name in ("steps", "batch", "lr")}
        numbers |= {f"z_{task}_{encoding}_measured": measured
                    for (task, encoding), measured in table.set_index(["task", "encoding"]).measured.items()}
    numbers |= {f"z_{name}": value for name, value in
                cell_numbers(ours, train_size, FULL_SEQUENCE_TASKS, FULL_SEQUENCE_ENCODINGS).items()}
    return FullSequenceRuns(ours, train_size, numbers, table)
