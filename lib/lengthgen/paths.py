"""Where things live in the repository, so notebooks never hard-code paths."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT: Path = Path(__file__).resolve().parents[2]
BOOK_DIR: Path = REPO_ROOT / "book"
DATA_DIR: Path = REPO_ROOT / "data"
LIB_DIR: Path = REPO_ROOT / "lib"
BUILD_DIR: Path = REPO_ROOT / "_build"


def data_path(name: str) -> Path:
    """Path of a result table under ``data/``, creating parent folders as needed."""
    path = DATA_DIR / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
