"""Typed chapter parameters: every bad value stops before any work, with a message naming the parameter and its rule."""

import math

import pytest

from lengthgen.book.parameters import (
    MEMORY_CEILING_GB,
    ParameterError,
    module_of,
    parameters_of,
    parse_value,
    parse_yaml,
    user_names,
)
from lengthgen.book.paths import notebook_path
from lengthgen.book.rerun import default_parameters


def defaults(chapter: str) -> dict:
    return default_parameters(notebook_path(chapter))


def check(chapter: str, **changes):
    return parameters_of(chapter).from_values({**defaults(chapter), **changes})


def test_defaults_pass_and_are_typed():
    p = check("01_equivariance")
    assert p.offsets == (5,) and p.longest == p.length_factor * p.train_length
    assert p.as_dict()["offsets"] == [5]


def test_unknown_name_is_named():
    with pytest.raises(ParameterError, match=r"unknown parameter\(s\) \['offsett'\].*valid parameters"):
        check("01_equivariance", offsett=3)


def test_missing_name():
    values = defaults("01_equivariance")
    del values["lr"]
    with pytest.raises(ParameterError, match="missing.*'lr'"):
        parameters_of("01_equivariance").from_values(values)


@pytest.mark.parametrize(
    "name, value, pattern",
    [
        ("vocab", 1, r"'vocab' = 1 is out of range: must be int in \[2, 4096\]"),
        ("steps", 0, r"'steps' = 0 is out of range"),
        ("steps", -5, r"'steps' = -5 is out of range"),
        ("offsets", [32], r"'offsets' contains 32, out of range: every offset must be in \[1, train_length - 1\] = \[1, 31\]"),
        ("offsets", [0], r"'offsets\[0\]' = 0 is out of range"),
        ("offsets", [], r"'offsets' must be a non-empty list of distinct int"),
        ("offsets", [3, 3], r"'offsets' must be a non-empty list of distinct int"),
        ("offsets", [3, 4.5], r"'offsets\[1\]' must be int"),
        ("offsets", 5, r"'offsets' must be a non-empty list"),
        ("dim", 63, r"'dim' = 63 is out of range: must be even"),
        ("lr", 0.0, r"'lr' = 0.0 is out of range"),
        ("lr", math.nan, r"'lr' = nan is not a finite number"),
        ("lr", math.inf, r"'lr' = inf is not a finite number"),
        ("seeds", 2.5, r"'seeds' must be int"),
        ("seeds", True, r"'seeds' must be int"),
        ("lr", "1e-3", r"'lr' must be float"),
        ("rope_convention", "neox", r"'rope_convention' must be one of \['half', 'interleaved'\]"),
        ("device", "gpu", r"'device' = 'gpu' is not a device"),
        ("length_factor", 1, r"'length_factor' = 1 is out of range"),
        ("length_factor", 1024, r"need about .* GB of memory .* more than the laptop ceiling"),
    ],
)
def test_bad_values_name_parameter_and_range(name, value, pattern):
    with pytest.raises(ParameterError, match=pattern):
        check("01_equivariance", **{name: value})


def test_int_accepted_for_float():
    assert check("01_equivariance", lr=1).lr == 1.0


@pytest.mark.parametrize(
    "chapter, changes, pattern",
    [
        ("06_transfer", dict(heads=3),
         r"'heads' = 3 must split dim = 64 into heads of even size >= 4: valid values are \[1, 2, 4, 8, 16\]"),
        ("06_transfer", dict(compare_heads=3), r"'compare_heads' = 3 must split dim = 64"),
        ("06_transfer", dict(fixed_turns=100.0), r"'fixed_turns' = 100.0 is out of range: .* must be in \[0.1, "),
        ("06_transfer", dict(length_factor=2), r"'length_factor' = 2 is out of range: must be a power of two >= 4"),
        ("06_transfer", dict(length_factor=1024, train_length=1024), r"need about \d+.* GB of memory"),
        ("05_linear_control", dict(length_factor=2), r"'length_factor' = 2 is out of range: must be a power of two >= 4"),
        ("05_linear_control", dict(length_factor=48), r"'length_factor' = 48 is out of range: must be a power of two >= 4"),
        (
            "02_absolute_pinning",
            dict(table_init_stds=[0.001, 1.0]),
            r"'table_init_stds' = \[0.001, 1.0\] must include the default",
        ),
        ("03_carrier", dict(energy=2.0), r"'energy' = 2.0 is out of range"),
        ("04_dilution_law", dict(mc_samples=10_000_000, exact_offsets=1_000_000), r"GB of memory"),
        ("07_robustness", dict(sweep_name="nope"), r"'sweep_name' = 'nope' names no committed sweep"),
    ],
)
def test_cross_field_rules_and_memory_ceiling(chapter, changes, pattern):
    with pytest.raises(ParameterError, match=pattern):
        check(chapter, **changes)


def test_memory_ceiling_is_generous_at_defaults():
    for chapter in ("01_equivariance", "02_absolute_pinning", "04_dilution_law", "05_linear_control", "06_transfer"):
        assert check(chapter).memory_gb() < MEMORY_CEILING_GB / 4, chapter


def test_command_line_values_are_strict():
    assert parse_value("lr", "1e-3") == 0.001 and isinstance(parse_value("lr", "1e-3"), float)
    assert parse_value("lr", "-2.5E+2") == -250.0
    assert parse_value("offsets", "[3, 5]") == [3, 5]
    assert parse_value("device", "cpu") == "cpu"
    assert parse_value("steps", "10") == 10
    with pytest.raises(ParameterError, match=r"parameter 'steps': '010' has a leading zero"):
        parse_value("steps", "010")
    with pytest.raises(ParameterError, match="leading zero"):
        parse_yaml("offsets: [3, 05]")


def test_user_names_ignores_ipython_private_and_modules():
    ns = {"In": [], "Out": {}, "_i1": "", "_records_folder": "/x", "math": math, "get_ipython": print, "seeds": 3}
    assert user_names(ns) == {"seeds": 3}


def test_every_chapter_declares_and_describes_its_parameters():
    with pytest.raises(ValueError, match="not a chapter name"):
        parameters_of("nope")
    with pytest.raises(ValueError, match="has no analysis module"):
        module_of("98_missing")
    for chapter in ("01_equivariance", "03_carrier", "06_transfer", "07_robustness", "99_claims_summary"):
        declaration = parameters_of(chapter)
        text = declaration.describe()
        assert all(name in text for name in declaration.specs())
