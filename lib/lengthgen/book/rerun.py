"""Rerun a chapter with other parameters: ``python -m lengthgen.book.rerun NOTEBOOK [-p NAME VALUE ...]``.

The chapter is executed with papermill (working directory ``book/``). The executed notebook,
its results record and the parameters land in ``data/runs/<chapter>-<key>/`` (not committed),
where ``key`` hashes the chapter's stable name, the full parameter set, the chapter's measurement
fingerprint (not its claims) and its notebook hash (:func:`run_key`).

papermill only warns about a parameter the notebook does not define. Here an unknown name,
or a value outside its range, stops with the chapter's own validation error before a kernel
is started; the chapter validates again when it runs. Values are read by
:func:`lengthgen.book.parameters.parse_value` (``1e-3`` is a float, ``010`` an error).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat

from . import fingerprint
from .harness import RECORDS_OPTION
from .parameters import ChapterParameters, ParameterError, parse_value, parse_yaml
from .paths import BOOK_DIR, DATA_DIR, notebook_path
from .records import plain, write_json_atomically


class _KnownInjection(logging.Filter):
    """papermill warns about any injected name the parameters cell lacks; ``_records_folder`` is meant to be one."""

    def filter(self, record: logging.LogRecord) -> bool:
        return RECORDS_OPTION not in record.getMessage()


logging.getLogger("papermill").addFilter(_KnownInjection())


def chapter_of(notebook: Path) -> str:
    """The chapter name (file stem) of a notebook, checked against the chapters that declare parameters."""
    from .parameters import parameters_of

    chapter = Path(notebook).stem
    try:
        parameters_of(chapter)
    except ValueError as err:
        raise ParameterError(f"{notebook} is not a parameterized chapter: {err}") from err
    return chapter


def default_parameters(notebook: Path) -> dict[str, Any]:
    """The literal assignments of the notebook's cell tagged ``parameters``."""
    nb = nbformat.read(notebook, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ValueError(f"{notebook} must have exactly one cell tagged 'parameters', found {len(cells)}")
    values = {}
    for node in ast.parse(cells[0].source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            raise ValueError(f"{notebook}: the parameters cell may only hold literal assignments")
        values[node.targets[0].id] = ast.literal_eval(node.value)
    return values


def checked_parameters(chapter: str, overrides: dict[str, Any]) -> ChapterParameters:
    """Defaults merged with ``overrides``, validated by the chapter's declaration (raises :class:`ParameterError`)."""
    from .parameters import parameters_of

    try:
        declaration = parameters_of(chapter)
    except ValueError as err:
        raise ParameterError(f"{chapter!r} is not a chapter of the book: {err}") from err
    unknown = sorted(set(overrides) - set(declaration.specs()))
    if unknown:
        raise ParameterError(f"unknown parameter(s) {unknown} for chapter {chapter!r}; "
                             f"valid parameters: {sorted(declaration.specs())}")
    return declaration.from_values({**default_parameters(notebook_path(chapter)), **overrides})


def run_key(chapter: str, parameters: ChapterParameters, code: str | None = None, notebook: str | None = None) -> str:
    """A short hash of what produces a run's measurements: the chapter's stable name (not its file number), its full
    parameters, its measurement fingerprint (not its claims) and its notebook hash (both computed unless given)."""
    text = json.dumps(dict(chapter=fingerprint.stable_name(chapter), parameters=plain(parameters.as_dict()),
                           code=code or fingerprint.measurement_fingerprint(chapter),
                           notebook=notebook or fingerprint.notebook_hash(notebook_path(chapter))), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def execute(chapter: str, overrides: dict[str, Any], out_dir: Path, progress: bool = False) -> Path:
    """Execute a chapter with papermill into ``out_dir`` (notebook and record); returns the record's path.

    The folder reaches the chapter as the injected ``_records_folder``, so concurrent runs in one
    process never share it. The record is written before the chapter asserts, so a run whose
    claims fail still leaves its record; a run that stops earlier leaves none, and the papermill
    error propagates.
    """
    import papermill

    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = out_dir / f".{chapter}.partial.ipynb"  # what a killed run leaves: never taken for an executed notebook
    try:
        papermill.execute_notebook(str(notebook_path(chapter)), str(partial),
                                   parameters={**overrides, RECORDS_OPTION: str(out_dir)}, cwd=str(BOOK_DIR),
                                   kernel_name="python3", progress_bar=progress, log_output=False)
    finally:
        if partial.exists():
            os.replace(partial, out_dir / f"{chapter}.ipynb")
    return out_dir / f"{chapter}.json"


def parse_overrides(pairs: list[list[str]], yaml_text: str | None) -> dict[str, Any]:
    """``-p NAME VALUE`` pairs and an optional YAML mapping, with the strict number rules."""
    overrides = {name: parse_value(name, value) for name, value in pairs}
    if yaml_text:
        extra = parse_yaml(yaml_text, where="-y")
        if not isinstance(extra, dict):
            raise ParameterError(f"-y must be a YAML mapping, got {yaml_text!r}")
        overrides.update(extra)
    return overrides


PARAMETER_FLAGS = ("-p", "--parameter")


def split_parameters(argv: list[str]) -> tuple[list[str], list[list[str]]]:
    """Take every ``-p NAME VALUE`` out of ``argv`` before argparse sees it, so that a VALUE may start with a minus
    sign (``-p lr -1e-3``), which argparse would read as an option; returns the rest and the pairs."""
    rest, pairs, i = [], [], 0
    while i < len(argv):
        if argv[i] in PARAMETER_FLAGS:
            if len(argv) - i < 3:
                raise ParameterError(f"{argv[i]} takes two values, NAME and VALUE (e.g. -p seeds 3); got "
                                     f"{argv[i + 1:] or 'none'}")
            pairs.append([argv[i + 1], argv[i + 2]])
            i += 3
        else:
            rest.append(argv[i])
            i += 1
    return rest, pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lengthgen.book.rerun", description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", type=Path, help="a chapter, e.g. book/04_dilution_law.ipynb")
    parser.add_argument(*PARAMETER_FLAGS, nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="one parameter; a negative value works as it is (-p lr -1e-3); repeat for more")
    parser.add_argument("-y", "--yaml", help="parameters as a YAML mapping, e.g. 'offsets: [7]'")
    parser.add_argument("--out", type=Path, help="output folder (default data/runs/<chapter>-<key>)")
    parser.add_argument("--describe", action="store_true", help="list the chapter's parameters and their ranges, run nothing")
    try:
        rest, pairs = split_parameters(list(sys.argv[1:] if argv is None else argv))
    except ParameterError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    args = parser.parse_args(rest)
    args.parameter = pairs
    try:
        chapter = chapter_of(args.notebook)
        if args.describe:
            from .parameters import parameters_of

            print(parameters_of(chapter).describe())
            return 0
        overrides = parse_overrides(args.parameter, args.yaml)
        parameters = checked_parameters(chapter, overrides)
    except ParameterError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    out_dir = (args.out or DATA_DIR / "runs" / f"{chapter}-{run_key(chapter, parameters)}").resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    with run_lock(out_dir) as held:
        if not held:
            print(f"error: {out_dir} is in use by another run of the same chapter and parameters (its lock is held); "
                  "wait for it, or give --out another folder", file=sys.stderr)
            return 3
        write_json_atomically(out_dir / "parameters.json",
                              dict(chapter=chapter, overrides=plain(overrides), parameters=plain(parameters.as_dict())))
        print(f"running {chapter} with {overrides or 'its defaults'} -> {out_dir}")
        try:
            record = execute(chapter, overrides, out_dir, progress=sys.stderr.isatty())
        except Exception as err:  # papermill's execution error carries the chapter's traceback
            print(f"error: the chapter stopped: {getattr(err, 'ename', type(err).__name__)}: "
                  f"{getattr(err, 'evalue', err)}", file=sys.stderr)
            return 1
    print(f"done: {record}")
    return 0


@contextlib.contextmanager
def run_lock(folder: Path) -> Iterator[bool]:
    """Hold ``folder/.lock`` for the duration (yields False at once if another process holds it): two reruns of the
    same chapter and parameters never share a folder. The operating system releases it when its holder dies."""
    with open(folder / ".lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


if __name__ == "__main__":
    sys.exit(main())
