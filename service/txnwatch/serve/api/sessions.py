"""Console sessions: the cookie a login sets carries a signed session id and expiry, never the read token.

Before, the cookie was the token itself: anything that read a cookie (a browser extension, a proxy
log, a shared profile) held the token for good.  Now a login issues ``v1.<expires>.<id>.<signature>``:

* the signature is HMAC-SHA256 under a key derived from the read token (HMAC of a fixed label under
  the token), so a rotated token invalidates every session at once, every API worker process and
  every replica checks the sessions of the others with the same key, and the cookie reveals
  nothing about the token;
* ``expires`` (Unix seconds) is inside the signature: a session cannot be stretched, and one whose
  expiry lies further ahead than the lifetime (``console.session_lifetime_seconds``: a forged clock,
  a key reused elsewhere, a lifetime lowered since) is refused too;
* ``id`` is 128 random bits: two sessions never share a cookie, and a log line can name a session
  without naming anything secret.

A signature cannot be taken back, so the id is also a row on the server (txnwatch.store.console_sessions):
the read guard accepts a signed cookie only while its row is neither ended (Sign out, ``txnwatch sessions
end``) nor expired (issue 38 item 5: a copied cookie worked for 12 h, and only rotating the token, which
breaks every scraper, ended it).  This module is the cookie alone: pure functions with the clock passed in.
Written with ``hmac`` rather than itsdangerous: three fields, no new dependency in the daemon's image.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from pydantic import SecretStr

COOKIE = "txnwatch_session"
#: The cookie name before sessions: it held the read token itself; a login now deletes it from the browser.
LEGACY_COOKIE = "txnwatch_read_token"
#: The lifetime of a session when none is given: ``console.session_lifetime_seconds``' default.
SESSION_TTL_S = 12 * 3600
_VERSION = "v1"
_LABEL = b"txnwatch console session v1"


def session_key(token: SecretStr) -> bytes:
    """The signing key: a function of the token, so rotating the token rotates the key."""
    return hmac.new(token.get_secret_value().encode("utf-8"), _LABEL, hashlib.sha256).digest()


def _sign(key: bytes, payload: str) -> str:
    digest = hmac.new(key, payload.encode("ascii"), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


@dataclass(frozen=True, slots=True)
class Issued:
    """A new session: the cookie's value (only URL-safe base64, digits and dots: no cookie quoting needed), its
    id (the server's row) and its expiry in Unix seconds."""

    cookie: str
    session_id: str
    expires_s: int


def issue(key: bytes, now_s: float, ttl_s: int = SESSION_TTL_S) -> Issued:
    session_id = secrets.token_urlsafe(16)
    expires_s = int(now_s) + ttl_s
    payload = f"{_VERSION}.{expires_s}.{session_id}"
    return Issued(f"{payload}.{_sign(key, payload)}", session_id, expires_s)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a cookie is: ``valid`` (signed by us, not expired: ``session_id`` names its row, which the guard
    still asks); else ``forged`` (a bad signature or shape: counted as a failed attempt) or merely expired (a
    signature of ours: the browser is sent to the login page, nobody is guessing)."""

    valid: bool
    forged: bool
    session_id: str | None = None


EXPIRED, FORGED = Verdict(False, False), Verdict(False, True)


def verify(key: bytes, value: str, now_s: float, ttl_s: int = SESSION_TTL_S) -> Verdict:
    if not value.isascii():  # the HMAC is over ASCII; a cookie of ours never holds anything else
        return FORGED
    parts = value.split(".")
    if len(parts) != 4 or parts[0] != _VERSION or not (parts[1].isascii() and parts[1].isdigit()) or len(parts[1]) > 12:
        return FORGED
    payload = ".".join(parts[:3])
    if not hmac.compare_digest(_sign(key, payload).encode("ascii"), parts[3].encode("ascii", "replace")):
        return FORGED
    expires = int(parts[1])
    if expires <= now_s or expires > now_s + ttl_s:
        return EXPIRED
    return Verdict(True, False, parts[2])


def session_id_of(key: bytes, value: str) -> str | None:
    """The id of a cookie we signed, expired or not (what logout ends); None for anything else."""
    parts = value.split(".")
    if not value.isascii() or len(parts) != 4 or parts[0] != _VERSION:
        return None
    signed = hmac.compare_digest(_sign(key, ".".join(parts[:3])).encode("ascii"), parts[3].encode("ascii", "replace"))
    return parts[2] if signed else None
