"""The repository's own rules: stored notebooks, parameters and harness cells, layers, the book cache across builds."""

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lengthgen.book import bookcache
from lengthgen.book.parameters import parameters_of
from lengthgen.book.paths import BOOK_DIR, LIB_DIR, REPO_ROOT

NOTEBOOKS = sorted(BOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
PACKAGE = LIB_DIR / "lengthgen"


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
def test_parameters_cell_is_literal_declared_and_followed_by_the_harness(path: Path):
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
    assert names == list(parameters_of(chapter).specs()) or set(names) == set(parameters_of(chapter).specs())
    harness = "".join(cells[tagged[0] + 1]["source"])
    assert f'Chapter("{chapter}", globals())' in harness
    assert "hide-input" in cells[tagged[0] + 1].get("metadata", {}).get("tags", []), "plumbing is hidden from readers"
    finishing = [c for c in cells if any(end in "".join(c["source"]) for end in ("chapter.finish()", "chapter.judge("))]
    assert len(finishing) == 1, "one claim-check cell ends the chapter through the harness"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_claim_check_cell_does_not_print_the_record(path: Path):
    """``chapter.finish()`` and ``chapter.judge(values)`` return the record; as a cell's last expression its whole repr
    (every check and the details, hundreds of kilobytes) would be rendered on the page. The cell assigns it, or its
    output is removed."""
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    [cell] = [c for c in cells if any(end in "".join(c["source"]) for end in ("chapter.finish()", "chapter.judge("))]
    last = ast.parse("".join(cell["source"])).body[-1]
    shown = isinstance(last, ast.Expr)
    assert not shown or "remove-output" in cell.get("metadata", {}).get("tags", []), (
        f"{path.name}: write 'record = chapter.finish()' so that the record is not printed on the page")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_threshold_or_harness_code_is_copied_into_a_notebook(path: Path):
    code = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
    for forbidden in ("ChapterRecord(", "Stopwatch(", "validate(", ".save(", "assert_all("):
        assert forbidden not in code, f"{path.name}: {forbidden} belongs to the harness"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_one_idiom_judges_a_chapter_and_no_notebook_lists_claim_names(path: Path):
    """A chapter's module returns every claim's value in one function; the notebook hands them to
    ``chapter.judge(...)`` once and never checks or reports a claim by name."""
    code = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
    calls = [node.func.attr for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
             and node.func.value.id == "chapter"]
    assert calls.count("judge") == 1, f"{path.name}: judge the chapter once, with chapter.judge(claim_values(...))"
    named = sorted({c for c in calls if c in ("check", "check_runs", "report", "finish")})
    assert not named, f"{path.name}: chapter.{named} names claims in the notebook; return them from claim_values"


def test_toc_lists_every_chapter_and_the_summary_runs_last():
    chapters = bookcache.toc_chapters()
    assert sorted(chapters) == [p.stem for p in NOTEBOOKS]
    assert max(p.stem for p in NOTEBOOKS) == "99_claims_summary", "the summary must execute after every chapter"


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    package = ".".join(path.relative_to(LIB_DIR).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            else:
                found.add(node.module or "")
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_model_code_imports_neither_chapters_nor_book_machinery():
    for path in sorted((PACKAGE / "model").glob("*.py")):
        for name in imports_of(path):
            assert not name.startswith(("lengthgen.chapters", "lengthgen.book")), f"{path.name} imports {name}"


LAYERS = ("model", "analysis", "chapters", "book")


def modules_of(layer: str) -> list[Path]:
    """A layer's modules and packages (a package by its ``__init__.py``), without the layer's own ``__init__``."""
    folder = PACKAGE / layer
    return sorted([p for p in folder.glob("*.py") if p.stem != "__init__"] + list(folder.glob("*/__init__.py")))


def module_name(path: Path) -> str:
    return path.parent.name if path.name == "__init__.py" else path.stem


def test_module_map_lists_every_module():
    doc = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text()))
    readme = (REPO_ROOT / "README.md").read_text()
    for layer in LAYERS:
        for path in modules_of(layer):
            name = module_name(path)
            assert f"``{name}``" in doc, f"lengthgen/__init__.py's module map lacks {layer}.{name}"
            assert f"`{name}`" in readme, f"README's module map lacks {layer}.{name}"


def test_each_chapter_has_an_analysis_module_named_like_its_notebook():
    for path in NOTEBOOKS:
        slug = path.stem.partition("_")[2]
        chapter = PACKAGE / "chapters"
        assert (chapter / f"{slug}.py").exists() or (chapter / slug / "__init__.py").exists(), path.name


CHAPTER_SHARED = {"common", "committed", "seeds"}  # the chapter layer's shared parameter groups, runs and seed ledger


def chapter_of_module(name: str) -> str | None:
    """The chapter a ``lengthgen.chapters...`` module belongs to (its top-level module or package), else None."""
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["lengthgen", "chapters"] else None


def every_module(layer: str) -> list[Path]:
    return sorted(p for p in (PACKAGE / layer).rglob("*.py") if "__pycache__" not in p.parts)


def test_no_chapter_imports_another_and_the_analysis_layer_imports_none():
    """One chapter's code never reaches into another's: what two chapters share lives in the analysis layer (or the
    chapter layer's shared parameter groups), and the analysis layer uses no chapter."""
    for path in every_module("chapters"):
        own = chapter_of_module("lengthgen." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts))
        for name in imports_of(path):
            other = chapter_of_module(name)
            assert other in (None, own, "__init__") or other in CHAPTER_SHARED, (
                f"chapters/{path.relative_to(PACKAGE / 'chapters')} imports chapter {other}")
    for path in every_module("analysis"):
        for name in imports_of(path):
            assert not name.startswith("lengthgen.chapters"), f"analysis/{path.name} imports {name}"


def test_each_analysis_module_serves_at_least_two_chapters():
    users: dict[str, set[str]] = {}
    notebooks = {p.stem.partition("_")[2]: "\n".join("".join(c["source"]) for c in json.loads(p.read_text())["cells"])
                 for p in NOTEBOOKS}
    for path in every_module("chapters"):
        own = path.relative_to(PACKAGE / "chapters").parts[0].removesuffix(".py")
        for name in imports_of(path):
            if name.startswith("lengthgen.analysis."):
                users.setdefault(name.split(".")[2], set()).add(own)
    for slug, text in notebooks.items():
        for module in re.findall(r"lengthgen\.analysis\.(\w+)", text):
            users.setdefault(module, set()).add(slug)
    for path in modules_of("analysis"):
        served = users.get(module_name(path), set()) - CHAPTER_SHARED
        assert len(served) >= 2, f"analysis/{path.name} serves {sorted(served)}: move it into that chapter"


def test_no_chapter_or_analysis_module_is_over_400_lines():
    for layer in ("chapters", "analysis"):
        for path in every_module(layer):
            lines = len(path.read_text().splitlines())
            assert lines <= 400, f"{path.relative_to(PACKAGE)} has {lines} lines: split it"


def test_the_book_machinery_imports_no_chapter_and_no_library_code_reads_a_notebook():
    """The machinery finds a chapter's module by name (``book.parameters.module_of``), so the layers import one way;
    what a chapter needs from its notebook (its defaults) the harness hands it."""
    for path in every_module("book"):
        for name in imports_of(path):
            assert not name.startswith("lengthgen.chapters"), f"book/{path.name} imports {name}"
    for layer in ("model", "analysis", "chapters"):
        for path in every_module(layer):
            text = path.read_text()
            assert not any(reader in text for reader in ("default_parameters", "notebook_path", ".ipynb")), (
                f"{path.relative_to(PACKAGE)} reads a notebook")


def test_claims_live_in_the_claims_layer_only():
    """Judgement apart from measurement: every chapter's claims sit in ``lengthgen.claims.<slug>``; no module of the
    model or chapter layers declares ``CLAIMS`` or imports the claims at module level (a measurement that read a
    threshold would change without its key)."""
    for path in NOTEBOOKS:
        assert (PACKAGE / "claims" / f"{path.stem.partition('_')[2]}.py").exists(), f"{path.name} has no claims module"
    judges = {"robustness.py", "claims_summary.py"}  # pages whose measurement is judging other chapters' records
    names_only = {"sequential_complexity.py"}  # reads its held-out checks' names (to leave them NaN) and no threshold
    for layer in ("model", "chapters"):
        for path in sorted((PACKAGE / layer).glob("*.py")):
            tree = ast.parse(path.read_text())
            assert not any(isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "CLAIMS" for t in node.targets)
                           for node in tree.body), f"{layer}/{path.name} declares CLAIMS"
            every = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
            names = {(n.module or "") if isinstance(n, ast.ImportFrom) else a.name
                     for n in every for a in (n.names if isinstance(n, ast.Import) else [n])}
            relative = {n.module or "" for n in every if isinstance(n, ast.ImportFrom) and n.level == 2}
            imports_claims = (any(m.startswith("lengthgen.claims") for m in names)
                              or any(m == "claims" or m.startswith("claims.") for m in relative))
            assert path.name in judges | names_only or not imports_claims, f"{layer}/{path.name} imports the claims"


def test_measurement_fingerprints_leave_out_the_book_machinery_and_the_claims():
    from lengthgen.book.fingerprint import NOT_MEASUREMENT, code_cells, import_closure

    for path in NOTEBOOKS:
        modules = import_closure(code_cells(path), REPO_ROOT / "lib", exclude=NOT_MEASUREMENT)
        layers = {m.relative_to(PACKAGE).parts[0] for m in modules if m.parent != PACKAGE}
        machinery = {m.stem for m in modules if m.parent.name == "book"}
        assert layers <= {"model", "analysis", "chapters", "book"} and machinery <= {"__init__", "parallel"}, (
            f"{path.name}: measurement fingerprint covers {sorted(layers)}, book modules {sorted(machinery)}")


def test_training_and_configuration_exist_once():
    sources = {p: p.read_text() for p in PACKAGE.rglob("*.py")}
    backward = [p.name for p, s in sources.items() if ".backward()" in s]
    assert backward == ["training.py"], f"training loops in {backward}"
    configs = [p.name for p, s in sources.items() if "def with_(" in s]
    assert configs == ["config.py"], f"hand-written config copies in {configs}"
    sweeps = [p.name for p, s in sources.items() if "def length_sweep(" in s]
    assert sweeps == ["evaluation.py"], f"length sweeps in {sweeps}"


def test_the_decoder_exists_once():
    """One decoder (``model/transformer.py``) whose encoding is a setting: no other module builds a stack of blocks,
    and the relation network is a subclass of it."""
    from lengthgen.model.relation_network import RelationTransformer
    from lengthgen.model.transformer import Transformer

    sources = {p: p.read_text() for p in PACKAGE.rglob("*.py")}
    stacks = sorted(p.name for p, s in sources.items() if "nn.ModuleList(" in s)
    assert stacks == ["transformer.py"], f"decoders (stacks of blocks) in {stacks}"
    assert issubclass(RelationTransformer, Transformer)


# -- the book cache across builds -------------------------------------------------------------------------


def mini_repo(tmp_path: Path) -> Path:
    """A small book with the real configuration and a copy of the library: intro and one chapter."""
    root = tmp_path / "repo"
    for rel in ("requirements.txt", "pyproject.toml", "_config.yml", "Makefile", "book/references.bib"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / rel, root / rel)
    shutil.copytree(PACKAGE, root / "lib" / "lengthgen", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: book/01_tiny\n")
    (root / "book" / "intro.md").write_text("# Mini book\n\nA test book.\n")
    write_tiny(root, "from lengthgen.model.seeding import derive_seed\nprint(derive_seed(0, 'x'))")
    return root


def write_tiny(root: Path, code: str) -> None:
    nb = dict(cells=[dict(cell_type="markdown", id="m1", metadata={}, source="# Tiny\n"),
                     dict(cell_type="code", id="c1", metadata={}, execution_count=None, outputs=[], source=code)],
              metadata=dict(kernelspec=dict(display_name="Python 3", language="python", name="python3")),
              nbformat=4, nbformat_minor=5)
    (root / "book" / "01_tiny.ipynb").write_text(json.dumps(nb))


def build(root: Path) -> tuple[dict, int, str, int]:
    """What ``make book`` does: refresh, build, check. Returns (refresh result, build exit code, log, check exit code)."""
    done = bookcache.refresh(root)
    jupyter_book = str(Path(sys.executable).with_name("jupyter-book"))
    proc = subprocess.run([jupyter_book, "build", str(root), "--builder", "html", "-W", "-n", "--keep-going"],
                          capture_output=True, text=True, cwd=root)
    return done, proc.returncode, proc.stdout + proc.stderr, len(bookcache.unexecuted(root))


def test_book_builds_twice_then_after_one_line_changes(tmp_path):
    root = mini_repo(tmp_path)
    done, code, log, unexecuted = build(root)
    assert done["wiped"] == ["01_tiny"] and code == 0 and unexecuted == 0, log[-2000:]
    assert "Executing notebook" in log
    done, code, log, unexecuted = build(root)  # warm rebuild: nothing executes again
    assert done["stale"] == [] and code == 0 and unexecuted == 0 and "Executing notebook" not in log, log[-2000:]
    write_tiny(root, "from lengthgen.model.seeding import derive_seed\nprint(derive_seed(1, 'x'))")  # a chapter's line
    done, code, log, unexecuted = build(root)
    assert code == 0 and unexecuted == 0 and "Executing notebook" in log, log[-2000:]
    seeding = root / "lib" / "lengthgen" / "model" / "seeding.py"
    seeding.write_text(seeding.read_text() + "\n# a comment\n")  # a comment in a module the chapter imports
    done, code, log, unexecuted = build(root)
    assert done["stale"] == [] and "Executing notebook" not in log, log[-2000:]
    seeding.write_text(seeding.read_text() + "\nCONSTANT = 1\n")  # code in a module the chapter imports
    done, code, log, unexecuted = build(root)
    assert done["stale"] == ["01_tiny"] and code == 0 and "Executing notebook" in log, log[-2000:]
    transformer = root / "lib" / "lengthgen" / "model" / "transformer.py"
    transformer.write_text(transformer.read_text() + "\nCONSTANT = 1\n")  # a module the chapter does not import
    done, code, log, unexecuted = build(root)
    assert done["stale"] == [] and "Executing notebook" not in log, log[-2000:]
    write_tiny(root, "raise RuntimeError('the chapter fails before its claim check')")
    done, code, log, unexecuted = build(root)
    assert code != 0 and unexecuted == 1, "a failing chapter must turn the build red"
    done, code, log, unexecuted = build(root)  # unchanged and still failing: it is executed again, and fails again
    assert done["failed"] == ["01_tiny"] and code != 0 and unexecuted == 1
    config = (root / "_config.yml").read_text()
    (root / "_config.yml").write_text(config + "\n# a comment\n")
    assert bookcache.refresh(root)["wiped"] == [], "a change that does not touch execution keeps the cache"
    (root / "_config.yml").write_text(config.replace("timeout: 1800", "timeout: 1700"))
    assert bookcache.refresh(root)["wiped"] == ["01_tiny"], "a change of how chapters execute wipes the cache"


def test_check_reports_unexecuted_chapters(tmp_path):
    missing = bookcache.unexecuted(REPO_ROOT, tmp_path / "_build")
    assert [p.name for p in missing] == [p.name for p in bookcache.toc_notebooks()]


def test_the_landing_page_opens_with_the_verdicts_and_an_abstract():
    """A lede of at most 60 words, then the papers' claims with their verdicts (rendered from this build's records),
    then an abstract of at most 200 words; the prose types no number (verdicts and numbers come from the records)."""
    intro = (BOOK_DIR / "intro.md").read_text()
    title, rest = intro.split("\n", 1)
    lede, after = rest.split("```{paper-verdicts}", 1)
    assert title.startswith("# ") and "##" not in lede and len(lede.split()) <= 60
    abstract = after.split("## Abstract", 1)[1].split("\n## ", 1)[0]
    assert "```{headline-figure}" in abstract  # the figure closes the abstract
    abstract = re.sub(r"```.*?```", "", abstract, flags=re.S)
    words = re.sub(r"\{cite\}`[^`]*`|\[[^]]*\]\([^)]*\)", "", abstract).split()
    assert 50 <= len(words) <= 200
    for text in (lede, abstract):
        prose = re.sub(r"\{cite\}`[^`]*`|\[[^]]*\]\([^)]*\)", "", text)
        assert not re.search(r"\d", prose), f"a number typed in the landing page: {prose[:80]}"


def markdown_of(path: Path) -> str:
    """A page's prose: a Markdown page, or a notebook's Markdown cells."""
    if path.suffix == ".md":
        return path.read_text()
    return "\n\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown")


def long_sentences(text: str, most: int = 40) -> list[str]:
    """Sentences of more than ``most`` words, outside directives, display maths, tables and headings (a glue role, an
    inline formula or a link counts as one word)."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", " M ", text, flags=re.S)
    text = re.sub(r"\$[^$]*\$", "M", text)
    text = re.sub(r"\{[a-z:]+\}`[^`]*`", "G", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"^\s*(\|.*|#+ .*)$", " ", text, flags=re.M)
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z*(\"'])", " ".join(paragraph.split())):
            if len(sentence.split()) > most:
                found.append(sentence)
    return found


def running_prose(text: str) -> list[str]:
    """The words of a page's running prose: its Markdown outside tables, lists, headings, display maths, code,
    figures, claim tables and Provenance blocks (admonitions such as the verdict box count; a glue role, an inline
    formula or a link is one word)."""
    def kept(block: re.Match) -> str:
        head = block.group(1)
        return block.group(2) if head.startswith("{admonition}") and "Provenance" not in head else " "

    text = re.sub(r"^```(\S[^\n]*)?\n(.*?)^```\s*$", lambda m: kept(m) if m.group(1) else " ", text, flags=re.S | re.M)
    text = re.sub(r"^:[a-z-]+:.*$", " ", text, flags=re.M)  # directive options
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"\$[^$]*\$", "M", text)
    text = re.sub(r"\{[a-z:]+\}`[^`]*`", "G", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", "L", text)
    text = re.sub(r"^\s*(\|.*|#+ .*|[-*+] .*|\d+\. .*|\(.*\)=)$", " ", text, flags=re.M)
    text = re.sub(r"^ {2,}\S.*$", " ", text, flags=re.M)  # continuation lines of list items
    return text.split()


# Running-prose words of each rewritten page before the prose cut, counted by running_prose: the larger of its count
# when the cut was asked for (commit 23432d7) and just before it was made (8a4f5d6), since material other work added
# in between (chapter 4's in-range law and logit scaling, chapter 2's windows control, chapter 7's power columns) is
# not the prose the cut is about. The network chapters (6, 11, 12, 13) join when they are rewritten on their
# regenerated sweeps.
PROSE_BEFORE_CUT = {"01_equivariance.ipynb": 947, "02_absolute_pinning.ipynb": 1466, "03_carrier.ipynb": 1418,
                    "04_dilution_law.ipynb": 2068, "05_linear_control.ipynb": 1760, "07_robustness.ipynb": 928,
                    "08_position_only.ipynb": 2128, "09_connections.ipynb": 1007, "10_zoo.ipynb": 2791,
                    "99_claims_summary.ipynb": 715, "reading_claim_checks.md": 480}


def test_the_rewritten_pages_keep_their_running_prose_cut_by_a_third():
    """Process history lives in Provenance blocks, not in the running text: together the rewritten pages keep at most
    two thirds of their running prose, and none more than three quarters of its own."""
    words = {name: len(running_prose(markdown_of(BOOK_DIR / name))) for name in PROSE_BEFORE_CUT}
    assert sum(words.values()) <= 2 / 3 * sum(PROSE_BEFORE_CUT.values()), words
    for name, count in words.items():
        assert count <= 0.75 * PROSE_BEFORE_CUT[name], f"{name}: {count} words of running prose, before the cut " \
                                                        f"{PROSE_BEFORE_CUT[name]}"


VERDICT_BOX = "```{admonition} What this chapter finds"
SHORT_SENTENCED = ("intro.md", "glossary.md", "reading_claim_checks.md", "01_equivariance.ipynb", "02_absolute_pinning.ipynb",
                   "03_carrier.ipynb", "04_dilution_law.ipynb", "05_linear_control.ipynb", "07_robustness.ipynb",
                   "08_position_only.ipynb", "09_connections.ipynb", "10_zoo.ipynb", "99_claims_summary.ipynb")


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.stem != "99_claims_summary"], ids=lambda p: p.stem)
def test_every_chapter_opens_with_its_verdict_in_at_most_60_words(path: Path):
    """The first thing under a chapter's title is what it found: a verdict box of at most 60 words, verdict first."""
    first = "".join(json.loads(path.read_text())["cells"][0]["source"])
    title, rest = first.split("\n", 1)
    assert title.startswith("# ") and rest.lstrip().startswith(VERDICT_BOX), f"{path.name}: no verdict box under the title"
    box = rest.split(VERDICT_BOX, 1)[1].split("```", 1)[0].replace(":class: tip", "")
    box = re.sub(r"\{[a-z:]+\}`[^`]*`", "G", re.sub(r"\$[^$]*\$", "M", box))
    assert len(box.split()) <= 60, f"{path.name}: verdict box of {len(box.split())} words"
    assert re.match(r"\s*\*\*(Reproduces|Partly reproduces|Does not reproduce|Not testable here)", box), \
        f"{path.name}: verdict first"
    assert not long_sentences(box)


@pytest.mark.parametrize("name", SHORT_SENTENCED)
def test_pages_keep_their_sentences_under_40_words(name: str):
    """Sentences of at most 40 words on the pages rewritten for it (the others follow as they are rewritten)."""
    found = long_sentences(markdown_of(BOOK_DIR / name))
    assert not found, f"{name}: {len(found)} sentence(s) over 40 words, first: {found[0][:120]}"


def test_every_paper_claim_has_a_short_statement_and_a_deciding_number_its_chapter_registers():
    from lengthgen.claims import claims_of
    from lengthgen.claims.paper import HEADLINES, PAPER_CLAIMS, verdict_counts

    assert set(HEADLINES) == {claim.key for claim in PAPER_CLAIMS}
    for claim in PAPER_CLAIMS:
        headline = HEADLINES[claim.key]
        assert len(headline.short.split()) <= 15, claim.key
        assert headline.check in claims_of(claim.chapter), (claim.key, headline.check)
        record = dict(checks=[dict(name=headline.check, value=0.5)], parameters=dict(seeds=2, offsets=[3, 5]))
        assert "{" not in headline.text(record) and headline.text({}) == "no record"
    counts = verdict_counts({})
    assert counts["not run"] == len(PAPER_CLAIMS) and sum(counts.values()) == len(PAPER_CLAIMS)


def test_the_seed_ledger_keeps_held_out_seeds_fresh_and_pages_at_their_defaults():
    from lengthgen.book.audit import current_defaults
    from lengthgen.chapters.seeds import AVOIDS, LEDGER, every_seed

    for chapter, kinds in LEDGER.items():
        defaults = current_defaults(chapter)
        page = range(defaults["seed_start"], defaults["seed_start"] + defaults["seeds"])
        assert tuple(kinds["page"]) == tuple(page), f"{chapter}: the ledger's page seeds are not the notebook's"
        held = set(kinds["held_out"])
        used = {seed for kind, listed in kinds.items() if kind != "held_out" for seed in listed}
        assert not held & used, f"{chapter}: held-out seeds {sorted(held & used)} were used for something else"
        for other in AVOIDS.get(chapter, ()):
            shared = every_seed(chapter) & every_seed(other)
            assert not shared, f"{chapter} reuses seeds {sorted(shared)} of {other}, whose model it trains"
    seeds_module = (PACKAGE / "chapters" / "seeds.py").read_text()
    for path in every_module("chapters"):
        if path.name != "seeds.py":
            for literal in re.findall(r"range\((\d+), (\d+)\)", path.read_text()):
                assert f"range({literal[0]}, {literal[1]})" not in seeds_module, f"{path.name} copies ledger seeds"


def test_the_book_is_citable_at_the_version_it_shows():
    """CITATION.cff names the version the library carries (every record and the landing page show it)."""
    import yaml

    from lengthgen import __version__

    citation = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    assert citation["cff-version"] == "1.2.0" and citation["title"] and citation["authors"]
    assert str(citation["version"]) == __version__ and f'version = "{__version__}"' in pyproject


def test_a_check_that_several_chapters_register_has_one_role_everywhere():
    """One name, one role: a check registered under the same name in two chapters is evidence in both or in neither."""
    from collections import defaultdict

    from lengthgen.claims import claims_of

    roles: dict[str, dict[str, str]] = defaultdict(dict)
    for chapter in bookcache.toc_chapters(REPO_ROOT):
        try:
            claims = claims_of(chapter)
        except KeyError:
            continue
        for claim in claims.values():
            roles[claim.name][chapter] = claim.role
    mixed = {name: where for name, where in roles.items() if len(set(where.values())) > 1}
    assert not mixed, f"checks with a different role in different chapters: {mixed}"
