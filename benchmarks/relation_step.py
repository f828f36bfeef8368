"""Where chapter 12's training time goes: the relation network's step at the chapter's defaults, per scheme (and FIRE).

Usage (one torch thread, as the chapter's workers run)::

    python benchmarks/relation_step.py            # every scheme the page and the sweep train
    python benchmarks/relation_step.py --steps 50 --schemes rpe_scale_hint

For each scheme it trains the chapter's stack (its seeds together, as ``map_stacked`` does) on
reversal for ``--steps`` steps after a short warm-up, and prints the time per replica-step and the
share of the step spent in the operators that dominate it (``torch.profiler``): the attention's
batched products, and the gather of the relation tables and its backward (``index`` and
``index_put_``), whose cost grows with the number of relations a scheme offers.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

from lengthgen.book.paths import notebook_path
from lengthgen.book.rerun import default_parameters
from lengthgen.chapters import sequential_complexity as chapter
from lengthgen.model.training import train_together

GROUPS = {"attention products (bmm)": ("aten::bmm",),
          "relation tables: gather": ("aten::index",),
          "relation tables: backward scatter": ("aten::_index_put_impl_",)}


def configs(scheme: str, steps: int) -> list:
    """The chapter's stack for one scheme on reversal (its default seeds), ``steps`` steps each."""
    values = default_parameters(notebook_path(chapter.Parameters.chapter))
    values.update(schemes=[scheme], tasks=["reversal"], steps=steps, device="cpu")
    return chapter.run_configs(chapter.Parameters.from_values(values))


def measure(scheme: str, steps: int) -> dict:
    """Milliseconds per replica-step and each group's share of the profiled CPU time."""
    train_together(configs(scheme, 5))  # warm-up: allocator, first-call overheads
    runs = configs(scheme, steps)
    start = time.perf_counter()
    train_together(runs)
    per_step = (time.perf_counter() - start) / (steps * len(runs)) * 1e3
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        train_together(configs(scheme, max(10, steps // 5)))
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    shares = {group: sum(e.self_cpu_time_total for e in events if e.key in keys) / total for group, keys in GROUPS.items()}
    return dict(scheme=scheme, replicas=len(runs), ms=per_step, **shares)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--schemes", nargs="+", default=[*chapter.SCHEMES, chapter.FIRE])
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [measure(scheme, args.steps) for scheme in args.schemes]
    print("| scheme | replicas | ms per replica-step | " + " | ".join(GROUPS) + " |")
    print("|---|---|---|" + "---|" * len(GROUPS))
    for row in rows:
        print(f"| {row['scheme']} | {row['replicas']} | {row['ms']:.1f} | "
              + " | ".join(f"{row[group]:.0%}" for group in GROUPS) + " |")


if __name__ == "__main__":
    main()
