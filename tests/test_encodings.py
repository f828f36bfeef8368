import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lengthgen.model.encodings import (
    full_band_frequencies,
    offset_kernel_features,
    pair_permutation,
    rope_frequencies,
    rotate,
    rotation_matrix,
)

dims = st.sampled_from([2, 4, 8, 16])
conventions = st.sampled_from(["half", "interleaved"])
positions = st.integers(min_value=-5000, max_value=5000)
bases = st.floats(min_value=2.0, max_value=1e6)


def vec(dim: int, seed: int) -> torch.Tensor:
    return torch.randn(dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@settings(max_examples=60, deadline=None)
@given(dim=dims, conv=conventions, pos=positions, base=bases)
def test_rotation_is_orthogonal(dim, conv, pos, base):
    r = rotation_matrix(pos, rope_frequencies(dim, base), conv)
    assert torch.allclose(r.T @ r, torch.eye(dim, dtype=torch.float64), atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(dim=dims, conv=conventions, i=positions, j=positions, shift=positions, seed=st.integers(0, 10_000))
def test_logit_is_shift_invariant(dim, conv, i, j, shift, seed):
    freqs = rope_frequencies(dim)
    q, k = vec(dim, seed), vec(dim, seed + 1)

    def logit(a, b):
        return rotate(q, torch.tensor([a]), freqs, conv)[0] @ rotate(k, torch.tensor([b]), freqs, conv)[0]

    assert torch.isclose(logit(i + shift, j + shift), logit(i, j), atol=1e-9, rtol=0)


@settings(max_examples=60, deadline=None)
@given(dim=dims, pos=positions, seed=st.integers(0, 10_000))
def test_conventions_agree_under_pair_permutation(dim, pos, seed):
    freqs = rope_frequencies(dim)
    perm = pair_permutation(dim)
    x = vec(dim, seed)
    p = torch.tensor([pos])
    rotated_interleaved = rotate(x, p, freqs, "interleaved")[0]
    rotated_half = rotate(x[perm], p, freqs, "half")[0]
    assert torch.allclose(rotated_half, rotated_interleaved[perm], atol=1e-12)


def test_rotate_matches_rotation_matrix_and_batches():
    freqs = rope_frequencies(8)
    x = vec(8, 0)
    pos = torch.arange(5)
    batched = rotate(x, pos, freqs)
    for i in range(5):
        assert torch.allclose(batched[i], rotation_matrix(i, freqs) @ x, atol=1e-12)


def test_frequencies():
    f = rope_frequencies(8, 10_000.0)
    assert torch.allclose(f, torch.tensor([1.0, 0.1, 0.01, 0.001], dtype=torch.float64))
    assert torch.allclose(full_band_frequencies(8), torch.pi * f)


def test_offset_kernel_features_reproduce_logits():
    freqs = rope_frequencies(8)
    q, k = vec(8, 3), vec(8, 4)
    offsets = torch.arange(20)
    direct = torch.stack([q @ rotation_matrix(-d, freqs) @ k for d in offsets.tolist()])
    feats = offset_kernel_features(offsets, freqs)
    # f(D) = sum_m A_m cos + B_m sin: fit the 8 coefficients by least squares, must be exact.
    coef = torch.linalg.lstsq(feats, direct[:, None]).solution
    assert torch.allclose(feats @ coef[:, 0], direct, atol=1e-10)
