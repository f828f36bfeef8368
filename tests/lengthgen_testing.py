"""Helpers the test modules share (imported by name: pytest puts this folder on the path)."""

import shutil
from pathlib import Path

from lengthgen.book import fingerprint
from lengthgen.book.paths import REPO_ROOT


def copy_repository(tmp_path: Path) -> Path:
    """What the fingerprints read (library, notebooks, pins, committed sweeps) in a folder of its own."""
    root = tmp_path / "repo"
    for name in ("lib", "book", "data/sweeps"):
        shutil.copytree(REPO_ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    for name in fingerprint.PINS:
        shutil.copy(REPO_ROOT / name, root / name)
    return root
