import math

import torch

from lengthgen.book.parallel import default_workers, map_runs, single_thread
from lengthgen.model.heads import HeadRunConfig
from lengthgen.model.training import train


def test_map_runs_keeps_order_in_processes():
    assert map_runs(math.sqrt, [1.0, 4.0, 9.0, 16.0], workers=2, progress=False) == [1.0, 2.0, 3.0, 4.0]


def test_results_do_not_depend_on_workers():
    configs = [HeadRunConfig(kind="rope", dim=8, vocab=4, steps=5, seed=s) for s in range(2)]
    serial = map_runs(train, configs, workers=1, progress=False)
    parallel = map_runs(train, configs, workers=2, progress=False)
    for a, b in zip(serial, parallel, strict=True):
        assert a.losses == b.losses
        assert torch.equal(a.model.q, b.model.q)


def test_single_thread_restores_setting():
    before = torch.get_num_threads()
    with single_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    assert default_workers(1) == 1
