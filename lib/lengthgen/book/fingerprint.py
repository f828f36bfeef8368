"""What produced a result: fingerprints of the code, the notebook and the whole build.

* :func:`notebook_hash`: SHA-256 of a notebook's code cells (what the execution cache keys on).
* :func:`measurement_fingerprint`: what a run's key covers (:func:`lengthgen.book.rerun.run_key`):
  SHA-256 of the pinned requirements, of the model and analysis modules a chapter's notebook
  imports, directly or through other modules (its *import closure*, without the book machinery
  of ``lengthgen.book`` and the claims of ``lengthgen.claims``, which run, render and judge a
  measurement but do not make it), and of the data files it reads (``Parameters.data_inputs``).
  A module counts by its syntax tree without docstrings, so editing a comment or a docstring
  changes nothing. Editing a claim's statement, threshold or reason therefore never makes a
  committed run stale: readers judge stored values against the claims as they are now.
* :func:`code_fingerprint`: what a chapter *page's execution* depends on: the measurement
  fingerprint's inputs plus the book machinery the notebook imports, the committed sweep its page
  reads (:func:`read_sweep_files`), and how the claims of the chapter and of every chapter whose
  stored runs it judges (:func:`judged_chapters`) judge: roles, comparisons and thresholds (and the
  modules whose constants the thresholds are), not their wording (:func:`judgement_text`). The book
  cache re-executes a page when it changes, and the claims summary accepts a page's record only
  under the current one.
* :func:`prose_fingerprint`: the claims modules and registers a page renders; when only they
  change, the book cache has Sphinx read the page again over its cached execution.
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
NOT_MEASUREMENT = ("lengthgen.book", "lengthgen.claims")  # run, render and judge a measurement; outside run keys
MEASURING_MACHINERY = ("lengthgen.book.parallel",)  # ...except what sets how runs compute (processes, torch threads)
PACKAGE_DOOR = Path("lib/lengthgen/__init__.py")  # the module map and the version: nothing a measurement executes
INJECTED_TAG = "injected-parameters"  # papermill's cell of overrides: a run's parameters, not its code


def _hash_files(root: Path, paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(b"\0")
        digest.update(code_text(path) if path.suffix == ".py" else pin_text(path) if path.name == "pyproject.toml"
                      else path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def pin_text(path: Path) -> bytes:
    """``pyproject.toml`` without the package's own version line: its pins count, a version bump does not."""
    return b"".join(line for line in path.read_bytes().splitlines(keepends=True) if not line.startswith(b"version = "))


def code_text(path: Path) -> bytes:
    """A Python module as its syntax tree without docstrings: what it does, not how it is commented."""
    return ast.dump(_without_docstrings(ast.parse(path.read_text()))).encode()


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return tree


def code_text_source(path: Path) -> str:
    """A Python module's source without docstrings (what :func:`code_text` hashes), as source text."""
    return ast.unparse(_without_docstrings(ast.parse(path.read_text())))


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


def _excluded(name: str, exclude: tuple[str, ...]) -> bool:
    if exclude and name in MEASURING_MACHINERY:
        return False
    return any(name == package or name.startswith(f"{package}.") for package in exclude)


def import_closure(sources: list[str], lib: Path, exclude: tuple[str, ...] = ()) -> list[Path]:
    """Files of every ``lengthgen`` module the sources import, directly or transitively, packages included;
    modules under the packages named in ``exclude`` are neither counted nor followed."""
    todo = [name for source in sources for name in _imported(ast.parse(source), "")]
    seen: dict[str, Path] = {}
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b first
            prefix = ".".join(parts[:i])
            if prefix in seen or _excluded(prefix, exclude):
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
    from .parameters import ChapterParameters, parameters_of

    try:
        return parameters_of(chapter)
    except ValueError:
        return ChapterParameters


def stable_name(chapter: str) -> str:
    """A chapter's name without its file number (``"06_transfer"`` -> ``"transfer"``): renumbering a page stales nothing."""
    number, _, slug = chapter.partition("_")
    return slug if number.isdigit() and slug else chapter


def _data_files(chapter: str, root: Path) -> list[Path]:
    return _files(root, tuple(f"{folder}/**/*" for folder in declaration(chapter).data_inputs))


def measurement_fingerprint(chapter: str, root: Path = REPO_ROOT) -> str:
    """SHA-256 of what makes a chapter's measurements: the pins, the model and analysis modules its notebook imports
    (not the book machinery, not the claims) and the data files it reads."""
    modules = import_closure(code_cells(notebook_path(chapter, root)), root / "lib", exclude=NOT_MEASUREMENT)
    modules = [path for path in modules if path != root / PACKAGE_DOOR]  # a version bump stales no sweep
    return _hash_files(root, [root / p for p in PINS] + modules + _data_files(chapter, root))


def code_fingerprint(chapter: str, root: Path = REPO_ROOT) -> str:
    """SHA-256 of what a chapter page's execution depends on: the pins, every library module its notebook imports (book
    machinery included), the data and committed sweeps it reads, and how its claims judge (:func:`judgement_text`)."""
    from ..claims import claims_module

    modules = import_closure(code_cells(notebook_path(chapter, root)), root / "lib")
    judged = [chapter, *judged_chapters(chapter, root)]  # whose claims the page applies
    claims = [f"import {claims_module(name)}" for name in judged]
    wording = {root / "lib" / Path(*claims_module(name).split(".")).with_suffix(".py") for name in judged}
    constants = [p for p in import_closure(claims, root / "lib") if p not in wording and p not in modules]  # thresholds
    digest = _hash_files(root, [root / p for p in PINS] + modules + constants + _data_files(chapter, root)
                         + read_sweep_files(chapter, root))
    return hashlib.sha256(digest.encode() + judgement_text(judged, root)).hexdigest()


PROSE_ARGUMENTS = {"Claim": (1, 4), "reported": (1, 2)}  # positions of the statement and the reason
PROSE_KEYWORDS = ("statement", "reason", "threshold_text")


def judgement_text(chapters: list[str], root: Path = REPO_ROOT) -> bytes:
    """How the chapters' claims judge: their claims modules' syntax trees with every statement, reason and threshold
    text blanked (names, roles, comparisons, thresholds and the code computing them stay). Wording is prose
    (:func:`prose_fingerprint`)."""
    from ..claims import claims_module

    dumps = []
    for name in chapters:
        path = root / "lib" / Path(*claims_module(name).split(".")).with_suffix(".py")
        if not path.exists():
            continue
        tree = ast.parse(code_text_source(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PROSE_ARGUMENTS:
                for index in PROSE_ARGUMENTS[node.func.id]:
                    if index < len(node.args):
                        node.args[index] = ast.Constant("")
                for keyword in node.keywords:
                    if keyword.arg in PROSE_KEYWORDS:
                        keyword.value = ast.Constant("")
        dumps.append(f"{path.relative_to(root)}\0{ast.dump(tree)}")
    return "\0".join(dumps).encode()


def prose_fingerprint(chapter: str, root: Path = REPO_ROOT) -> str:
    """SHA-256 of the claims modules and registers a page renders (its own and those of the chapters it judges): when
    only this changes, the page is read again with its cached execution (the claim tables are rendered at build time)."""
    from ..claims import claims_module, register_path

    names = [chapter, *judged_chapters(chapter, root)]
    paths = [root / "lib" / Path(*claims_module(name).split(".")).with_suffix(".py") for name in names]
    paths += [root / register_path(name).relative_to(REPO_ROOT) for name in names]
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + (path.read_bytes() if path.exists() else b"-"))
    return digest.hexdigest()


def judged_chapters(chapter: str, root: Path = REPO_ROOT) -> list[str]:
    """The chapters whose stored runs a page judges: those of the committed sweeps it reads (its ``committed_sweep``,
    and every spec under its ``data_inputs``)."""
    import yaml

    specs = [p for p in read_sweep_files(chapter, root) if p.name == "spec.yaml"]
    specs += [p for p in _data_files(chapter, root) if p.name == "spec.yaml"]
    names: dict[str, None] = {}
    for spec in specs:
        try:
            names.update(dict.fromkeys((yaml.safe_load(spec.read_text()) or {}).get("chapters", {}) or {}))
        except yaml.YAMLError:
            continue  # the page itself refuses a broken spec, with its message
    return [name for name in names if name != chapter]


def read_sweep_files(chapter: str, root: Path = REPO_ROOT) -> list[Path]:
    """The files of the committed sweeps a chapter's page reads (its default ``committed_sweep`` and those its module
    names, :func:`swept_constants`): a missing, extra or edited run re-executes the page, which then judges (or
    refuses) what it finds."""
    from .rerun import default_parameters

    notebook = notebook_path(chapter, root)
    try:
        names = [default_parameters(notebook).get("committed_sweep", "") if notebook.exists() else ""]
    except ValueError:
        names = []
    names += swept_constants(chapter)
    return _files(root, tuple(f"data/sweeps/{name}/**/*" for name in dict.fromkeys(names) if isinstance(name, str) and name))


def swept_constants(chapter: str) -> list[str]:
    """The committed sweeps a chapter's analysis module (or any module of its package) names in a constant ending in
    ``_SWEEP`` (the convention for a sweep a page reads besides its own ``committed_sweep``, e.g. chapter 6 reading
    chapter 11's)."""
    import importlib
    import pkgutil

    from .parameters import module_of

    try:
        module = module_of(chapter)
    except ValueError:
        return []
    modules = [module] + [importlib.import_module(info.name)
                          for info in pkgutil.iter_modules(getattr(module, "__path__", []), f"{module.__name__}.")]
    return list(dict.fromkeys(value for m in modules for name, value in vars(m).items()
                              if name.endswith("_SWEEP") and isinstance(value, str) and value))
