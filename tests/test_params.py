import pytest

from lengthgen.params import CHAPTERS, ParameterError, describe, user_names, validate

DEFAULTS = dict(seeds=5, dim=64, vocab=64, train_length=32, offset=5, steps=1000, batch=64, lr=0.01,
                length_factor=16, eval_batch=256, rope_base=10000.0, rope_convention="half")


def test_defaults_pass():
    assert validate("01_equivariance", DEFAULTS)["offset"] == 5


def test_unknown_name_is_named():
    with pytest.raises(ParameterError, match=r"unknown parameter\(s\) \['offsett'\].*valid parameters"):
        validate("01_equivariance", {**DEFAULTS, "offsett": 3})


def test_missing_name():
    params = dict(DEFAULTS)
    del params["lr"]
    with pytest.raises(ParameterError, match="missing.*'lr'"):
        validate("01_equivariance", params)


@pytest.mark.parametrize(
    "name, value, pattern",
    [
        ("vocab", 1, r"'vocab' = 1 is out of range: must be int in \[2, 4096\]"),
        ("steps", 0, r"'steps' = 0 is out of range"),
        ("steps", -5, r"'steps' = -5 is out of range"),
        ("offset", 32, r"'offset' = 32 is out of range: must be in \[1, train_length - 1\] = \[1, 31\]"),
        ("offset", 0, r"'offset' = 0 is out of range"),
        ("dim", 63, r"'dim' = 63 is out of range: must be even"),
        ("lr", 0.0, r"'lr' = 0.0 is out of range"),
        ("seeds", 2.5, r"'seeds' must be int"),
        ("seeds", True, r"'seeds' must be int"),
        ("rope_convention", "neox", r"'rope_convention' must be one of \['half', 'interleaved'\]"),
    ],
)
def test_bad_values_name_parameter_and_range(name, value, pattern):
    with pytest.raises(ParameterError, match=pattern):
        validate("01_equivariance", {**DEFAULTS, name: value})


def test_int_accepted_for_float():
    assert validate("01_equivariance", {**DEFAULTS, "lr": 1})["lr"] == 1.0


def test_user_names_ignores_ipython_and_modules():
    import math

    ns = {"In": [], "Out": {}, "_i1": "", "math": math, "get_ipython": print, "seeds": 3}
    assert user_names(ns) == {"seeds": 3}


def test_unknown_chapter_and_describe():
    with pytest.raises(ParameterError, match="unknown chapter"):
        validate("99_nope", {})
    for chapter, spec in CHAPTERS.items():
        text = describe(chapter)
        assert all(name in text for name in spec)
    assert "a string" in describe("07_robustness")


CARRIER = dict(seeds=5, offsets=[3, 5, 9], dim=64, vocab=64, train_length=32, steps=1000, batch=64, lr=0.01,
               rope_base=10000.0, min_turn=1.0, null_draws=10000, energy=0.99, workers=2)


@pytest.mark.parametrize(
    "value, pattern",
    [
        ([3, 40], r"'offsets' contains 40, out of range: every offset must be in \[1, train_length - 1\] = \[1, 31\]"),
        ([], r"'offsets' must be a non-empty list of distinct int"),
        ([3, 3], r"'offsets' must be a non-empty list of distinct int"),
        ([3, 4.5], r"'offsets\[1\]' must be int"),
        ([0, 5], r"'offsets\[0\]' = 0 is out of range"),
        (5, r"'offsets' must be a non-empty list"),
    ],
)
def test_offset_lists_are_validated(value, pattern):
    with pytest.raises(ParameterError, match=pattern):
        validate("03_carrier", {**CARRIER, "offsets": value})
    assert validate("03_carrier", CARRIER)["offsets"] == [3, 5, 9]
