"""Rerun a chapter with other parameters: ``python -m lengthgen.rerun NOTEBOOK [-p NAME VALUE ...]``.

The chapter is executed with papermill (working directory ``book/``). The executed notebook,
its results record and the parameters land in ``data/runs/<chapter>-<key>/`` (not committed),
where ``key`` hashes the chapter, the full parameter set and the library version.

papermill only warns about a parameter the notebook does not define. Here an unknown name,
or a value outside its range, stops with the chapter's own validation error before a kernel
is started; the chapter validates again when it runs.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import nbformat
import yaml

from . import __version__
from .params import CHAPTERS, ParameterError, validate
from .paths import BOOK_DIR, DATA_DIR
from .records import RECORDS_ENV, plain, write_json_atomically


def chapter_of(notebook: Path) -> str:
    """The chapter name (file stem) of a notebook, checked against the known chapters."""
    chapter = Path(notebook).stem
    if chapter not in CHAPTERS:
        raise ParameterError(f"{notebook} is not a parameterized chapter; known: {sorted(CHAPTERS)}")
    return chapter


def notebook_path(chapter: str) -> Path:
    return BOOK_DIR / f"{chapter}.ipynb"


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


def checked_parameters(chapter: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """Defaults merged with ``overrides``, validated by the chapter's rules (raises :class:`ParameterError`)."""
    unknown = sorted(set(overrides) - set(CHAPTERS[chapter]))
    if unknown:
        valid = sorted(CHAPTERS[chapter])
        raise ParameterError(f"unknown parameter(s) {unknown} for chapter {chapter!r}; valid parameters: {valid}")
    merged = {**default_parameters(notebook_path(chapter)), **overrides}
    return validate(chapter, merged)


def run_key(chapter: str, parameters: dict[str, Any]) -> str:
    """A short hash of chapter, full parameter set and library version."""
    text = json.dumps(dict(chapter=chapter, parameters=plain(parameters), version=__version__), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def execute(chapter: str, overrides: dict[str, Any], out_dir: Path, progress: bool = False) -> Path:
    """Execute a chapter with papermill into ``out_dir`` (notebook, record, parameters); returns the record path.

    The record is written by the chapter's claim-check cell before it asserts, so a run whose
    claims fail still leaves its record; a run that stops earlier leaves none, and the
    papermill error propagates.
    """
    import papermill

    out_dir.mkdir(parents=True, exist_ok=True)
    previous = os.environ.get(RECORDS_ENV)
    os.environ[RECORDS_ENV] = str(out_dir)
    try:
        papermill.execute_notebook(str(notebook_path(chapter)), str(out_dir / f"{chapter}.ipynb"), parameters=overrides,
                                   cwd=str(BOOK_DIR), kernel_name="python3", progress_bar=progress, log_output=False)
    finally:
        if previous is None:
            os.environ.pop(RECORDS_ENV, None)
        else:
            os.environ[RECORDS_ENV] = previous
    return out_dir / f"{chapter}.json"


def parse_overrides(pairs: list[list[str]], yaml_text: str | None) -> dict[str, Any]:
    """``-p NAME VALUE`` pairs (values parsed as YAML: ``7``, ``0.5``, ``[3, 5]``) and an optional YAML mapping."""
    overrides = {name: yaml.safe_load(value) for name, value in pairs}
    if yaml_text:
        extra = yaml.safe_load(yaml_text)
        if not isinstance(extra, dict):
            raise ParameterError(f"-y must be a YAML mapping, got {yaml_text!r}")
        overrides.update(extra)
    return overrides


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lengthgen.rerun", description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", type=Path, help="a chapter, e.g. book/04_dilution_law.ipynb")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    parser.add_argument("-y", "--yaml", help="parameters as a YAML mapping, e.g. 'offsets: [7]'")
    parser.add_argument("--out", type=Path, help="output folder (default data/runs/<chapter>-<key>)")
    args = parser.parse_args(argv)
    try:
        chapter = chapter_of(args.notebook)
        overrides = parse_overrides(args.parameter, args.yaml)
        parameters = checked_parameters(chapter, overrides)
    except ParameterError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    out_dir = args.out or DATA_DIR / "runs" / f"{chapter}-{run_key(chapter, parameters)}"
    write_json_atomically(out_dir.mkdir(parents=True, exist_ok=True) or out_dir / "parameters.json",
                          dict(chapter=chapter, overrides=plain(overrides), parameters=plain(parameters)))
    print(f"running {chapter} with {overrides or 'its defaults'} -> {out_dir}")
    try:
        record = execute(chapter, overrides, out_dir, progress=sys.stderr.isatty())
    except Exception as err:  # papermill's execution error carries the chapter's traceback
        print(f"error: the chapter stopped: {getattr(err, 'ename', type(err).__name__)}: {getattr(err, 'evalue', err)}",
              file=sys.stderr)
        return 1
    print(f"done: {record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
