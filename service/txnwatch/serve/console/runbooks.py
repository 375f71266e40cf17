"""docs/runbooks.md as the console serves it at /console/runbooks, when no ``console.runbook_url`` is set.

A small Markdown subset (headings, fenced code, paragraphs, lists, inline code, bold, tables as text)
is all the runbooks use; anchors are GitHub's (lower-cased heading), the ones
:mod:`txnwatch.core.vocabulary` links to.  The file is read from the source tree, or from the copy
``python -m txnwatch.serve.console.assets`` puts beside the vendored assets for installed wheels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from markupsafe import Markup, escape

from txnwatch.serve.console.assets import VENDOR

CANDIDATES = (Path(__file__).resolve().parents[4] / "docs" / "runbooks.md", VENDOR / "runbooks.md")


@dataclass(frozen=True)
class Section:
    title: str
    anchor: str
    html: Markup


def _inline(text: str) -> str:
    out = str(escape(text))
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"\[([^\]]+)\]\(#([a-z0-9-]+)\)", r'<a href="#\2">\1</a>', out)


def _blocks(body: str) -> Markup:
    html: list[str] = []
    for chunk in re.split(r"(```[a-z]*\n.*?```)", body, flags=re.S):
        if chunk.startswith("```"):
            code = chunk.split("\n", 1)[1].rsplit("```", 1)[0]
            html.append(f"<pre>{escape(code)}</pre>")
            continue
        for para in (p.strip() for p in chunk.split("\n\n")):
            if not para:
                continue
            lines = para.splitlines()
            if all(line.startswith("|") for line in lines):
                html.append(f"<pre>{escape(para)}</pre>")
            elif all(line.startswith(("* ", "- ", "  ")) for line in lines):
                items = re.split(r"\n(?=[*-] )", para)
                html.append("<ul>" + "".join(f"<li>{_inline(i[2:])}</li>" for i in items) + "</ul>")
            else:
                html.append(f"<p>{_inline(para)}</p>")
    return Markup("\n".join(html))


def parse(text: str) -> list[Section]:
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    sections = [Section("Runbooks", "top", _blocks(re.sub(r"^# .*\n", "", parts[0])))]
    for title, body in zip(parts[1::2], parts[2::2], strict=False):
        anchor = re.sub(r"[^a-z0-9 -]", "", title.strip().lower()).replace(" ", "-")
        sections.append(Section(title.strip(), anchor, _blocks(body)))
    return sections


def sections() -> list[Section]:
    for path in CANDIDATES:
        if path.is_file():
            return parse(path.read_text())
    return [Section("Runbooks", "top", Markup("<p>docs/runbooks.md is not installed with this copy of txnwatch; "
                                              "set <code>console.runbook_url</code> to where you publish it.</p>"))]
