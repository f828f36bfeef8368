"""The repository's own rules: stored notebooks, parameters cells, the execution cache."""

import ast
import json
import shutil
from pathlib import Path

import pytest

from lengthgen import bookcache
from lengthgen.params import CHAPTERS
from lengthgen.paths import BOOK_DIR, REPO_ROOT

NOTEBOOKS = sorted(BOOK_DIR.glob("[0-9][0-9]_*.ipynb"))


def test_there_are_chapters():
    assert len(NOTEBOOKS) >= 2


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_stored_clean(path: Path):
    nb = json.loads(path.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [] and cell.get("execution_count") is None, "committed with outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_parameters_cell_is_literal_and_validated(path: Path):
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    tagged = [i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    source = "".join(cells[tagged[0]]["source"])
    names = []
    for node in ast.parse(source).body:
        assert isinstance(node, ast.Assign) and len(node.targets) == 1, "only simple assignments"
        ast.literal_eval(node.value)  # raises if not a literal
        names.append(node.targets[0].id)
    chapter = path.stem
    assert set(names) == set(CHAPTERS[chapter]), "parameters cell and validation spec disagree"
    assert f'validate("{chapter}", globals())' in "".join(cells[tagged[0] + 1]["source"])


def test_toc_lists_every_chapter():
    assert [p.name for p in bookcache.toc_notebooks()] == [p.name for p in NOTEBOOKS]


def _mini_repo(tmp_path: Path) -> Path:
    for rel in ("lib/lengthgen/__init__.py", "requirements.txt", "pyproject.toml", "_config.yml", "Makefile"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / rel, tmp_path / rel)
    return tmp_path


def test_cache_is_wiped_when_library_changes(tmp_path: Path):
    root = _mini_repo(tmp_path)
    build = root / "_build"
    assert bookcache.refresh(root, build)  # first build: nothing recorded yet
    (build / ".jupyter_cache").mkdir()
    (build / ".jupyter_cache" / "marker").write_text("cached")
    assert not bookcache.refresh(root, build), "unchanged sources must keep the cache"
    assert (build / ".jupyter_cache" / "marker").exists()
    (root / "lib/lengthgen/__init__.py").write_text("# changed\n")
    assert bookcache.refresh(root, build), "a library change must wipe the cache"
    assert not (build / ".jupyter_cache").exists()
    (root / "requirements.txt").write_text("numpy==1.0\n")
    assert bookcache.refresh(root, build), "a change of pins must wipe the cache"


def test_check_reports_unexecuted_chapters(tmp_path: Path):
    missing = bookcache.unexecuted(REPO_ROOT, tmp_path / "_build")
    assert [p.name for p in missing] == [p.name for p in NOTEBOOKS]
