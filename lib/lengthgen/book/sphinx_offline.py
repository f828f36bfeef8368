"""A Sphinx extension that keeps the rendered book readable with no network.

The book's readers often read it offline (on a plane, behind a firewall), and so does the test
suite. MathJax is served from the book itself (``sphinx-mathjax-offline``); this extension
removes what would still reach for the network or raise errors in a browser:

* the live-code (Thebe) scripts, which load their library from a CDN and are included twice
  by Jupyter Book 1 (a console error on every page); the book has no live code;
* the theme's empty colour-mode default, which logs an error on every page: it is set to light.
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx


def _is_thebe(asset: Any) -> bool:
    filename = str(getattr(asset, "filename", asset) or "")
    body = str(getattr(asset, "attributes", {}).get("body", "") if hasattr(asset, "attributes") else "")
    return "thebe" in filename.lower() or "THEBE_JS_URL" in body


def drop_live_code_assets(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """Remove Thebe's scripts and stylesheet from every page."""
    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [asset for asset in context[key] if not _is_thebe(asset)]


def light_mode_by_default(app: Sphinx, config: Any) -> None:
    context = dict(config.html_context or {})
    context.setdefault("default_mode", "light")
    config.html_context = context


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("config-inited", light_mode_by_default)
    app.connect("html-page-context", drop_live_code_assets, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
