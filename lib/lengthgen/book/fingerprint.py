"""What produced a result: fingerprints of the code, the notebook and the whole build.

* :func:`notebook_hash`: SHA-256 of a notebook's code cells (what the execution cache keys on).
* :func:`code_fingerprint`: SHA-256 of the pinned requirements, of every library module a
  chapter imports, directly or through other modules (its *import closure*), and of the data
  files it reads (``Parameters.data_inputs``). A module counts by its syntax tree without
  docstrings, so editing a comment or a docstring changes nothing. Records and sweep run keys carry it, the book
  cache re-executes a chapter when it changes, and the claims summary accepts a record only
  under the current one: a change to anything a chapter runs or reads makes its results stale,
  and a change elsewhere does not.
* :func:`build_fingerprint`: SHA-256 of the whole library, the pins, the book configuration and
  the committed sweeps; every record carries it as well, to tell builds apart.
* :func:`config_fingerprint`: the execution settings of the book configuration (the ``execute``
  section of ``_config.yml``); a change wipes the whole execution cache. Other configuration
  changes only make Sphinx read every page again.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

from .paths import REPO_ROOT, notebook_path

PINS = ("requirements.txt", "pyproject.toml")
BUILD_INPUTS = ("lib/**/*.py", *PINS, "_config.yml", "Makefile", "data/sweeps/**/*")
INJECTED_TAG = "injected-parameters"  # papermill's cell of overrides: a run's parameters, not its code


def _hash_files(root: Path, paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(b"\0")
        digest.update(code_text(path) if path.suffix == ".py" else path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def code_text(path: Path) -> bytes:
    """A Python module as its syntax tree without docstrings: what it does, not how it is commented."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree).encode()


def _files(root: Path, patterns: tuple[str, ...]) -> list[Path]:
    paths = {p for pattern in patterns for p in root.glob(pattern)
             if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith(".")}
    return sorted(paths)


def build_fingerprint(root: Path = REPO_ROOT) -> str:
    """SHA-256 over the library sources, the pins, the book configuration and the committed sweeps."""
    return _hash_files(root, _files(root, BUILD_INPUTS))


def config_fingerprint(root: Path = REPO_ROOT) -> str:
    """SHA-256 of the ``execute`` section of ``_config.yml``: how chapters are executed."""
    import yaml

    config = yaml.safe_load((root / "_config.yml").read_text()) or {}
    return hashlib.sha256(json.dumps(config.get("execute", {}), sort_keys=True).encode()).hexdigest()


def code_cells(notebook: Path) -> list[str]:
    """Sources of a notebook's code cells, without papermill's injected-parameters cell."""
    cells = json.loads(Path(notebook).read_text())["cells"]
    return ["".join(c["source"]) for c in cells
            if c["cell_type"] == "code" and INJECTED_TAG not in c.get("metadata", {}).get("tags", [])]


def notebook_hash(notebook: Path) -> str:
    """SHA-256 of a notebook's code cells, in order (markdown and outputs do not count)."""
    return hashlib.sha256(json.dumps(code_cells(notebook)).encode()).hexdigest()


def _module_file(name: str, lib: Path) -> Path | None:
    base = lib.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported(tree: ast.AST, package: str) -> set[str]:
    """Absolute names of the ``lengthgen`` modules (and would-be submodules) a syntax tree imports."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return {n for n in names if n == "lengthgen" or n.startswith("lengthgen.")}


def import_closure(sources: list[str], lib: Path) -> list[Path]:
    """Files of every ``lengthgen`` module the sources import, directly or transitively, packages included."""
    todo = [name for source in sources for name in _imported(ast.parse(source), "")]
    seen: dict[str, Path] = {}
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b first
            prefix = ".".join(parts[:i])
            if prefix in seen:
                continue
            path = _module_file(prefix, lib)
            if path is None:
                continue
            seen[prefix] = path
            package = prefix if path.name == "__init__.py" else prefix.rsplit(".", 1)[0]
            todo.extend(_imported(ast.parse(path.read_text()), package))
    return sorted(set(seen.values()))


def declaration(chapter: str) -> type:
    """The chapter's ``Parameters`` class, or the bare base for a notebook that is not a library chapter."""
    from ..chapters import parameters_of
    from .parameters import ChapterParameters

    try:
        return parameters_of(chapter)
    except ValueError:
        return ChapterParameters


def code_fingerprint(chapter: str, root: Path = REPO_ROOT) -> str:
    """SHA-256 of the pins, every library module the chapter's notebook imports, and the data files it reads."""
    modules = import_closure(code_cells(notebook_path(chapter, root)), root / "lib")
    data = _files(root, tuple(f"{folder}/**/*" for folder in declaration(chapter).data_inputs))
    return _hash_files(root, [root / p for p in PINS] + modules + data)
