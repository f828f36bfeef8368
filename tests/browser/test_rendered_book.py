"""The rendered book in a real browser, offline: every page of the table of contents.

Chromium (the system's ``chromium`` when present, else Playwright's own) loads each page of
``_build/html`` with every network request refused, and the test checks what a reader sees:
no console error and no failed request; every formula typeset by the bundled MathJax (no raw
``\\(``, ``\\[`` or ``$$`` left); every figure image loaded and captioned; no raw Markdown (table
pipes, ``**``, unresolved ``{glue}``/``{ref}`` roles) and no chapter record printed as a Python object; every
internal link and anchor resolving.
A full-page screenshot of each page goes to ``_build/screenshots/`` for review.

The book is built first (``python -m lengthgen.book.bookcache build``: the cache makes this a
matter of seconds when nothing changed). Without a browser the test fails with the command that
installs one; it never skips.
"""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from lengthgen.book import bookcache
from lengthgen.book.paths import BUILD_DIR, REPO_ROOT

HTML = BUILD_DIR / "html"
SCREENSHOTS = BUILD_DIR / "screenshots"
INSTALL = "apt-get install -y chromium   (or, without root: python -m playwright install chromium)"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
RAW_MARKDOWN = [
    (re.compile(r"^\s*\|.*\|\s*$", re.M), "a Markdown table row"),
    (re.compile(r"\*\*\S"), "Markdown bold markers"),
    (re.compile(r"\{(glue|glue:text|glue:figure|ref|numref|eq|cite|doc)\}"), "an unresolved MyST role"),
    (re.compile(r"\\\(|\\\[|\$\$"), "raw TeX (MathJax did not typeset it)"),
    (re.compile(r"ChapterRecord\("), "a chapter's record printed as a Python object"),
]


def browser_executable() -> str | None:
    """The system Chromium, else Playwright's own browser if it is installed, else None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        path = p.chromium.executable_path
    return path if path and Path(path).exists() else None


@pytest.fixture(scope="module")
def built_book() -> Path:
    code = bookcache.build()
    assert code == 0, "the book does not build (see the output above)"
    return HTML


def toc_pages() -> list[str]:
    """Every page of the table of contents, as paths relative to ``_build/html``."""
    return [f"{page}.html" for page in bookcache.toc_files(REPO_ROOT)]


class Anchors(HTMLParser):
    """Every ``id`` and ``name`` in a page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in ("id", "name") and value:
                self.ids.add(value)


def anchors_of(page: Path, cache: dict[Path, set[str]]) -> set[str]:
    if page not in cache:
        parser = Anchors()
        parser.feed(page.read_text(errors="replace"))
        cache[page] = parser.ids
    return cache[page]


@pytest.fixture(scope="module")
def browser(built_book: Path):
    executable = browser_executable()
    if executable is None:
        pytest.fail(f"no Chromium found for the browser test; install one with: {INSTALL}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.mark.parametrize("page_path", toc_pages())
def test_page_reads_offline(browser, built_book: Path, page_path: str) -> None:
    path = built_book / page_path
    assert path.exists(), f"{page_path} was not built"
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    refused: list[str] = []

    def refuse_network(route) -> None:  # noqa: ANN001 - Playwright's route object
        url = route.request.url
        if url.startswith(("file:", "data:", "blob:", "about:")):
            route.continue_()
        else:
            refused.append(url)
            route.abort()

    context.route("**/*", refuse_network)
    page = context.new_page()
    errors: list[str] = []
    failed: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.goto(path.as_uri(), wait_until="load")
    page.wait_for_function("() => !window.MathJax || (window.MathJax.startup && window.MathJax.startup.promise)", timeout=20000)
    page.evaluate("() => window.MathJax && window.MathJax.startup.promise")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{Path(page_path).stem}.png"), full_page=True)

    assert not refused, f"{page_path} asked for the network: {refused[:5]}"
    assert not failed, f"{page_path}: failed requests {failed[:5]}"
    assert not errors, f"{page_path}: console errors {errors[:5]}"

    blocks = page.locator("main .output.stderr, main .output.traceback").count()
    assert blocks == 0, f"{page_path} shows the reader {blocks} stderr or traceback block(s)"

    main = page.locator("main")
    text = main.inner_text()
    for pattern, what in RAW_MARKDOWN:
        match = pattern.search(text)
        assert match is None, f"{page_path} shows {what}: {text[max(0, match.start() - 60):match.end() + 60]!r}"
    if "$" in path.read_text() or "\\(" in path.read_text():
        assert page.locator("mjx-container").count() > 0, f"{page_path} has formulas but MathJax typeset none"

    images = page.eval_on_selector_all("main img", "imgs => imgs.map(i => [i.getAttribute('src'), i.naturalWidth])")
    assert all(width > 0 for _, width in images), f"{page_path}: images that did not load {images}"
    figures = page.eval_on_selector_all(
        "main figure", "figs => figs.map(f => [!!f.querySelector('img'), (f.querySelector('figcaption') || {}).innerText || ''])")
    for has_image, caption in figures:
        assert not has_image or caption.strip(), f"{page_path}: a figure without a caption"
    loose = page.eval_on_selector_all("main img", "imgs => imgs.filter(i => !i.closest('figure')).length")
    assert loose == 0, f"{page_path}: {loose} image(s) outside a captioned figure"

    hrefs = page.eval_on_selector_all("main a[href]", "links => links.map(a => a.getAttribute('href'))")
    cache: dict[Path, set[str]] = {}
    for href in hrefs:
        parts = urlsplit(href)
        if parts.scheme or href.startswith("mailto:"):
            continue
        target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
        assert target.exists(), f"{page_path}: link to a missing page {href}"
        if parts.fragment and target.suffix == ".html":
            assert unquote(parts.fragment) in anchors_of(target, cache), f"{page_path}: link to a missing anchor {href}"
    context.close()


def test_the_landing_page_shows_every_verdict_above_the_fold(browser, built_book: Path) -> None:
    """On a laptop screen (1440 x 900) the lede and the whole verdict table show without scrolling, one verdict per
    claim of the two papers."""
    from lengthgen.claims.paper import PAPER_CLAIMS, VERDICTS

    context = browser.new_context(viewport={"width": 1440, "height": 900})
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(("file:", "data:")) else route.abort())
    page = context.new_page()
    page.goto((built_book / f"{bookcache.toc_files(REPO_ROOT)[0]}.html").as_uri(), wait_until="load")
    table = page.locator("main table.paper-verdicts")
    assert table.count() == 1, "the landing page has no verdict table"
    box = table.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 900, f"the verdict table ends at {box} on a 900-pixel screen"
    verdicts = page.eval_on_selector_all("main table.paper-verdicts tbody tr td:nth-child(3)",
                                         "cells => cells.map(c => c.innerText.trim())")
    assert len(verdicts) == len(PAPER_CLAIMS) and set(verdicts) <= set(VERDICTS), verdicts
    context.close()
