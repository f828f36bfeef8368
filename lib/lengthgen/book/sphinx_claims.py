"""A Sphinx extension that judges the book's claims when the book is built, not when a chapter runs.

A chapter's execution measures and writes its record (``data/records/<chapter>.json``); the claim
table under its claim-check section is a directive in a Markdown cell::

    ```{claims}
    ```

rendered from that record judged again against the claims data as it is now
(:func:`lengthgen.book.judging.rejudge`): each claim's statement, role, threshold, measured value,
verdict and one-sentence reason, then a collapsed *Provenance* block with the full statements and
arguments and every revision from the chapter's register. ``{claims-revisions}`` renders every
revision of every chapter on one page, and ``{claims-overview}`` (the landing page) every chapter's
verdicts in counts.

Editing a claim's statement, reason or register is therefore a warm rebuild: the book cache only
asks Sphinx to read the page again (:mod:`lengthgen.book.bookcache`), the cached execution stands
and no sweep goes stale. A check that fails, is not measured or judged nothing on the record it
is shown from is a build warning, which ``make book`` turns into a failed build.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

VERDICTS = {True: "holds", False: "fails", None: "reported"}


def verdict(check: dict) -> str:
    """A judged check's verdict in words: holds, fails, not judged (nothing qualified), not measured, or reported."""
    from .judging import NOT_MEASURED

    if check["passed"] is None:
        return "unregistered" if check.get("role") == "unregistered" else "reported"
    if str(check.get("claim", "")).startswith(NOT_MEASURED):
        return "not measured"
    if check["passed"] is False and isinstance(check["value"], float) and math.isnan(check["value"]):
        return "not judged"
    return VERDICTS[bool(check["passed"])]


def measured_text(check: dict, runs: int | None) -> str:
    """The measured value as the table shows it (a per-run check: how many runs fail, of how many)."""
    value = check["value"]
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if runs is not None:
        return f"{int(value)} of {runs} runs fail"
    return f"{value:.3g}"


def threshold_text(claim: Any, bar: float) -> str:
    """The threshold in force at the record's parameters, with how it is computed when it is a function."""
    if not claim.comparison:
        return ""
    shown = f"{bar:.3g}"
    text = f"{claim.comparison} {claim.threshold_text} = {shown}" if claim.threshold_text else f"{claim.comparison} {shown}"
    return f"every run: {text}" if claim.per_run else text


def judged_rows(chapter: str, record: dict) -> tuple[list[dict], list[str]]:
    """One row per registered claim, judged from the record's values and the current claims; and every problem."""
    from ..claims import claims_of
    from .judging import rejudge
    from .parameters import parameters_of

    judged = rejudge(record)
    parameters: list[Any] = []  # built once, only if a threshold is a function of the parameters

    def bar(claim: Any) -> float:
        if callable(claim.threshold) and not parameters:
            parameters.append(parameters_of(chapter).from_values(record["parameters"]))
        return claim.threshold_for(parameters[0] if parameters else None)

    checks = {check["name"]: check for check in judged["checks"]}
    per_run = judged.get("details", {}).get("per_run", {})
    rows, problems = [], []
    for claim in claims_of(chapter).values():
        check = checks[claim.name] if claim.name in checks else dict(
            name=claim.name, claim=claim.statement, value=math.nan, passed=None, role=claim.role)
        shown = verdict(check)
        if claim.comparison and shown in ("fails", "not judged", "not measured"):
            problems.append(f"{chapter}: claim check {claim.name!r} {shown}: {claim.statement} (measured "
                            f"{check['value']}, required {threshold_text(claim, bar(claim))})")
        if not claim.comparison and claim.name not in checks:
            problems.append(f"{chapter}: reported number {claim.name!r} is not in the record")
        runs = len(per_run[claim.name]) if claim.per_run and claim.name in per_run else None
        rows.append(dict(name=claim.name, statement=claim.statement, role=claim.role,
                         threshold=threshold_text(claim, bar(claim)), measured=measured_text(check, runs), verdict=shown,
                         reason=claim.reason))
    return rows, problems


def _paragraph(text: str, literal: str = "") -> nodes.paragraph:
    para = nodes.paragraph()
    if literal:
        para += nodes.literal(text=literal)
        para += nodes.Text(" ")
    para += nodes.Text(text)
    return para


def table(headers: list[str], rows: list[list[Any]], widths: list[int], classes: list[str]) -> nodes.table:
    """A docutils table: a cell is text, or (text, literal name) shown as ``name`` then the text."""
    out = nodes.table(classes=classes)
    group = nodes.tgroup(cols=len(headers))
    out += group
    for width in widths:
        group += nodes.colspec(colwidth=width)

    def row(cells: list[Any], header: bool = False) -> nodes.row:
        line = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            if isinstance(cell, nodes.Node):
                entry += cell
            else:
                entry += _paragraph(*cell) if isinstance(cell, tuple) else _paragraph(str(cell))
            line += entry
        return line

    head = nodes.thead()
    head += row(headers, header=True)
    body = nodes.tbody()
    for cells in rows:
        body += row(cells)
    group += head
    group += body
    return out


def provenance(chapter: str) -> nodes.admonition:
    """The collapsed Provenance block: full statements and arguments, and every revision, from the register."""
    from ..claims import claims_module, register_of, register_path

    block = nodes.admonition(classes=["dropdown", "claims-provenance"])
    block += nodes.title(text="Provenance: full arguments and revisions")
    block += _paragraph(f"The claims data is {claims_module(chapter)}; its register, "
                        f"lengthgen/claims/register/{register_path(chapter).name}, keeps what follows and must agree "
                        "with it on every role and threshold.")
    items = nodes.bullet_list()
    for name, entry in register_of(chapter).items():
        parts = [("statement in full", entry.get("statement")), ("argument", entry.get("argument"))]
        parts += [("revised", rev["why"] + (f" (was: {rev['was']})" if rev.get("was") else ""))
                  for rev in entry.get("revisions") or []]
        parts = [(label, text) for label, text in parts if text]
        if not parts:
            continue
        item = nodes.list_item()
        item += _paragraph(f"registered: {entry.get('registered')}", literal=name)
        for label, text in parts:
            item += _paragraph(f"{label}: {text}")
        items += item
    block += items if len(items) else _paragraph("No claim of this chapter has a longer argument or a revision.")
    return block


def judged_record(chapter: str, path: Path | None = None) -> tuple[list[dict], list[str]]:
    """A chapter's rows judged now from its record (``data/records/<chapter>.json`` unless ``path``), and every problem:
    no record, a record that is not current (another chapter's, other code, notebook or parameters), a check that
    fails, is not measured or judged nothing, and any disagreement between the claims data and its register."""
    from ..claims import register_problems
    from .audit import stale_reasons
    from .paths import RECORDS_DIR
    from .records import RecordFileError, load_record

    problems = register_problems(chapter)
    try:
        record = load_record(path or RECORDS_DIR / f"{chapter}.json")
    except RecordFileError as err:
        return [], [*problems, f"{chapter}: no record to judge its claims from ({err}); run make book"]
    reasons = [] if path else stale_reasons(chapter, record)
    if reasons:
        return [], [*problems, f"{chapter}: its record is not current ({'; '.join(reasons)}); run make book"]
    try:
        rows, failing = judged_rows(chapter, record)
    except Exception as err:  # noqa: BLE001 - a record that cannot be judged is a build error, named, not a crash
        return [], [*problems, f"{chapter}: its record cannot be judged ({type(err).__name__}: {err})"]
    return rows, [*problems, *failing]


def note_claims_dependencies(env: Any, chapter: str) -> None:
    """Have Sphinx read a page again when the chapter's record, claims data or register changes."""
    from ..claims import claims_module, register_path
    from .paths import RECORDS_DIR, REPO_ROOT

    module = REPO_ROOT / "lib" / Path(*claims_module(chapter).split("."))
    for dependency in (RECORDS_DIR / f"{chapter}.json", module.with_suffix(".py"), register_path(chapter)):
        env.note_dependency(str(dependency))


def chapter_of(docname: str) -> str:
    """The chapter a page is: ``"book/06_transfer"`` -> ``"06_transfer"``."""
    return Path(docname).name


class ClaimsDirective(SphinxDirective):
    """``{claims}``: the page's claim table, judged now from its record, and its Provenance block."""

    optional_arguments = 1
    option_spec = {"record": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        from ..claims import DEFAULT_REASON

        chapter = self.arguments[0] if self.arguments else chapter_of(self.env.docname)
        note_claims_dependencies(self.env, chapter)
        path = Path(self.options["record"]) if "record" in self.options else None
        rows, problems = judged_record(chapter, path)
        for problem in problems:
            logger.warning(problem, location=self.get_location())
        if not rows:
            return [nodes.paragraph(text=problems[-1])]
        shown = [[(r["statement"], r["name"]), r["role"], r["threshold"] or "—", r["measured"],
                  "not asserted" if r["verdict"] == "reported" else r["verdict"],
                  "—" if r["reason"] == DEFAULT_REASON else r["reason"]] for r in rows]
        headers = ["claim", "role", "threshold", "measured", "verdict", "reason"]
        return [table(headers, shown, [30, 7, 12, 10, 8, 33], ["claims-table"]), provenance(chapter)]


def overview_row(chapter: str, rows: list[dict] | None) -> dict[str, Any]:
    """One chapter's verdicts in counts, from its judged rows (:func:`judged_rows`): evidence that holds (of how many),
    proof and sanity checks that hold, numbers reported without assertion, and how many of those were registered as
    checks and made reports after results were seen (from the register)."""
    from ..claims import register_of

    if not rows:
        return dict(chapter=chapter, evidence="no current record", guards="", reported="", demoted="")
    evidence = [r for r in rows if r["role"] == "evidence"]
    guards = [r for r in rows if r["role"] in ("proof", "sanity")]
    register = register_of(chapter)
    demoted = sum(1 for r in rows if r["role"] == "reported" and (register.get(r["name"]) or {}).get("revisions"))

    def held(group: list[dict]) -> str:
        return f"{sum(r['verdict'] == 'holds' for r in group)} of {len(group)}" if group else "—"

    return dict(chapter=chapter, evidence=held(evidence), guards=held(guards),
                reported=str(sum(r["role"] == "reported" for r in rows)), demoted=str(demoted))


def chapter_link(chapter: str) -> nodes.paragraph:
    """A cross-reference to a chapter's page, resolved by Sphinx for any builder: ``06 transfer``."""
    from sphinx import addnodes

    number, _, slug = chapter.partition("_")
    link = addnodes.pending_xref("", refdomain="std", reftype="doc", reftarget=f"/book/{chapter}", refexplicit=True,
                                 refwarn=True)
    link += nodes.inline(text=f"{number} {slug.replace('_', ' ')}")
    para = nodes.paragraph()
    para += link
    return para


class OverviewDirective(SphinxDirective):
    """``{claims-overview}``: every chapter's verdicts in counts, judged when the book is built (the landing page)."""

    def run(self) -> list[nodes.Node]:
        from .audit import SUMMARY
        from .bookcache import toc_chapters

        rows = []
        for chapter in sorted(c for c in toc_chapters() if c != SUMMARY):  # by chapter number
            note_claims_dependencies(self.env, chapter)
            judged, problems = judged_record(chapter)
            for problem in problems:
                logger.warning(problem, location=self.get_location())
            rows.append(overview_row(chapter, judged if judged else None))
        shown = [[chapter_link(r["chapter"]), r["evidence"], r["guards"], r["reported"], r["demoted"]] for r in rows]
        headers = ["chapter", "evidence that holds", "proof and sanity checks that hold", "numbers reported, not asserted",
                   "of those, checks made reports after results"]
        return [table(headers, shown, [24, 16, 20, 18, 22], ["claims-overview"])]


class PaperVerdictsDirective(SphinxDirective):
    """``{paper-verdicts}``: every claim of the two papers, its verdict judged now from this build's records, and the
    one measured number that decides it, in book order (the landing page)."""

    def run(self) -> list[nodes.Node]:
        from ..claims.paper import BEYOND, HEADLINES, PAPER_CLAIMS, PART_I, judge, verdict_counts
        from .bookcache import toc_chapters

        chapters = toc_chapters()
        records = build_records(self.env, chapters)
        order = {chapter: i for i, chapter in enumerate(chapters)}
        rows = []
        for claim in sorted(PAPER_CLAIMS, key=lambda c: order.get(c.chapter, len(order))):
            verdict, _ = judge(claim, records)
            headline = HEADLINES[claim.key]
            link = chapter_link(claim.chapter)
            cell = nodes.paragraph(text=headline.short + " ")
            cell += link.children
            mark = nodes.strong(text=verdict, classes=[f"verdict-{verdict.replace(' ', '-')}"])
            rows.append([cell, "I" if claim.paper == PART_I else "book" if claim.paper == BEYOND else "II", mark,
                         headline.text(records.get(claim.chapter, {}))])
        counts = verdict_counts(records)
        from .. import __version__

        summary = nodes.paragraph(classes=["paper-verdicts-summary"], text=(
            f"Version {__version__} · {len(PAPER_CLAIMS)} claims: {counts['reproduces']} reproduce, "
            f"{counts['partly']} partly"
            + (f", {counts['not testable here']} not testable here" if counts["not testable here"] else "")
            + f", {counts['does not']} do not" + (f", {counts['not run']} have no record" if counts["not run"] else "")
            + "."))
        return [summary, table(["claim (and the chapter that tests it)", "paper", "verdict", "the number that decides it"],
                               rows, [46, 6, 10, 38], ["paper-verdicts"])]


def build_records(env: Any, chapters: list[str]) -> dict[str, dict]:
    """This build's records of the given chapters, judged now against the current claims (a page that reads them is
    read again when a record, claims module, register or the papers' claims change)."""
    from .judging import rejudge
    from .paths import RECORDS_DIR, REPO_ROOT
    from .records import load_record

    env.note_dependency(str(REPO_ROOT / "lib" / "lengthgen" / "claims" / "paper.py"))
    records = {}
    for chapter in chapters:
        note_claims_dependencies(env, chapter)
        path = RECORDS_DIR / f"{chapter}.json"
        if path.exists():
            records[chapter] = rejudge(load_record(path))
    return records


def emphasized(text: str) -> nodes.paragraph:
    """A paragraph of plain text in which ``*words*`` are set in italics."""
    para = nodes.paragraph()
    for i, part in enumerate(text.split("*")):
        if part:
            para += nodes.emphasis(text=part) if i % 2 else nodes.Text(part)
    return para


class VerdictRulesDirective(SphinxDirective):
    """``{verdict-rules}``: what each verdict means and how the verdicts treat the number of checks behind them."""

    def run(self) -> list[nodes.Node]:
        from ..claims.paper import verdict_rules
        from .bookcache import toc_chapters

        return [emphasized(" ".join(verdict_rules(build_records(self.env, toc_chapters()))))]


def verdict_cell(entry: dict | None, lead: str = "") -> nodes.paragraph:
    """A verdict in its colour, then the number that decides it ('—' for a claim a version does not have)."""
    para = nodes.paragraph()
    if lead:
        para += nodes.Text(lead)
    if entry is None:
        para += nodes.Text("—")
        return para
    para += nodes.strong(text=entry["verdict"], classes=[f"verdict-{entry['verdict'].replace(' ', '-')}"])
    para += nodes.Text(f": {entry['number']}")
    return para


class ChangedVerdictsDirective(SphinxDirective):
    """``{changed-verdicts}``: the verdicts of this build that differ from the previous release's, and claims added,
    split or removed since."""

    def run(self) -> list[nodes.Node]:
        from .. import __version__
        from ..claims.paper import RELEASES_DIR, previous_release, verdict_changes
        from .bookcache import toc_chapters

        records = build_records(self.env, toc_chapters())
        for path in RELEASES_DIR.glob("*.json"):
            self.env.note_dependency(str(path))
        before = previous_release(__version__)
        if before is None:
            return [nodes.paragraph(text=f"Version {__version__} is the first release: no verdict has changed.")]
        rows = verdict_changes(records, before)

        def count(n: int, noun: str) -> str:
            return f"{n} {noun}{'' if n == 1 else 's'}"

        moved = sum(1 for r in rows if r["was"] and r["now"] and r["was"]["verdict"] != r["now"]["verdict"])
        split = {r["was"]["claim"] for r in rows if r["note"].startswith("split")}
        parts = [count(moved, "verdict") + " changed"]
        parts += [f"{count(len(split), 'claim')} split into {count(sum(r['note'].startswith('split') for r in rows), 'row')}"]
        parts += [f"{count(sum(r['note'] == kind for r in rows), 'row')} {kind}" for kind in ("new", "removed")]
        parts = [part for part in parts if not part.startswith("0 ")]
        lede = nodes.paragraph(text=(
            f"Since version {before['version']} (commit {before['commit'][:10]}): " + "; ".join(parts) + ". This "
            "build's verdicts are judged from its records; the previous version's are those it published."))
        shown = [[("", r["key"]), r["claim"] + (f" ({r['note']})" if r["note"] else ""),
                  verdict_cell(r["was"], "the claim before the split: " if r["note"].startswith("split") else ""),
                  verdict_cell(r["now"])] for r in rows]
        return [lede, table(["claim", "in words", f"version {before['version']}", f"version {__version__} (this build)"],
                            shown, [14, 30, 28, 28], ["changed-verdicts"])]


class HeadlineFigureDirective(SphinxDirective):
    """``{headline-figure}``: RoPE against APE beyond the training length, one head and one network, drawn now from
    this build's records (:mod:`lengthgen.book.headline`), inline so the page reads offline."""

    def run(self) -> list[nodes.Node]:
        from html import escape

        from .headline import HEAD, NETWORK, headline_figure

        drawn = headline_figure(build_records(self.env, [HEAD, NETWORK]))
        if drawn is None:
            logger.warning(f"no headline figure: the records of {HEAD} and {NETWORK} lack their curves; run make book",
                           location=self.get_location())
            return []
        svg, caption = drawn
        html = f'<figure class="headline-figure">{svg}<figcaption>{escape(caption)}</figcaption></figure>'
        return [nodes.raw("", html, format="html")]


def revision_rows(chapters: list[str]) -> list[list[Any]]:
    """Every revision of every chapter's claims, in book order: chapter, claim, what changed and why."""
    from ..claims import register_of

    return [[chapter_link(chapter), ("", name), rev["why"] + (f" (was: {rev['was']})" if rev.get("was") else "")]
            for chapter in chapters for name, entry in register_of(chapter).items()
            for rev in entry.get("revisions") or []]


class RevisionsDirective(SphinxDirective):
    """``{claims-revisions}``: every revision in every chapter's register, one row each."""

    def run(self) -> list[nodes.Node]:
        from ..claims import register_path
        from .bookcache import toc_chapters

        chapters = toc_chapters()
        for chapter in chapters:
            self.env.note_dependency(str(register_path(chapter)))
        return [table(["chapter", "claim", "revision"], revision_rows(chapters), [12, 18, 70], ["claims-revisions"])]


def verdict_role(name: str, rawtext: str, text: str, lineno: int, inliner: Any, options: dict | None = None,
                 content: list | None = None) -> tuple[list[nodes.Node], list[nodes.system_message]]:
    """``{verdict}`claim``` (or ``chapter:claim``): a claim's verdict judged now from its chapter's record, in words, for
    prose such as a page's verdict box; ``{verdict}`claim:value``` gives the measured value instead."""
    env = inliner.document.settings.env
    parts = text.split(":")
    what = parts.pop() if parts[-1] == "value" else "verdict"
    chapter, claim = (parts[0], parts[1]) if len(parts) == 2 else (chapter_of(env.docname), parts[0])
    note_claims_dependencies(env, chapter)
    rows, problems = judged_record(chapter)
    row = next((r for r in rows if r["name"] == claim), None)
    if row is None:
        why = problems[-1] if not rows and problems else f"{claim!r} is not a registered claim of {chapter}"
        message = inliner.reporter.error(f"{{verdict}}`{text}`: {why}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    for problem in problems:
        if f"{claim!r}" in problem:
            logger.warning(problem, location=(env.docname, lineno))
    return [nodes.strong(text=row["measured"] if what == "value" else row["verdict"])], []


def add_static(app: Sphinx) -> None:
    """The book's own style sheet (the landing page's verdict table)."""
    app.config.html_static_path.append(str(Path(__file__).parent / "static"))


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("builder-inited", add_static)
    app.add_css_file("lengthgen.css")
    app.add_directive("claims", ClaimsDirective)
    app.add_directive("claims-revisions", RevisionsDirective)
    app.add_directive("claims-overview", OverviewDirective)
    app.add_directive("paper-verdicts", PaperVerdictsDirective)
    app.add_directive("verdict-rules", VerdictRulesDirective)
    app.add_directive("changed-verdicts", ChangedVerdictsDirective)
    app.add_directive("headline-figure", HeadlineFigureDirective)
    app.add_role("verdict", verdict_role)
    return {"parallel_read_safe": False, "parallel_write_safe": True}  # records are written while pages are read
