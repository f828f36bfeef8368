"""Keeping the book's execution cache honest.

The notebook execution cache hashes only a notebook's code cells. A change in
``lib/`` or in the pinned requirements would otherwise leave stale results in
the book. Before each build, :func:`refresh` compares a fingerprint of those
files with the one stored beside the cache and wipes the cache and Sphinx's
environment when it differs. After a build, :func:`check_executed` fails when a
chapter has no successful cached execution: Sphinx does not re-read unchanged
files, so a chapter that failed once would otherwise pass silently on an
incremental rebuild.

Run as ``python -m lengthgen.bookcache refresh|check``.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import yaml

from .paths import REPO_ROOT

FINGERPRINTED = ("lib/**/*.py", "requirements.txt", "pyproject.toml", "_config.yml", "Makefile")
# Pages that summarize the other chapters' results records: re-executed on every build.
ALWAYS_EXECUTED = ("book/08_claims_summary.ipynb",)


def fingerprint(root: Path = REPO_ROOT) -> str:
    """SHA-256 over the library sources, the pins and the book configuration."""
    digest = hashlib.sha256()
    for pattern in FINGERPRINTED:
        for path in sorted(root.glob(pattern)):
            if "__pycache__" in path.parts:
                continue
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def refresh(root: Path = REPO_ROOT, build: Path | None = None) -> bool:
    """Wipe the execution cache and Sphinx environment if the fingerprint changed; True if wiped."""
    build = build or root / "_build"
    stamp = build / ".lengthgen-fingerprint"
    current = fingerprint(root)
    if stamp.exists() and stamp.read_text() == current:
        return False
    for stale in (build / ".jupyter_cache", build / ".doctrees", build / "html", build / "jupyter_execute"):
        shutil.rmtree(stale, ignore_errors=True)
    build.mkdir(parents=True, exist_ok=True)
    stamp.write_text(current)
    return True


def forget_summaries(root: Path = REPO_ROOT, build: Path | None = None) -> None:
    """Drop the cached execution of the summary pages and touch them, so every build re-executes them."""
    import nbformat
    from jupyter_cache import get_cache

    cache_dir = (build or root / "_build") / ".jupyter_cache"
    cache = get_cache(str(cache_dir)) if cache_dir.exists() else None
    for rel in ALWAYS_EXECUTED:
        path = root / rel
        if not path.exists():
            continue
        if cache is not None:
            try:
                cache.remove_cache_record(cache.match_cache_notebook(nbformat.read(path, as_version=4)).pk)
            except KeyError:
                pass
        path.touch()


def toc_notebooks(root: Path = REPO_ROOT) -> list[Path]:
    """The notebooks the table of contents lists."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "file" in node:
                files.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    return [root / f"{f}.ipynb" for f in files if (root / f"{f}.ipynb").exists()]


def unexecuted(root: Path = REPO_ROOT, build: Path | None = None) -> list[Path]:
    """Notebooks in the toc whose current code has no successful cached execution."""
    import nbformat
    from jupyter_cache import get_cache

    cache = get_cache(str((build or root / "_build") / ".jupyter_cache"))
    missing = []
    for path in toc_notebooks(root):
        try:
            cache.match_cache_notebook(nbformat.read(path, as_version=4))
        except KeyError:
            missing.append(path)
    return missing


def main(argv: list[str] | None = None) -> int:
    """Command line: ``refresh`` before a build, ``check`` after it."""
    command = (argv or sys.argv[1:] or ["check"])[0]
    if command == "refresh":
        print("book cache: wiped (library or pins changed)" if refresh() else "book cache: fresh")
        forget_summaries()
        return 0
    if command == "check":
        missing = unexecuted()
        for nb in missing:
            print(f"book cache: {nb.relative_to(REPO_ROOT)} has no successful execution (it failed, or never ran)")
        return 1 if missing else 0
    print(f"usage: python -m lengthgen.bookcache refresh|check (got {command!r})")
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
