"""Throughput of independent training runs: one process with all threads vs worker processes with one thread each.

Usage: ``python benchmarks/parallel_throughput.py [runs]``. Prints seconds per strategy; the
results of the runs are identical either way (see ``tests/test_parallel.py``).
"""

from __future__ import annotations

import sys
import time

import torch

from lengthgen.book.parallel import map_runs
from lengthgen.model.training import train
from lengthgen.model.transformer import NetworkRunConfig, TransformerConfig


def main(runs: int = 4, steps: int = 200) -> None:
    configs = [NetworkRunConfig(model=TransformerConfig(), steps=steps, batch=16, seed=s) for s in range(runs)]
    start = time.perf_counter()
    for cfg in configs:  # one process, every core's threads
        train(cfg)
    threads = time.perf_counter() - start
    start = time.perf_counter()
    map_runs(train, configs, workers=torch.get_num_threads(), progress=False)
    processes = time.perf_counter() - start
    print(f"{runs} runs x {steps} steps: one process with {torch.get_num_threads()} threads {threads:.1f} s, "
          f"{torch.get_num_threads()} single-thread workers {processes:.1f} s, speed-up {threads / processes:.2f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
