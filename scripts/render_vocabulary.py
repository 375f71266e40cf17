"""Rewrite the generated Vocabulary section of docs/metrics.md from txnwatch.core.vocabulary.

Run after changing a hanging reason or an alert; tests/unit/test_vocabulary.py fails while it is stale.
"""

from __future__ import annotations

import pathlib
import re
import sys

from txnwatch.core.vocabulary import markdown

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "metrics.md"
SECTION = re.compile(r"(<!-- vocabulary:begin -->\n).*?(<!-- vocabulary:end -->)", re.S)


def render(text: str) -> str:
    if not SECTION.search(text):
        raise SystemExit(f"{DOC.name} has no <!-- vocabulary:begin/end --> markers")
    return SECTION.sub(lambda m: m.group(1) + markdown() + m.group(2), text)


if __name__ == "__main__":
    new = render(DOC.read_text())
    changed = new != DOC.read_text()
    DOC.write_text(new)
    print(f"{DOC.name}: {'updated' if changed else 'already current'}", file=sys.stderr)
