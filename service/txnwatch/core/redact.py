"""Credentials out of anything txnwatch shows: URLs keep their user and lose their password (``user:***@``).

Why one helper, applied where text leaves the process (config errors, ``config check``, log
lines, ``/api/v1`` bodies, console pages) rather than once where a URL is read: a password
reaches text by many roads: a database URL echoed by a validation error, a driver's
exception quoting its DSN, an exporter URL in a verification report, an error string stored
and shown later. ``user:***@`` keeps what an operator needs to tell two URLs apart (the
scheme, the user, the host) and nothing that lets anyone log in. The same spelling as
SQLAlchemy's ``URL.render_as_string(hide_password=True)`` and the libpq tools.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from urllib.parse import urlsplit

MASK = "***"

# scheme://user:password@host  The password may hold anything but whitespace and quotes, '@' and '/' included
# (they should be percent-encoded, yet operators paste them raw): the last '@' followed by a host and the end of
# the authority closes it, so a pasted password is masked whole rather than cut where a URL parser would cut it.
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^:@/\s'\"]*):(?P<password>[^\s'\"]*)@"
                       r"(?=[^@/\s'\"]*(?:[/\s'\"?#),;]|$))")
# libpq keyword strings, as psycopg quotes them in some errors: password=secret or password='se cret'
_KEYWORD = re.compile(r"(?P<key>\bpassword\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with every URL password replaced by ``***`` (user and host kept), and libpq ``password=``;
    then every secret a :class:`Secret` was registered for (:func:`register`), in any of its forms."""
    for secret in _registered:
        text = secret.scrub(text)
    if "@" not in text and "password" not in text.lower():
        return text
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    return _KEYWORD.sub(lambda m: f"{m['key']}{MASK}", text)


# A secret can come back in other spellings than the one configured: a receiver or a proxy echoes the
# request path in its error page (a Slack webhook URL's path *is* its credential), percent-encodes it,
# double-encodes it, or quotes it in JSON (``\/`` for ``/``, ``\u0041`` for any character).  Each
# character of a secret is matched in each of those spellings, so every mix of them is masked too.
_MIN_PART = 4
#: Path segments and query values this long, or letters and digits mixed from :data:`_TOKEN_WITH_DIGIT`
#: characters on, are credentials wherever they stand in a webhook URL (:func:`_token`).
_TOKEN_LONG = 20
_TOKEN_WITH_DIGIT = 8


def _spellings(char: str) -> str:
    """A regex matching ``char`` as itself, percent-encoded (once or twice, either case) or JSON-escaped."""
    encoded = char.encode("utf-8", "surrogatepass")
    percent = "".join(f"%(?:25)?{b:02x}" for b in encoded)
    json_escape = "".join(f"\\\\u{ord(u):04x}" for u in _utf16(char))
    forms = [re.escape(char), percent, json_escape]
    if char == "/":
        forms.append(r"\\/")
    if char == " ":
        forms.append(r"\+")
    return "(?:" + "|".join(forms) + ")"


def _utf16(char: str) -> list[str]:
    if ord(char) < 0x10000:
        return [char]
    code = ord(char) - 0x10000
    return [chr(0xD800 + (code >> 10)), chr(0xDC00 + (code & 0x3FF))]


class Secret:
    """One credential (a token, a URL holding one) and the parts of it that must never be shown, each
    matched in every spelling it can come back in (:func:`_spellings`); :meth:`scrub` masks them."""

    def __init__(self, parts: Iterable[str], mask: str = MASK, whole: str | None = None,
                 whole_mask: str | None = None) -> None:
        masks = {p: mask for p in parts if len(p) >= _MIN_PART}
        if whole:
            masks[whole] = whole_mask or mask
        self._init(masks)

    def _init(self, masks: dict[str, str]) -> None:
        self._masks = masks
        ordered = sorted(masks, key=len, reverse=True)  # the longest part first: the whole URL before its path
        self._pattern = (re.compile("|".join(f"(?P<p{i}>{''.join(_spellings(c) for c in part)})"
                                             for i, part in enumerate(ordered)), re.IGNORECASE)
                         if ordered else None)
        self._by_group = {f"p{i}": masks[part] for i, part in enumerate(ordered)}
        self.key = tuple(sorted(masks.items()))
        # The quick refusal of text that holds none of them (a log line: ~4 µs a secret instead of ~60):
        # without '%' or '\\' only the parts as themselves, in any case, can be there (a space could be a '+').
        self._plain = () if any(" " in part for part in masks) else tuple(part.lower() for part in masks)

    def long_parts(self) -> Secret:
        """This secret without the parts under :data:`_MIN_PART` characters, for :func:`register`: a
        one-letter routing key masked in every text of the process would blot out every ``k`` of every log
        line (``**********af**********a`` for ``kafka``); a notifier still scrubs its own answers whole."""
        kept = object.__new__(Secret)
        kept._init({part: m for part, m in self._masks.items() if len(part) >= _MIN_PART})
        return kept

    def scrub(self, text: str) -> str:
        if self._pattern is None:
            return text
        if "%" not in text and "\\" not in text and self._plain:  # only the parts as themselves can be there
            lowered = text.lower()
            if not any(part in lowered for part in self._plain):
                return text
        return self._pattern.sub(lambda m: self._by_group[m.lastgroup or ""], text)

    @classmethod
    def token(cls, value: str, mask: str = MASK) -> Secret:
        return cls((), whole=value, whole_mask=mask)

    @classmethod
    def url(cls, value: str, mask: str = "<webhook url>", *, answers: bool = True) -> Secret:
        """A URL whose path or query carries the credential (incoming webhooks): the whole URL, what follows
        its host, its path, the query, the userinfo, and the parts that look like a token (:func:`_token`):
        path segments and query values, and each suffix of the path from a token on.

        ``answers``: for the notifier's own answers, where a receiver echoes what it was sent, the path's
        last segment and every suffix of the path are masked too, token-like or not; the variant for
        :func:`register` (every text of the process) keeps to what cannot be an everyday word."""
        try:
            split = urlsplit(value)
        except ValueError:
            return cls((), whole=value, whole_mask=mask)
        parts: set[str] = set()
        segments = split.path.split("/")
        pairs = [pair.partition("=") for pair in split.query.split("&")] if split.query else []
        holds_token = any(_token(seg) for seg in segments) or any(_token(v) for _, _, v in pairs)
        if split.netloc and (answers or holds_token):
            parts.add(value.split(split.netloc, 1)[1])
        if split.path.strip("/") and (answers or holds_token):
            parts.add(split.path)
            for i in range(1, len(segments)):
                suffix = "/".join(segments[i:])
                if answers or any(_token(seg) for seg in segments[i:]):
                    parts.update((suffix, "/" + suffix))
            named = [seg for seg in segments if seg]
            parts.update(seg for seg in named if _token(seg) or (answers and seg == named[-1]))
        if split.query and (answers or holds_token):
            parts.add(split.query)
        parts.update(v for _, _, v in pairs if _token(v))
        if split.password:
            parts.add(split.password)
        return cls(parts - {"", "/"}, whole=value, whole_mask=mask)


def _token(part: str) -> bool:
    """A part of a URL that is a credential wherever it appears: long, or letters and digits mixed (Slack's
    T…/B…/token, Discord's id/token, Teams' GUIDs, a ``?token=`` value); never an everyday word or a date."""
    return len(part) >= _TOKEN_LONG or (len(part) >= _TOKEN_WITH_DIGIT and any(c.isdigit() for c in part)
                                        and any(c.isalpha() for c in part))


_registered: tuple[Secret, ...] = ()
_registering = threading.Lock()


def register(secret: Secret) -> None:
    """Every later :func:`redact` masks ``secret`` too (log lines, stored errors, API bodies): what the
    process holds a credential for is never shown, whoever formats the text.  Idempotent per secret; parts
    shorter than :data:`_MIN_PART` are left out (:meth:`Secret.long_parts`)."""
    global _registered
    secret = secret.long_parts()
    if not secret.key:
        return
    with _registering:
        if all(known.key != secret.key for known in _registered):
            _registered = (*_registered, secret)


def registered() -> tuple[Secret, ...]:
    """The secrets :func:`register` holds, so a caller (a test) can put them back as they were."""
    return _registered


def restore(secrets: tuple[Secret, ...]) -> None:
    global _registered
    with _registering:
        _registered = secrets


def redact_optional(text: str | None) -> str | None:
    return None if text is None else redact(text)
