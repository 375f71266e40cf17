"""What each notification channel may receive of a tenant string: escaped for its markup, bounded for its limits.

An alert's summary and details carry names tenants chose (transactional ids, topics, group ids).
Sent raw, a transactional id ``<!channel> <https://evil.example|sign in again>`` pings a whole Slack
channel and shows a disguised link to on-call; a 32,767-byte id makes PagerDuty refuse the page
(400, never retried) or a webhook receiver choke.  So every channel gets its own rendering:

* **Slack mrkdwn**: ``&``, ``<`` and ``>`` become ``&amp;``, ``&lt;``, ``&gt;``, the three
  characters Slack's formatting reference says must be escaped (links, mentions and dates are
  all written between ``<`` and ``>``, so no tenant text can form one); a bare ``@channel``,
  ``@here`` or ``@everyone`` gets a word joiner after the ``@`` so it is not a mention even where
  ``link_names`` is on; a backtick inside a code span becomes ``ˋ`` so the span cannot be closed
  early; controls (newlines: a forged extra line) become U+FFFD.  Values are bounded and the
  section stays under Slack's 3,000 characters.
* **PagerDuty Events API v2**: ``payload.summary`` at most 1,024 characters and ``dedup_key`` at
  most 255 (PagerDuty's documented limits, counted as UTF-16 units to be safe), the whole event
  under its 512 KB limit by bounding ``custom_details`` (strings, list lengths, depth) to a budget.
* **Webhook JSON**: values keep their exact text (JSON escapes controls itself), lone surrogates
  (undecodable bytes) become U+FFFD so the body is valid UTF-8, NaN and infinities become null
  (they are not JSON), and strings, lists and the body are bounded.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from txnwatch.core.textbounds import MARK, TAIL_CHARS, bound_chars, clean, digest, one_line

SLACK_SECTION_MAX = 3000  # Slack: a section block's text
SLACK_SUMMARY_MAX = 1000
SLACK_VALUE_MAX = 300
PAGERDUTY_SUMMARY_MAX = 1024
PAGERDUTY_FIELD_MAX = 255  # component, group, class: short by nature; PagerDuty documents no limit, so ours
PAGERDUTY_DETAILS_BUDGET = 64 * 1024  # bytes of custom_details JSON, far under the 512 KB event limit
WEBHOOK_STRING_MAX = 4096
WEBHOOK_BODY_BUDGET = 256 * 1024
LIST_ITEMS_MAX = 100
DEPTH_MAX = 6

_MENTION = re.compile(r"@(channel|here|everyone)\b", re.IGNORECASE)
_SURROGATES = re.compile("[\ud800-\udfff]")
_WORD_JOINER = "\u2060"


def utf16_len(text: str) -> int:
    """Length as JavaScript and most JSON services count it: characters past U+FFFF take two units."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def fit_utf16(text: str, limit: int) -> str:
    """:func:`~txnwatch.core.textbounds.one_line`, with ``limit`` counted in UTF-16 units."""
    out = one_line(text, limit)
    if utf16_len(out) <= limit:
        return out
    cleaned = clean(text)
    room, units, end = limit - TAIL_CHARS, 0, 0
    for end, ch in enumerate(cleaned):  # noqa: B007  # the index where the head stops
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > room:
            break
    return cleaned[:end] + MARK + digest(cleaned)


# --- Slack ------------------------------------------------------------------------------------------------


def slack_escape(text: str) -> str:
    """Slack's three control characters as entities, and no bare @channel/@here/@everyone."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MENTION.sub(lambda m: "@" + _WORD_JOINER + m.group(1), escaped)


def slack_text(text: object, limit: int) -> str:
    """A tenant string as plain mrkdwn text: one line, bounded, escaped."""
    return slack_escape(one_line(str(text), limit))


def slack_code(text: object, limit: int = SLACK_VALUE_MAX) -> str:
    """A tenant string inside a code span: as :func:`slack_text`, and no backtick to close the span early."""
    return "`" + slack_text(text, limit).replace("`", "ˋ") + "`"


def slack_lines(lines: list[str], limit: int = SLACK_SECTION_MAX) -> str:
    """Whole lines up to ``limit`` characters, then how many were left out (a cut line would break an entity)."""
    room = limit - 24  # kept for the "… N more" line
    kept: list[str] = []
    size = 0
    for i, line in enumerate(lines):
        if size + len(line) > room:
            kept.append(f"… {len(lines) - i} more")
            break
        kept.append(line)
        size += len(line) + 1
    return "\n".join(kept)


# --- JSON (PagerDuty custom_details, webhook bodies) -----------------------------------------------------


def json_safe(text: str) -> str:
    """Exact text, except lone surrogates (undecodable bytes), which no UTF-8 body can carry."""
    return _SURROGATES.sub("\ufffd", text)


def bounded_json(value: Any, *, string_max: int, items_max: int = LIST_ITEMS_MAX, depth: int = DEPTH_MAX,
                 text: Callable[[str], str] = json_safe) -> Any:
    """A JSON-able copy of ``value`` with every string bounded, lists and mappings cut to ``items_max``
    entries (the rest counted in a last entry), nesting cut at ``depth``, NaN and infinities as null."""
    if isinstance(value, str):
        return bound_chars(text(value), string_max)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth <= 0:
        return bound_chars(text(json.dumps(value, default=str)[:string_max * 2]), string_max)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for i, (key, item) in enumerate(value.items()):
            if i == items_max:
                out["…"] = f"{len(value) - items_max} more"
                break
            out[bound_chars(text(str(key)), string_max)] = bounded_json(
                item, string_max=string_max, items_max=items_max, depth=depth - 1, text=text)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        kept = [bounded_json(item, string_max=string_max, items_max=items_max, depth=depth - 1, text=text)
                for item in items[:items_max]]
        return kept + ([f"… {len(items) - items_max} more"] if len(items) > items_max else [])
    return bound_chars(text(str(value)), string_max)


def within_budget(value: Any, budget: int, *, string_max: int, text: Callable[[str], str] = json_safe) -> Any:
    """:func:`bounded_json` with tighter bounds until its JSON fits ``budget`` bytes; at worst a note saying so."""
    for strings, items in ((string_max, LIST_ITEMS_MAX), (256, 20), (64, 5)):
        bounded = bounded_json(value, string_max=min(string_max, strings), items_max=items, text=text)
        if len(json.dumps(bounded, ensure_ascii=False).encode()) <= budget:
            return bounded
    return {"truncated": f"details over {budget} bytes left out"}


def pagerduty_details(details: Mapping[str, Any]) -> dict[str, Any]:
    """custom_details for a page: controls replaced (on-call reads them), bounded to the budget."""
    bounded = within_budget(dict(details), PAGERDUTY_DETAILS_BUDGET, string_max=PAGERDUTY_SUMMARY_MAX, text=clean)
    return bounded if isinstance(bounded, dict) else {"details": bounded}
