"""Rotary position encoding (RoPE) in both common conventions.

A ``d``-dimensional vector is split into ``d/2`` planes; plane ``m`` is rotated
by angle ``theta_m * position``. Two conventions pair coordinates differently:

* ``"half"`` (GPT-NeoX / Llama): plane ``m`` is coordinates ``(m, m + d/2)``;
* ``"interleaved"`` (GPT-J / RoFormer): plane ``m`` is coordinates ``(2m, 2m + 1)``.

Because each rotation is orthogonal and rotations about the same planes
commute, ``<R_t q, R_s k> = <q, R_{s-t} k>``: the attention logit depends on the
positions only through their offset. Chapter 1 is built on this identity.

Every function creates its tensors on the device of its inputs.
"""

from __future__ import annotations

from typing import Literal

import torch

Convention = Literal["half", "interleaved"]
CONVENTIONS: tuple[str, ...] = ("half", "interleaved")


def rope_frequencies(dim: int, base: float = 10_000.0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The standard RoPE frequencies ``theta_m = base ** (-2m / dim)``, ``m = 0 .. dim/2 - 1``."""
    if dim % 2:
        raise ValueError(f"dim must be even, got {dim}")
    return base ** (-torch.arange(0, dim, 2, dtype=dtype, device="cpu") / dim)


def full_band_frequencies(dim: int, base: float = 10_000.0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Frequencies ``theta_m = pi * base ** (-2m / dim)``: the standard set stretched to start at Nyquist."""
    return torch.pi * rope_frequencies(dim, base, dtype)


def identifiable_base(dim: int, train_length: int, turns: float = 1.0) -> float:
    """The largest base whose slowest plane still turns ``turns`` full circles within ``train_length``.

    With ``theta_min = base ** (-(dim - 2) / dim)`` the condition is ``theta_min * T >= 2 pi turns``:
    every plane then shows training every phase it will ever take, so no plane's phase is left
    unconstrained by the training data.
    """
    if dim < 4 or dim % 2:
        raise ValueError(f"dim must be even and >= 4, got {dim}")
    return (train_length / (2 * torch.pi * turns)) ** (dim / (dim - 2))


def plane_index(dim: int, convention: Convention, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Indices of the first and second coordinate of every plane, for the given convention."""
    half = dim // 2
    if convention == "half":
        return torch.arange(half, device=device), torch.arange(half, device=device) + half
    if convention == "interleaved":
        return torch.arange(0, dim, 2, device=device), torch.arange(1, dim, 2, device=device)
    raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")


def pair_permutation(dim: int) -> torch.Tensor:
    """The permutation ``perm`` with ``x_half = x_interleaved[perm]``: it maps one convention onto the other."""
    first, second = plane_index(dim, "interleaved")
    return torch.cat([first, second])


def turn(x1: torch.Tensor, x2: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
    """The one rotary rotation every model uses: each plane's coordinates ``(x1, x2)`` turned by its angle, given by its
    ``cos`` and ``sin``; the result is the planes' first coordinates, then their second, then ``rest`` unchanged."""
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos, *rest], dim=-1)


def rotate(x: torch.Tensor, positions: torch.Tensor, freqs: torch.Tensor, convention: Convention = "half") -> torch.Tensor:
    """Rotate ``x`` (``(..., dim)``, broadcast against ``positions``) by ``positions * freqs`` plane by plane.

    ``positions`` has shape ``(n,)`` and the result has shape ``(n, dim)`` when
    ``x`` is a single vector, or ``x.shape`` when ``x`` is ``(n, dim)``.
    """
    dim = x.shape[-1]
    first, second = plane_index(dim, convention, x.device)
    angles = positions.to(device=freqs.device, dtype=freqs.dtype)[:, None] * freqs[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    x1, x2 = x[..., first], x[..., second]
    rotated = turn(x1, x2, cos, sin)  # planes' first, then second coordinates
    return rotated[..., torch.argsort(torch.cat([first, second]))]  # back to the convention's coordinate order


def rotation_matrix(position: float, freqs: torch.Tensor, convention: Convention = "half") -> torch.Tensor:
    """The ``dim x dim`` orthogonal matrix ``R_position`` (for tests and small analyses)."""
    dim = 2 * freqs.shape[0]
    eye = torch.eye(dim, dtype=freqs.dtype, device=freqs.device)
    return rotate(eye, torch.full((dim,), float(position), dtype=freqs.dtype, device=freqs.device), freqs, convention).T


def offset_kernel_features(offsets: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """Features ``[cos(theta_m D), sin(theta_m D)]`` of each offset ``D``, shape ``(len(offsets), dim)``.

    For a rotary head the logit at offset ``D`` is linear in these features:
    ``f(D) = sum_m A_m cos(theta_m D) + B_m sin(theta_m D)``.
    """
    angles = offsets.to(device=freqs.device, dtype=freqs.dtype)[:, None] * freqs[None, :]
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=1)
