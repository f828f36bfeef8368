"""Independent runs in parallel worker processes, one torch thread each.

On a small CPU, many small training runs go faster as separate single-threaded
processes than as one process whose tiny matrix products are split over threads
(measured in ``benchmarks/README.md``). Every run is a pure function of its arguments and always
executes with one torch thread, so the results do not depend on ``workers``.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from typing import TypeVar

import torch
from tqdm import tqdm

Item = TypeVar("Item")
Result = TypeVar("Result")


@contextmanager
def single_thread() -> Iterator[None]:
    """Run the body with one torch thread, restoring the previous setting after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _init_worker() -> None:
    torch.set_num_threads(1)


def default_workers(n_items: int) -> int:
    """As many workers as CPU cores, but no more than there are items."""
    return max(1, min(n_items, os.cpu_count() or 1))


def map_runs(
    func: Callable[[Item], Result],
    items: Sequence[Item],
    workers: int | None = None,
    progress: bool = True,
    desc: str = "runs",
) -> list[Result]:
    """``[func(item) for item in items]``, in ``workers`` processes (``func`` must be importable).

    The order of the results is the order of ``items``. ``workers=1`` runs in this process.
    """
    workers = default_workers(len(items)) if workers is None else workers
    if workers <= 1 or len(items) <= 1:
        with single_thread():
            return [func(item) for item in tqdm(items, disable=not progress, desc=desc)]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker) as pool:
        futures = [pool.submit(func, item) for item in items]
        for _ in tqdm(as_completed(futures), total=len(futures), disable=not progress, desc=desc):
            pass
        return [future.result() for future in futures]
