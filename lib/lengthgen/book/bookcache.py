"""Keeping the book's execution cache honest: ``python -m lengthgen.book.bookcache build|refresh|check``.

The notebook execution cache (jupyter-cache) keys each chapter on its code cells only. Before
each build, :func:`refresh` compares every chapter's code fingerprint (its pins, the library
modules it imports, the data it reads and how its claims judge; :mod:`lengthgen.book.fingerprint`)
with the one stored at the previous build, drops the cached execution of every chapter whose
fingerprint changed (or whose record in ``data/records/`` is gone: the claim tables are judged
from it) and touches its notebook so Sphinx reads it again. A chapter whose claims changed only in
wording (statements, reasons, the register) is touched, not executed: its claim table is rendered
at build time (:mod:`lengthgen.book.sphinx_claims`), so that is a warm rebuild. A change of how chapters are executed
(the ``execute`` section of ``_config.yml``) wipes the whole cache; Sphinx itself re-reads every
page after any other configuration change. Records in ``data/records/`` of chapters the table of
contents no longer lists are reported (the claims summary then fails, naming them), never deleted.
Chapters whose ``Parameters.always_execute`` is set (the
claims summary, which reads the other chapters' records) are dropped on every build. A warm
build with nothing changed therefore executes only those pages and takes seconds.

``build`` (what ``make book`` runs) is ``refresh``, ``jupyter-book build`` with warnings as errors,
then ``check``.

After a build, :func:`unexecuted` lists the chapters without a successful cached execution:
Sphinx does not re-read unchanged files, so a chapter that failed once would otherwise pass
silently on an incremental rebuild; ``check`` exits non-zero when there is one, and the next
``refresh`` sends it back to execution.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import yaml

from . import fingerprint
from .paths import RECORDS_DIR, REPO_ROOT

STAMP = ".lengthgen-fingerprints.json"


def toc_files(root: Path = REPO_ROOT) -> list[str]:
    """Every page the table of contents lists (``root`` first), as paths without suffix, in book order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files: list[str] = [toc["root"]]

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "file" in node:
                files.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc.get("parts", toc.get("chapters", [])))
    return files


def toc_chapters(root: Path = REPO_ROOT) -> list[str]:
    """Chapter names (``NN_slug``) of the notebooks the table of contents lists, in book order."""
    return [Path(f).name for f in toc_files(root) if (root / f"{f}.ipynb").exists()]


def toc_notebooks(root: Path = REPO_ROOT) -> list[Path]:
    """The notebooks the table of contents lists, in book order."""
    return [root / "book" / f"{name}.ipynb" for name in toc_chapters(root)]


def _cache(build: Path):  # noqa: ANN202 - jupyter-cache's own type
    from jupyter_cache import get_cache

    return get_cache(str(build / ".jupyter_cache"))


def forget(notebook: Path, build: Path) -> None:
    """Drop a notebook's cached execution (if any) and touch it, so the next build executes it again."""
    if (build / ".jupyter_cache").exists():
        cache = _cache(build)
        try:
            cache.remove_cache(cache.match_cache_notebook(nbformat.read(notebook, as_version=4)).pk)
        except KeyError:
            pass
    notebook.touch()


def refresh(root: Path = REPO_ROOT, build: Path | None = None) -> dict[str, list[str]]:
    """Invalidate what changed since the last build, and what failed in it.

    Returns the chapter names ``{"wiped", "stale", "failed", "unrecorded", "always", "reworded"}``: every list but
    the last is executed again; a ``reworded`` page (only its claims' wording or register changed) is read again over
    its cached execution.
    """
    build = build or root / "_build"
    stamp_path = build / STAMP
    chapters = toc_chapters(root)
    current = dict(config=fingerprint.config_fingerprint(root),
                   chapters={name: fingerprint.code_fingerprint(name, root) for name in chapters},
                   prose={name: fingerprint.prose_fingerprint(name, root) for name in chapters})
    previous = json.loads(stamp_path.read_text()) if stamp_path.exists() else None
    done: dict[str, list[str]] = dict(wiped=[], stale=[], failed=[], always=[], unrecorded=[], reworded=[])
    if previous is None or previous.get("config") != current["config"]:
        for stale in (build / ".jupyter_cache", build / ".doctrees", build / "html", build / "jupyter_execute"):
            shutil.rmtree(stale, ignore_errors=True)
        done["wiped"] = chapters
    else:
        done["stale"] = [name for name in chapters if previous["chapters"].get(name) != current["chapters"][name]]
        done["failed"] = [p.stem for p in unexecuted(root, build) if p.stem not in done["stale"]]
        if root == REPO_ROOT:  # the claim tables are judged from the records: a page whose record is gone runs again
            done["unrecorded"] = [name for name in chapters if not (RECORDS_DIR / f"{name}.json").exists()
                                  and name not in done["stale"] + done["failed"]]
        again = set(done["stale"] + done["failed"] + done["unrecorded"])
        done["reworded"] = [name for name in chapters if name not in again
                            and previous.get("prose", {}).get(name) != current["prose"][name]]
    done["always"] = [name for name in chapters if fingerprint.declaration(name).always_execute]
    if root == REPO_ROOT:  # reported, never deleted: the claims summary fails on them, naming each
        done["foreign"] = [record.stem for record in sorted(RECORDS_DIR.glob("*.json")) if record.stem not in chapters]
    for name in done["stale"] + done["failed"] + done["unrecorded"] + done["always"]:
        forget(root / "book" / f"{name}.ipynb", build)
    for name in done["reworded"]:  # read again over the cached execution: the claim tables are rendered at build time
        (root / "book" / f"{name}.ipynb").touch()
    landing = root / f"{toc_files(root)[0]}.md"
    if landing.exists():  # its overview judges every record: read it again (after the chapters, which sort first)
        landing.touch()
    build.mkdir(parents=True, exist_ok=True)
    stamp_path.write_text(json.dumps(current, indent=1))
    return done


def unexecuted(root: Path = REPO_ROOT, build: Path | None = None) -> list[Path]:
    """Notebooks in the toc whose current code has no successful cached execution."""
    cache = _cache(build or root / "_build")
    missing = []
    for path in toc_notebooks(root):
        try:
            cache.match_cache_notebook(nbformat.read(path, as_version=4))
        except KeyError:
            missing.append(path)
    return missing


def jupyter_book() -> str:
    """The ``jupyter-book`` command of this environment."""
    beside = Path(sys.executable).with_name("jupyter-book")
    return str(beside) if beside.exists() else "jupyter-book"


def build(root: Path = REPO_ROOT) -> int:
    """Refresh the cache, build the HTML book (warnings are errors), then check every chapter executed; 0 if all went well."""
    main(["refresh"], root)
    code = subprocess.run([jupyter_book(), "build", str(root), "--builder", "html", "-W", "-n", "--keep-going"],
                          cwd=root).returncode
    return main(["check"], root) or code


def main(argv: list[str] | None = None, root: Path = REPO_ROOT) -> int:
    """Command line: ``build`` (all of it), or ``refresh`` before a build and ``check`` after it."""
    command = (argv or sys.argv[1:] or ["check"])[0]
    if command == "build":
        code = build(root)
        print(f"book: {'open _build/html/index.html' if code == 0 else 'the build failed'}")
        return code
    if command == "refresh":
        done = refresh(root)
        for name in done.get("foreign", []):
            print(f"book cache: data/records/{name}.json is the record of no chapter in the table of contents; the "
                  "claims summary will fail until it is deleted")
        if done["wiped"]:
            print("book cache: wiped (first build, or how chapters are executed changed)")
        else:
            print(f"book cache: re-executing {done['stale'] or 'no chapter'} (code or data changed), "
                  f"{done['failed'] or 'none'} (failed before), {done['unrecorded'] or 'none'} (record missing) and "
                  f"{done['always']} (always); re-rendering {done['reworded'] or 'none'} (claims reworded)")
        return 0
    if command == "check":
        missing = unexecuted(root)
        for nb in missing:
            print(f"book cache: {nb.relative_to(root)} has no successful execution (it failed, or never ran)")
        return 1 if missing else 0
    print(f"usage: python -m lengthgen.book.bookcache build|refresh|check (got {command!r})")
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
