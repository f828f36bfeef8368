"""Every input refused cleanly and fast: YAML, parameter values, spec shapes and command lines, each with a one-line
message naming what is wrong, never a traceback or a hang; property-based over random values and shapes."""

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lengthgen.book import rerun, sweep
from lengthgen.book.parameters import ParameterError, parameters_of, parse_yaml
from lengthgen.book.records import RecordFileError, load_record
from lengthgen.book.rerun import checked_parameters, split_parameters
from lengthgen.book.sweep import check_spec, expand, load_spec

CHAPTERS = sorted(p.stem for p in Path(__file__).parents[1].glob("book/[0-9][0-9]_*.ipynb"))


def alias_bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines)


def test_an_alias_bomb_is_refused_in_well_under_a_second(tmp_path):
    start = time.perf_counter()
    with pytest.raises(ParameterError, match="aliases"):
        parse_yaml(alias_bomb(), where="spec.yaml")
    spec = tmp_path / "spec.yaml"
    spec.write_text("chapters:\n  01_equivariance: {}\n" + alias_bomb())
    with pytest.raises(ParameterError, match="aliases"):
        load_spec(spec)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize("text, message", [
    ("a: [1, 2", "not valid YAML"),
    ("!!python/object/apply:os.system ['true']", "could not determine a constructor"),
    ("a: 010", "leading zero"),
    ("x" * 200_000, "characters of YAML"),
])
def test_bad_yaml_is_one_line_naming_where(text, message):
    with pytest.raises(ParameterError, match=message) as err:
        parse_yaml(text, where="-y")
    assert str(err.value).startswith("-y") and "\n" not in str(err.value)


@pytest.mark.parametrize("argv, message", [
    (["-p", "offsets", "[[1], [2]]"], "a flat list"),
    (["-y", "offsets: *a"], "not valid YAML"),
    (["-y", "{offsets: [3"], "not valid YAML"),
    (["-p", "steps"], "two values"),
    (["-p", "lr", "-1e-3"], "'lr' = -0.001 is out of range"),  # a negative value is read as a value, not an option
])
def test_the_rerun_command_refuses_with_one_line(argv, message, capsys):
    notebook = "book/03_carrier.ipynb" if "lr" in argv else "book/01_equivariance.ipynb"
    assert rerun.main([notebook, *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1


def test_negative_values_reach_the_parameters():
    rest, pairs = split_parameters(["book/x.ipynb", "-p", "lr", "-1e-3", "--describe", "--parameter", "seeds", "3"])
    assert rest == ["book/x.ipynb", "--describe"] and pairs == [["lr", "-1e-3"], ["seeds", "3"]]
    assert rerun.parse_overrides(pairs, None) == dict(lr=-0.001, seeds=3)


SPEC = {"name": "demo", "workers": 1, "chapters": {"01_equivariance": {"fixed": {"seeds": 1}, "grid": {"offsets": [[3]]}}}}


@pytest.mark.parametrize("change, message", [
    (lambda s: s.update(gird={}), r"unknown key\(s\) \['gird'\]"),
    (lambda s: s["chapters"]["01_equivariance"].update(gird={"offsets": [[3]]}), r"unknown key\(s\) \['gird'\]"),
    (lambda s: s["chapters"].update({"14_nowhere": {}}), "is not a chapter of the book"),
    (lambda s: s["chapters"]["01_equivariance"]["grid"].update(offsets=[]), "non-empty list"),
    (lambda s: s.update(workers=0), "'workers' must be an integer >= 1"),
    (lambda s: s.update(workers=True), "'workers' must be an integer >= 1"),
    (lambda s: s.update(chapters={}), "non-empty 'chapters'"),
    (lambda s: s["chapters"]["01_equivariance"].update(points=[{}]), "'points' must be a list"),
    (lambda s: s["chapters"]["01_equivariance"].update(fixed=[1]), "'fixed' must be a mapping"),
])
def test_a_spec_of_the_wrong_shape_is_refused(change, message):
    spec = {**SPEC, "chapters": {"01_equivariance": {"fixed": {"seeds": 1}, "grid": {"offsets": [[3]]}}}}
    change(spec)
    with pytest.raises(ParameterError, match=message):
        check_spec(spec, "spec.yaml")


@pytest.mark.parametrize("args", [["--max-runs", "-1"], ["--max-runs", "0"], ["--workers", "0"], ["--workers", "x"]])
def test_sweep_counts_must_be_positive(args, tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text("chapters:\n  01_equivariance: {fixed: {seeds: 1}}\n")
    with pytest.raises(SystemExit) as stop:
        sweep.main([str(spec), *args])
    assert stop.value.code == 2 and "must be an integer >= 1" in capsys.readouterr().err


def test_a_spec_error_in_the_sweep_command_is_one_line(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text("chapters:\n  01_equivariance: {gird: {offsets: [[3]]}}\n")
    assert sweep.main([str(spec), "--list"]) == 2
    err = capsys.readouterr().err
    assert "unknown key(s) ['gird']" in err and "Traceback" not in err


def test_a_broken_record_file_is_named(tmp_path):
    path = tmp_path / "run.json"
    path.write_text('{"chapter": ')
    with pytest.raises(RecordFileError, match="run.json"):
        load_record(path)
    path.write_text("[1, 2]")
    with pytest.raises(RecordFileError, match="not a results record"):
        load_record(path)


# -- property-based: any value, any shape, refused with a message or accepted, in seconds --------------------------

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                    st.text(max_size=8), st.sampled_from(["cpu", "cuda", "auto", "", "gpt2"]))
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=4), st.lists(st.lists(st.integers(0, 9), max_size=2), max_size=3),
                   st.dictionaries(st.text(max_size=4), SCALARS, max_size=2))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chapter=st.sampled_from(CHAPTERS), data=st.data())
def test_random_parameter_values_are_refused_with_a_message_or_accepted(chapter, data):
    names = sorted(parameters_of(chapter).specs())
    overrides = data.draw(st.dictionaries(st.sampled_from([*names, "bogus_name"]), VALUES, max_size=3))
    start = time.perf_counter()
    try:
        parameters = checked_parameters(chapter, overrides)
    except ParameterError as err:
        assert str(err) and "\n" not in str(err).strip()
    else:
        assert parameters.memory_gb() <= 8.0
    assert time.perf_counter() - start < 5.0


SHAPES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.one_of(SHAPES, st.fixed_dictionaries({"chapters": st.dictionaries(
    st.sampled_from([*CHAPTERS[:3], "nope"]), st.one_of(st.none(), st.dictionaries(
        st.sampled_from(["fixed", "grid", "points", "gird"]), SHAPES, max_size=3)), max_size=2)})))
def test_random_spec_shapes_are_refused_with_a_message_or_expanded(spec):
    start = time.perf_counter()
    try:
        check_spec(spec, "spec.yaml")
        runs = expand(spec)
    except ParameterError as err:
        assert str(err) and "\n" not in str(err).strip()
    else:
        assert all(run.key for run in runs)
    assert time.perf_counter() - start < 10.0


@pytest.mark.parametrize("chapter", ["01_equivariance", "06_transfer", "11_zoo_networks", "12_sequential_complexity"])
def test_the_memory_estimate_covers_training(chapter):
    """batch 4096 at length 1024 and vocabulary 4096 once passed these chapters' evaluation-only estimate and died
    allocating 64 GiB in training."""
    names = set(parameters_of(chapter).specs())
    overrides = {k: v for k, v in dict(batch=4096, train_length=1024, vocab=4096).items() if k in names}
    with pytest.raises(ParameterError, match="GB of memory .training"):
        checked_parameters(chapter, overrides)


def test_horizon_factor_one_is_refused_before_training():
    """It was inside the declared range and crashed after training (no length beyond T to search)."""
    with pytest.raises(ParameterError, match="'horizon_factor' = 1 is out of range"):
        checked_parameters("01_equivariance", dict(horizon_factor=1))


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@example(offset=7, base=123.0, convention="interleaved", horizon=2)  # one point that passes, so something runs
@given(offset=st.integers(-3, 40), base=st.floats(0.5, 1e10) | st.just(float("nan")), convention=st.text(max_size=12) |
       st.sampled_from(["half", "interleaved"]), horizon=st.integers(0, 64))
def test_drawn_values_that_pass_validation_also_run(tmp_path_factory, offset, base, convention, horizon):
    """A drawn point either stops at validation or runs to its record at tiny sizes: validation lets nothing through
    that then crashes."""
    overrides = dict(seeds=1, steps=20, length_factor=2, eval_batch=8, workers=1, device="cpu", offsets=[offset],
                     rope_base=base, rope_convention=convention, horizon_factor=horizon)
    try:
        checked_parameters("01_equivariance", overrides)
    except ParameterError:
        return
    out = tmp_path_factory.mktemp("drawn")
    try:
        record = rerun.execute("01_equivariance", overrides, out)
    except Exception as err:  # noqa: BLE001 - only a failed claim is an acceptable way for a valid point to end
        assert (out / "01_equivariance.json").exists(), f"{overrides} passed validation, then stopped: {err}"
        return
    assert record.exists()
