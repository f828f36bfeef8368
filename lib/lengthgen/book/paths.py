"""Where things live in the repository, so notebooks and tools never hard-code paths."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT: Path = Path(__file__).resolve().parents[3]
BOOK_DIR: Path = REPO_ROOT / "book"
DATA_DIR: Path = REPO_ROOT / "data"
LIB_DIR: Path = REPO_ROOT / "lib"
BUILD_DIR: Path = REPO_ROOT / "_build"
RECORDS_DIR: Path = DATA_DIR / "records"  # the book build's chapter records (not committed)
SWEEPS_DIR: Path = DATA_DIR / "sweeps"  # committed sweeps, one folder each


def notebook_path(chapter: str, root: Path = REPO_ROOT) -> Path:
    """The notebook of a chapter, e.g. ``book/01_equivariance.ipynb``."""
    return root / "book" / f"{chapter}.ipynb"
