"""Validation of a chapter's parameters.

Each chapter has one papermill ``parameters`` cell of literal assignments. The
cell after it calls :func:`validate` with the notebook's globals: an unknown
name, a missing name, a value of the wrong type or out of its range stops the
chapter with an error that names the parameter and the valid range.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class ParameterError(ValueError):
    """A chapter parameter is unknown, missing, of the wrong type or out of range."""


@dataclass(frozen=True)
class Param:
    """One parameter: its type, its inclusive range or choices, and what it means."""

    kind: type
    doc: str
    low: float | None = None
    high: float | None = None
    choices: tuple | None = None
    item: type | None = None  # for kind=list: the type of every element (the range applies per element)

    def describe(self) -> str:
        if self.choices is not None:
            return f"one of {list(self.choices)}"
        lo = "-inf" if self.low is None else repr(self.low)
        hi = "inf" if self.high is None else repr(self.high)
        if self.kind is list:
            return f"a non-empty list of distinct {self.item.__name__} in [{lo}, {hi}]"
        if self.kind is str:
            return "a string"
        return f"{self.kind.__name__} in [{lo}, {hi}]"

    def check(self, name: str, value: Any) -> Any:
        if self.kind is list:
            return self._check_list(name, value)
        ok_type = isinstance(value, self.kind) and not (self.kind is not bool and isinstance(value, bool))
        if self.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value, ok_type = float(value), True
        if not ok_type:
            raise ParameterError(f"parameter {name!r} must be {self.describe()}, got {value!r} ({type(value).__name__})")
        if self.choices is not None and value not in self.choices:
            raise ParameterError(f"parameter {name!r} must be {self.describe()}, got {value!r}")
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise ParameterError(f"parameter {name!r} = {value!r} is out of range: must be {self.describe()}")
        return value

    def _check_list(self, name: str, value: Any) -> list:
        if isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, list) or not value or len(set(value)) != len(value):
            raise ParameterError(f"parameter {name!r} must be {self.describe()}, got {value!r}")
        element = Param(self.item, self.doc, self.low, self.high)
        return [element.check(f"{name}[{i}]", v) for i, v in enumerate(value)]


# Parameters shared by the single-head chapters.
SINGLE_HEAD: dict[str, Param] = {
    "seeds": Param(int, "number of independent seeds (0 .. seeds-1)", 1, 100),
    "dim": Param(int, "head dimension d (even)", 4, 512),
    "vocab": Param(int, "vocabulary size V", 2, 4096),
    "train_length": Param(int, "training sequence length T", 4, 1024),
    "offset": Param(int, "target offset k (1 <= k < train_length)", 1, 1023),
    "steps": Param(int, "Adam steps per run", 1, 100_000),
    "batch": Param(int, "training sequences per step", 1, 4096),
    "lr": Param(float, "Adam learning rate", 1e-6, 1.0),
    "length_factor": Param(int, "longest evaluated length, in multiples of T", 1, 1024),
    "eval_batch": Param(int, "evaluation sequences per length", 1, 65_536),
}

Rule = Callable[[dict], str | None]


def _offset_below_train_length(p: dict) -> str | None:
    if "train_length" not in p:
        return None
    valid = f"[1, train_length - 1] = [1, {p['train_length'] - 1}]"
    if "offset" in p and not p["offset"] < p["train_length"]:
        return f"parameter 'offset' = {p['offset']} is out of range: must be in {valid}"
    for k in p.get("offsets", []):
        if not k < p["train_length"]:
            return f"parameter 'offsets' contains {k}, out of range: every offset must be in {valid}"
    return None


def _dim_even(p: dict) -> str | None:
    if "dim" in p and p["dim"] % 2:
        return f"parameter 'dim' = {p['dim']} is out of range: must be even (rotary planes pair coordinates)"
    return None


DEFAULT_RULES: tuple[Rule, ...] = (_offset_below_train_length, _dim_even)

CHAPTERS: dict[str, dict[str, Param]] = {
    "01_equivariance": {
        **SINGLE_HEAD,
        "rope_base": Param(float, "RoPE base b of the frequencies b^(-2m/d)", 2.0, 1e9),
        "rope_convention": Param(str, "how coordinates pair into rotary planes", choices=("half", "interleaved")),
    },
    "02_absolute_pinning": {
        **SINGLE_HEAD,
        "ablation_table_init_std": Param(float, "APE table init std of the ablation", 1e-4, 10.0),
    },
    "03_carrier": {
        **{name: SINGLE_HEAD[name] for name in ("seeds", "dim", "vocab", "train_length", "steps", "batch", "lr")},
        "offsets": Param(list, "target offsets k, one set of seeds each (1 <= k < train_length)", 1, 1023, item=int),
        "rope_base": Param(float, "RoPE base b of the frequencies b^(-2m/d)", 2.0, 1e9),
        "min_turn": Param(float, "radians a plane must turn across the training range to count as identifiable", 0.0, 1e3),
        "null_draws": Param(int, "random-phase kernels drawn for the null distribution", 100, 1_000_000),
        "energy": Param(float, "share of squared singular values that defines the effective rank", 0.5, 0.999999),
        "workers": Param(int, "worker processes (one torch thread each); results do not depend on it", 1, 256),
    },
    "04_dilution_law": {
        **{name: SINGLE_HEAD[name] for name in ("seeds", "dim", "vocab", "train_length", "steps", "batch", "lr")},
        "offsets": Param(list, "target offsets k, one set of seeds each (1 <= k < train_length)", 1, 1023, item=int),
        "length_factor": Param(int, "longest evaluated length, in multiples of T", 1, 65_536),
        "eval_batch": Param(int, "sampled sequences per length for the observed accuracy", 1, 65_536),
        "mc_samples": Param(int, "Monte Carlo token draws per length for the predicted accuracy", 1, 10_000_000),
        "exact_offsets": Param(int, "nearest offsets the Monte Carlo draws token by token", 1, 1_000_000),
        "turns": Param(float, "full turns over the far offsets after which a plane counts as equidistributed", 0.0, 1e6),
        "non_saturated": Param(float, "points with observed or predicted accuracy below this are scored", 0.5, 1.0),
        "workers": Param(int, "worker processes (one torch thread each); results do not depend on it", 1, 256),
    },
    "06_transformer": {
        "seeds": SINGLE_HEAD["seeds"],
        "vocab": SINGLE_HEAD["vocab"],
        "dim": Param(int, "model width d (divisible by heads, even head size)", 8, 1024),
        "layers": Param(int, "transformer blocks", 1, 24),
        "heads": Param(int, "attention heads per block", 1, 64),
        "offset": SINGLE_HEAD["offset"],
        "train_length": SINGLE_HEAD["train_length"],
        "steps": Param(int, "Adam steps per shift run", 1, 100_000),
        "batch": SINGLE_HEAD["batch"],
        "lr": SINGLE_HEAD["lr"],
        "length_factor": Param(int, "longest evaluated length, in multiples of T", 1, 64),
        "eval_batch": Param(int, "evaluation sequences per length", 1, 4096),
        "kernel_batch": Param(int, "sequences for the kernels and the per-head target mass", 1, 256),
        "retrieval_mass": Param(float, "in-range mass on offset k that marks a retrieval head", 0.0, 1.0),
        "null_draws": Param(int, "random-phase kernels drawn for the coherence null", 100, 1_000_000),
        "compare_heads": Param(int, "heads of the second RoPE variant (more rotary planes per head)", 1, 64),
        "fixed_turns": Param(float, "full turns of the slowest plane within T, identifiable-base variant", 0.1, 100.0),
        "copy_seeds": Param(int, "seeds per encoding on the copy task", 1, 100),
        "copy_steps": Param(int, "Adam steps per copy run", 1, 100_000),
        "workers": Param(int, "worker processes (one torch thread each); results do not depend on it", 1, 256),
    },
    "07_robustness": {
        "sweep_name": Param(str, "folder under data/sweeps/ holding spec.yaml and results.csv"),
    },
    "08_claims_summary": {
        "records_folder": Param(str, "folder of results records ('' = data/records or $LENGTHGEN_RECORDS)"),
    },
    "05_linear_control": {
        "seeds": SINGLE_HEAD["seeds"],
        "dim": SINGLE_HEAD["dim"],
        "vocab": SINGLE_HEAD["vocab"],
        "train_length": SINGLE_HEAD["train_length"],
        "offset": SINGLE_HEAD["offset"],
        "length_factor": SINGLE_HEAD["length_factor"],
        "eval_batch": SINGLE_HEAD["eval_batch"],
        "full_band_base": Param(float, "base b of the well-conditioned set pi * b^(-2m/d)", 2.0, 1e9),
        "rope_base": Param(float, "base of the standard RoPE frequencies b^(-2m/d)", 2.0, 1e9),
        "gd_steps": Param(int, "full-batch gradient-descent steps", 1, 10_000_000),
        "sgd_steps": Param(int, "SGD / Adam steps on sampled tokens", 1, 1_000_000),
        "sgd_batch": Param(int, "sequences per SGD step", 1, 4096),
        "adam_lr": Param(float, "Adam learning rate of the ablation", 1e-6, 1.0),
        "softmax_steps": Param(int, "Adam steps of the softmax comparison head", 1, 100_000),
    },
}

_IPYTHON_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open"}


def user_names(namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The names a notebook's cells defined: not private, not IPython's, not modules or functions."""
    return {
        name: value
        for name, value in namespace.items()
        if not name.startswith("_")
        and name not in _IPYTHON_NAMES
        and not isinstance(value, (types.ModuleType, types.FunctionType, type))
    }


def validate(chapter: str, namespace: Mapping[str, Any], rules: tuple[Rule, ...] = DEFAULT_RULES) -> dict[str, Any]:
    """Check a chapter's parameters and return them as a dict; raise :class:`ParameterError` otherwise."""
    if chapter not in CHAPTERS:
        raise ParameterError(f"unknown chapter {chapter!r}; known: {sorted(CHAPTERS)}")
    spec = CHAPTERS[chapter]
    given = user_names(namespace)
    unknown = sorted(set(given) - set(spec))
    if unknown:
        raise ParameterError(f"unknown parameter(s) {unknown} for chapter {chapter!r}; valid parameters: {sorted(spec)}")
    missing = sorted(set(spec) - set(given))
    if missing:
        raise ParameterError(f"missing parameter(s) {missing} for chapter {chapter!r}")
    params = {name: spec[name].check(name, given[name]) for name in spec}
    for rule in rules:
        message = rule(params)
        if message:
            raise ParameterError(message)
    return params


def describe(chapter: str) -> str:
    """A human-readable table of a chapter's parameters and their valid ranges."""
    return "\n".join(f"{name:>24}: {p.describe():<36} {p.doc}" for name, p in CHAPTERS[chapter].items())
