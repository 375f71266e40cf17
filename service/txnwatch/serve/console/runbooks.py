"""docs/runbooks.md as the console serves it at /console/runbooks, when no ``console.runbook_url`` is set.

Rendered by markdown-it-py (CommonMark plus tables, raw HTML escaped, never passed through), the
parser rich already brings: the page once showed literal ``[metrics.md](metrics.md)`` and ``---``
from a home-grown subset.  Sections are cut at the level-2 headings of the token stream (a ``#``
inside a code block is code, not a heading); anchors are GitHub's (lower-cased heading), the ones
:mod:`txnwatch.core.vocabulary` links to.  A link to another file of docs/ goes to the project's
rendered copy, since the console serves only this one.  The file is read from the source tree, or
from the copy ``python -m txnwatch.serve.console.assets`` puts beside the vendored assets for
installed wheels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from markupsafe import Markup

from txnwatch.alerting.pagerduty import DEFAULT_RUNBOOK_URL
from txnwatch.serve.console.assets import VENDOR

CANDIDATES = (Path(__file__).resolve().parents[4] / "docs" / "runbooks.md", VENDOR / "runbooks.md")
DOCS_URL = DEFAULT_RUNBOOK_URL.rsplit("/", 1)[0] + "/"  # where the project's docs/ are rendered


@cache
def _markdown() -> Any:
    """markdown-it, imported when the runbooks page is first rendered (not by a daemon nobody opens it on)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable("table")


@dataclass(frozen=True)
class Section:
    title: str
    anchor: str
    html: Markup


def _anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", title.strip().lower()).replace(" ", "-")


def _relink(tokens: list[Any]) -> None:
    """Relative links to other docs files point at the project's rendered docs; anchors stay on this page."""
    for token in tokens:
        for child in token.children or ():
            href = child.attrGet("href") if child.type == "link_open" else None
            if isinstance(href, str) and not href.startswith("#") and not re.match(r"^[a-z][a-z0-9+.-]*:", href):
                child.attrSet("href", DOCS_URL + href)


def parse(text: str) -> list[Section]:
    md = _markdown()
    tokens = md.parse(text)
    _relink(tokens)
    cuts = [i for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag == "h2"]
    first = next((i for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag == "h1"), None)
    intro = tokens[:cuts[0] if cuts else len(tokens)]
    if first is not None and first < len(intro):  # the page has its own title: drop the document's
        intro = intro[:first] + intro[first + 3:]
    sections = [Section("Runbooks", "top", Markup(md.renderer.render(intro, md.options, {})))]
    for n, cut in enumerate(cuts):
        title = tokens[cut + 1].content
        body = tokens[cut + 3:cuts[n + 1] if n + 1 < len(cuts) else len(tokens)]
        sections.append(Section(title.strip(), _anchor(title), Markup(md.renderer.render(body, md.options, {}))))
    return sections


def sections() -> list[Section]:
    for path in CANDIDATES:
        if path.is_file():
            return parse(path.read_text())
    return [Section("Runbooks", "top", Markup("<p>docs/runbooks.md is not installed with this copy of txnwatch; "
                                              "set <code>console.runbook_url</code> to where you publish it.</p>"))]
