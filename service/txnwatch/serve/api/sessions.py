"""Console sessions: the cookie a login sets carries a signed session id and expiry, never the read token.

Before, the cookie was the token itself: anything that read a cookie (a browser extension, a proxy
log, a shared profile) held the token for good.  Now a login issues ``v1.<expires>.<id>.<signature>``:

* the signature is HMAC-SHA256 under a key derived from the read token (HMAC of a fixed label under
  the token), so a rotated token invalidates every session at once, every API worker process and
  every replica accepts the sessions of the others without sharing any state, and the cookie reveals
  nothing about the token;
* ``expires`` (Unix seconds) is inside the signature: a session cannot be stretched, and one whose
  expiry lies further ahead than :data:`SESSION_TTL_S` (a forged clock, a key reused elsewhere) is
  refused too;
* ``id`` is 128 random bits: two sessions never share a cookie, and a log line can name a session
  without naming anything secret.

Stateless on purpose (no session table): revoking every session is rotating the token, the same
action that revokes the bearer.  Written with ``hmac`` rather than itsdangerous: three fields, no new
dependency in the daemon's image.  Pure functions with the clock passed in.
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
SESSION_TTL_S = 12 * 3600
_VERSION = "v1"
_LABEL = b"txnwatch console session v1"


def session_key(token: SecretStr) -> bytes:
    """The signing key: a function of the token, so rotating the token rotates the key."""
    return hmac.new(token.get_secret_value().encode("utf-8"), _LABEL, hashlib.sha256).digest()


def _sign(key: bytes, payload: str) -> str:
    digest = hmac.new(key, payload.encode("ascii"), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def issue(key: bytes, now_s: float, ttl_s: int = SESSION_TTL_S) -> str:
    """A new session's cookie value (only URL-safe base64, digits and dots: no cookie quoting needed)."""
    session_id = secrets.token_urlsafe(16)
    payload = f"{_VERSION}.{int(now_s) + ttl_s}.{session_id}"
    return f"{payload}.{_sign(key, payload)}"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a cookie is: ``valid``; else ``forged`` (a bad signature or shape: counted as a failed attempt)
    or merely expired (a signature of ours: the browser is sent to the login page, nobody is guessing)."""

    valid: bool
    forged: bool


VALID, EXPIRED, FORGED = Verdict(True, False), Verdict(False, False), Verdict(False, True)


def verify(key: bytes, value: str, now_s: float, ttl_s: int = SESSION_TTL_S) -> Verdict:
    parts = value.split(".")
    if len(parts) != 4 or parts[0] != _VERSION or not (parts[1].isascii() and parts[1].isdigit()) or len(parts[1]) > 12:
        return FORGED
    payload = ".".join(parts[:3])
    if not hmac.compare_digest(_sign(key, payload).encode("ascii"), parts[3].encode("ascii", "replace")):
        return FORGED
    expires = int(parts[1])
    if expires <= now_s or expires > now_s + ttl_s:
        return EXPIRED
    return VALID
