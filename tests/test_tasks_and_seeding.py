import torch

from lengthgen.model.seeding import derive_seed, generator
from lengthgen.model.tasks import IGNORE, offset_targets, sample_tokens


def test_offset_targets():
    tokens = torch.tensor([[3, 1, 4, 1, 5, 9]])
    assert offset_targets(tokens, 2).tolist() == [[IGNORE, IGNORE, 3, 1, 4, 1]]


def test_tokens_in_vocabulary_and_seeded():
    a = sample_tokens(4, 100, 7, generator(1, "x"))
    b = sample_tokens(4, 100, 7, generator(1, "x"))
    assert torch.equal(a, b) and a.min() >= 0 and a.max() < 7


def test_streams_are_independent_and_stable():
    assert derive_seed(0, "init") != derive_seed(0, "train-data")
    assert derive_seed(3, "init") == derive_seed(3, "init")
    assert 0 <= derive_seed(5, "eval-64") < 2**63
