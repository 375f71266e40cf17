"""Bounds for tenant strings on their way out: a readable head and a short hash tail, never a silent cut.

Kafka lets a tenant name a transactional id or a consumer group with up to 32,767 bytes, and
those names travel into label values, pages and chat messages whose receivers have limits of
their own (Mimir refuses a series whose label value passes 2,048 bytes; PagerDuty a summary past
1,024 characters, Slack a section past 3,000).  A value over its bound keeps its head, then ``…``
and the first 8 hex digits of the SHA-256 of the whole value, so two long ids that share a head
still come out different, and the same id always comes out the same (series stay continuous,
a page names the same id in every update).
"""

from __future__ import annotations

import hashlib
import re

MARK = "…"
DIGEST_CHARS = 8
#: Characters a cut value ends with: the marker and the digest.
TAIL_CHARS = len(MARK) + DIGEST_CHARS
#: Label values on /metrics are bounded to this many UTF-8 bytes: half of Mimir's and Cortex's default
#: ``max_label_value_length`` (2,048), so a cut value with the cluster's other labels still fits.
LABEL_VALUE_MAX_BYTES = 1024

# C0/C1 controls (newlines would start a new line of a chat message), Unicode line and paragraph
# separators, zero-width and bidirectional controls ("Trojan Source": text that reads differently
# from what it is), the BOM, and lone surrogates (undecodable bytes; no UTF-8 encoder accepts them).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def digest(text: str) -> str:
    """The tail that tells cut values apart; lone surrogates are hashed too (``surrogatepass``)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_CHARS]


def bound_chars(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its head, ``…`` and a digest: ``limit`` in all."""
    if len(text) <= limit:
        return text
    if limit <= TAIL_CHARS:
        raise ValueError(f"a bound of {limit} characters leaves no room for the head")
    return text[: limit - TAIL_CHARS] + MARK + digest(text)


def bound_utf8(text: str, limit: int) -> str:
    """As :func:`bound_chars`, counted in UTF-8 bytes (what Prometheus-compatible stores count)."""
    if len(text) * 4 <= limit:  # cheap path: no character takes more than 4 bytes
        return text
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= limit:
        return text
    tail = MARK + digest(text)
    room = limit - len(tail.encode())
    if room <= 0:
        raise ValueError(f"a bound of {limit} bytes leaves no room for the head")
    head = encoded[:room].decode("utf-8", "ignore")  # a character cut in the middle is dropped whole
    return head + tail


def one_line(text: str, limit: int) -> str:
    """A tenant string made safe to show as one line: controls replaced by U+FFFD, then bounded."""
    return bound_chars(_UNSAFE.sub(REPLACEMENT, text), limit)


def clean(text: str) -> str:
    """Controls, bidirectional overrides and lone surrogates replaced by U+FFFD; nothing else changes."""
    return _UNSAFE.sub(REPLACEMENT, text)
