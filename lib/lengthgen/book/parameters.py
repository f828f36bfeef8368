"""Typed chapter parameters: each chapter declares its parameters once, as a frozen dataclass.

A chapter's notebook has one papermill ``parameters`` cell of literal assignments; the cell
after it hands the notebook's names to the chapter's declaration (``Parameters`` in the
chapter's analysis module, a subclass of :class:`ChapterParameters`). Every field carries its
meaning and its valid range (:func:`parameter`); the class adds the rules that tie fields
together and a memory estimate. :meth:`ChapterParameters.from_values` stops before any work
with a :class:`ParameterError` naming the parameter, the rule and the valid range when a name
is unknown or missing, a value has the wrong type, is NaN or infinite, is out of range, breaks
a cross-field rule, or would need more memory than :data:`MEMORY_CEILING_GB`.

Values given on a command line (``-p NAME VALUE``) are read by :func:`parse_value`: YAML, but
``1e-3`` is a float (not the string YAML 1.1 makes of it) and ``010`` is an error, not the
octal 8.
"""

from __future__ import annotations

import importlib
import math
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Self

import yaml

MEMORY_CEILING_GB = 8.0  # what a chapter may ask of an ordinary laptop
DEVICE_PATTERN = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


class ParameterError(ValueError):
    """A chapter parameter is unknown, missing, of the wrong type, out of range or breaks a rule."""


def parameter(doc: str, low: float | None = None, high: float | None = None, choices: tuple | None = None) -> Any:
    """Declare one chapter parameter: what it means and its inclusive range or its choices."""
    return field(metadata=dict(doc=doc, low=low, high=high, choices=choices))


def _describe(kind: Any, meta: Mapping[str, Any]) -> str:
    if meta["choices"] is not None:
        return f"one of {list(meta['choices'])}"
    lo = "-inf" if meta["low"] is None else repr(meta["low"])
    hi = "inf" if meta["high"] is None else repr(meta["high"])
    if typing.get_origin(kind) is tuple:
        return f"a non-empty list of distinct {typing.get_args(kind)[0].__name__} in [{lo}, {hi}]"
    if kind is str:
        return "a string"
    return f"{kind.__name__} in [{lo}, {hi}]"


def _check_scalar(name: str, kind: type, meta: Mapping[str, Any], value: Any) -> Any:
    rule = _describe(kind, meta)
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value, ok = float(value), True
    if not ok:
        raise ParameterError(f"parameter {name!r} must be {rule}, got {value!r} ({type(value).__name__})")
    if kind is float and not math.isfinite(value):
        raise ParameterError(f"parameter {name!r} = {value!r} is not a finite number: must be {rule}")
    if meta["choices"] is not None and value not in meta["choices"]:
        raise ParameterError(f"parameter {name!r} must be {rule}, got {value!r}")
    if (meta["low"] is not None and value < meta["low"]) or (meta["high"] is not None and value > meta["high"]):
        raise ParameterError(f"parameter {name!r} = {value!r} is out of range: must be {rule}")
    return value


def _check(name: str, kind: Any, meta: Mapping[str, Any], value: Any) -> Any:
    if typing.get_origin(kind) is tuple:
        item = typing.get_args(kind)[0]
        if isinstance(value, (list, tuple)) and any(isinstance(v, (list, tuple, dict, set)) for v in value):
            raise ParameterError(f"parameter {name!r} must be {_describe(kind, meta)} (a flat list), got {value!r}")
        if not isinstance(value, (list, tuple)) or not value or len(set(value)) != len(value):
            raise ParameterError(f"parameter {name!r} must be {_describe(kind, meta)}, got {value!r}")
        return tuple(_check_scalar(f"{name}[{i}]", item, meta, v) for i, v in enumerate(value))
    return _check_scalar(name, kind, meta, value)


@dataclass(frozen=True)
class ChapterParameters:
    """Base of every chapter's parameter declaration. Subclasses are frozen dataclasses of :func:`parameter` fields."""

    chapter: ClassVar[str] = ""
    data_inputs: ClassVar[tuple[str, ...]] = ()  # repository folders whose files the chapter reads
    always_execute: ClassVar[bool] = False  # re-executed on every build (pages that summarize other chapters)

    @classmethod
    def specs(cls) -> dict[str, tuple[Any, Mapping[str, Any]]]:
        """``{name: (type, metadata)}`` of every parameter, in declaration order."""
        hints = typing.get_type_hints(cls)
        return {f.name: (hints[f.name], f.metadata) for f in fields(cls)}

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> Self:
        """Validate ``values`` (names to values) and return the typed parameters, or raise :class:`ParameterError`."""
        specs = cls.specs()
        unknown = sorted(set(values) - set(specs))
        if unknown:
            raise ParameterError(f"unknown parameter(s) {unknown} for chapter {cls.chapter!r}; valid parameters: {sorted(specs)}")
        missing = sorted(set(specs) - set(values))
        if missing:
            raise ParameterError(f"missing parameter(s) {missing} for chapter {cls.chapter!r}")
        params = cls(**{name: _check(name, kind, meta, values[name]) for name, (kind, meta) in specs.items()})
        try:
            params.check()
            measuring, training = params.memory_gb(), training_memory_gb(params)
        except ParameterError:
            raise
        except (TypeError, ValueError, ArithmeticError) as err:  # a rule that cannot even be evaluated on these values
            raise ParameterError(f"these parameters break a rule of chapter {cls.chapter!r}: {err}") from err
        budget, where = memory_budget_gb(getattr(params, "device", "cpu"))
        if max(measuring, training) > budget:
            rule = (f"training: {TRAINING_MEMORY_RULE}" if training >= measuring
                    else f"measuring: {params.memory_rule()}")
            raise ParameterError(f"these parameters need about {max(measuring, training):.1f} GB of memory ({rule}), "
                                 f"more than {where} of {budget:g} GB: make the lengths, batches or widths smaller")
        return params

    def check(self) -> None:
        """Cross-field rules; raise :class:`ParameterError` naming the parameter, the rule and the valid range."""
        device = getattr(self, "device", None)
        if device is not None and not DEVICE_PATTERN.match(device):
            raise ParameterError(f"parameter 'device' = {device!r} is not a device: must be 'auto', 'cpu', 'cuda' or 'cuda:N'")
        if device is not None and device.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                raise ParameterError(f"parameter 'device' = {device!r}: torch sees no CUDA device here; use 'auto' or 'cpu'")

    def memory_gb(self) -> float:
        """Estimated peak memory of the chapter in GB (0 when negligible)."""
        return 0.0

    def memory_rule(self) -> str:
        """How :meth:`memory_gb` is computed, in words, for the error message."""
        return "negligible"

    @classmethod
    def describe(cls) -> str:
        """A human-readable table of the parameters, their valid ranges and meanings."""
        return "\n".join(f"{name:>24}: {_describe(kind, meta):<40} {meta['doc']}" for name, (kind, meta) in cls.specs().items())

    def as_dict(self) -> dict[str, Any]:
        """Every parameter as plain Python values (lists for list parameters), for records and run keys."""
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}


GB = 1024**3
TRAINING_MEMORY_RULE = ("workers x (batch x training length x (layers x heads x length x 16 B of attention + "
                        "(vocab + 16 dim x layers) x 12 B of activations) + 16 B x weights for weights, gradients and "
                        "Adam's two moments)")


def training_memory_gb(params: Any) -> float:
    """Peak memory of one training step, for any chapter that trains (0 for one that does not): every layer's and
    head's attention over a training batch, the activations kept for the backward pass, and the weights with their
    gradients and Adam moments, in float32. The training length is ``train_length``, else the longest length."""
    batch = getattr(params, "batch", 0) or 0
    length = getattr(params, "train_length", 0) or getattr(params, "longest", 0) or 0
    if not (batch and length):
        return 0.0
    vocab, dim = getattr(params, "vocab", 0) or 0, getattr(params, "dim", 0) or 0
    layers = getattr(params, "layers", 1) or 1
    heads = max(getattr(params, "heads", 1) or 1, *(getattr(params, "head_counts", ()) or (1,)))
    activations = batch * length * (layers * heads * length * 16 + (vocab + 16 * dim * layers) * 12)
    weights = 16 * (2 * vocab * dim + 12 * layers * dim * dim)
    return (getattr(params, "workers", 1) or 1) * (activations + weights) / GB


def memory_budget_gb(device: str) -> tuple[float, str]:
    """What a chapter may use: the GPU's memory on CUDA, else :data:`MEMORY_CEILING_GB` (an ordinary laptop)."""
    if str(device).startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            index = int(device.split(":")[1]) if ":" in device else 0
            return torch.cuda.get_device_properties(index).total_memory / GB, f"the memory of GPU {index}"
    return MEMORY_CEILING_GB, "the laptop ceiling"


_IPYTHON_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open"}


def user_names(namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The names a notebook's cells defined: not private, not IPython's, not modules, functions or classes."""
    return {
        name: value
        for name, value in namespace.items()
        if not name.startswith("_")
        and name not in _IPYTHON_NAMES
        and not isinstance(value, (types.ModuleType, types.FunctionType, type))
    }


class _AliasRefused(yaml.YAMLError):
    """A YAML alias (``*name``): refused, so that no input can expand into an exponentially large value."""


class _StrictLoader(yaml.SafeLoader):
    """YAML 1.1 safe loading with YAML 1.2 floats (``1e-3``), no octal integers and no aliases."""

    def compose_node(self, parent: Any, index: Any) -> Any:  # noqa: ANN401 - PyYAML's own types
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _AliasRefused(f"YAML aliases (*{event.anchor}) are not accepted; write the value out")
        return super().compose_node(parent, index)


_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(\d[\d_]*)?\.?\d*[eE][-+]?\d+$|^[-+]?(\.\d+|\d[\d_]*\.\d*)([eE][-+]?\d+)?$"
               r"|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$"),
    list("-+0123456789."),
)
_LEADING_ZERO = re.compile(r"^[-+]?0[0-9_]+$")


def _no_leading_zeros(node: Any, where: str) -> None:
    if isinstance(node, yaml.ScalarNode) and node.style is None and _LEADING_ZERO.match(node.value):
        raise ParameterError(f"{where}: {node.value!r} has a leading zero; write the integer without it "
                             "(YAML would read it as octal)")
    for child in getattr(node, "value", []) if isinstance(node, (yaml.SequenceNode, yaml.MappingNode)) else []:
        for sub in child if isinstance(child, tuple) else (child,):
            _no_leading_zeros(sub, where)


MAX_YAML_CHARACTERS = 100_000  # a spec or a value is a few lines; anything longer is a mistake


def parse_yaml(text: str, where: str = "value") -> Any:
    """YAML text to Python, with the strict number rules above; any parse error, alias or tag outside YAML's safe
    schema (``!!python/...``) is a :class:`ParameterError` of one line naming ``where``."""
    if len(text) > MAX_YAML_CHARACTERS:
        raise ParameterError(f"{where}: {len(text)} characters of YAML, more than the {MAX_YAML_CHARACTERS} accepted")
    try:
        node = yaml.compose(text, Loader=_StrictLoader)
        if node is None:
            return None
        _no_leading_zeros(node, where)
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        mark = getattr(err, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise ParameterError(f"{where}: not valid YAML{at}: {problem}") from err


def parse_value(name: str, text: str) -> Any:
    """The value of ``-p NAME VALUE``: ``7``, ``0.5``, ``1e-3``, ``[3, 5]``, ``cpu`` (a leading zero is an error)."""
    return parse_yaml(text, where=f"parameter {name!r}")


# -- finding a chapter's module and parameters by its name ---------------------------------------------------------

def module_of(chapter: str) -> types.ModuleType:
    """The analysis module of a chapter: ``"06_transfer"`` -> :mod:`lengthgen.chapters.transfer`."""
    number, _, slug = chapter.partition("_")
    if not (number.isdigit() and slug):
        raise ValueError(f"{chapter!r} is not a chapter name of the form NN_slug")
    name = f"lengthgen.chapters.{slug}"
    try:
        return importlib.import_module(name)  # by name: the book machinery imports no chapter
    except ModuleNotFoundError as err:
        if err.name != name:
            raise
        raise ValueError(f"chapter {chapter!r} has no analysis module {name}") from err


def parameters_of(chapter: str) -> type:
    """The chapter's ``Parameters`` declaration."""
    parameters = module_of(chapter).Parameters
    if parameters.chapter != chapter:
        raise ValueError(f"lengthgen.chapters.{chapter.partition('_')[2]}.Parameters declares chapter "
                         f"{parameters.chapter!r}, not {chapter!r}")
    return parameters
