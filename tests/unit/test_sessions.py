"""Console session cookies (issue 23 item 8): signed id + expiry, never the token; a rotated token ends them all.

The server's row of each session (ended by a Sign out or "end every session"): tests/faults/test_console_sessions.py.
"""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from txnwatch.serve.api import sessions
from txnwatch.serve.api.sessions import EXPIRED, FORGED, SESSION_TTL_S, issue, session_id_of, session_key, verify

TOKEN = SecretStr("r34d-t0ken")
NOW = 1_764_000_000.0


def test_a_session_is_valid_until_it_expires() -> None:
    key = session_key(TOKEN)
    issued = issue(key, NOW)
    cookie = issued.cookie
    assert verify(key, cookie, NOW).valid and verify(key, cookie, NOW).session_id == issued.session_id
    assert verify(key, cookie, NOW + SESSION_TTL_S - 1).valid
    assert verify(key, cookie, NOW + SESSION_TTL_S) == EXPIRED  # expired: back to the login, not a guess
    assert verify(key, cookie, NOW + 10 * SESSION_TTL_S) == EXPIRED


def test_the_cookie_reveals_neither_the_token_nor_the_key() -> None:
    key = session_key(TOKEN)
    cookie = issue(key, NOW).cookie
    assert TOKEN.get_secret_value() not in cookie
    assert key.hex() not in cookie and key not in cookie.encode()
    assert cookie.startswith(f"v1.{int(NOW) + SESSION_TTL_S}.")
    assert set(cookie) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def test_two_logins_get_two_sessions() -> None:
    key = session_key(TOKEN)
    first, second = issue(key, NOW), issue(key, NOW)
    assert first.cookie != second.cookie and first.session_id != second.session_id


def test_a_rotated_token_ends_every_session() -> None:
    cookie = issue(session_key(TOKEN), NOW).cookie
    assert verify(session_key(SecretStr("r34d-t0ken-2")), cookie, NOW) == FORGED


def test_a_session_that_claims_more_than_the_lifetime_is_refused() -> None:
    """Signed by us with a longer lifetime (a key shared with a looser deployment, a clock far behind)."""
    key = session_key(TOKEN)
    assert verify(key, issue(key, NOW, ttl_s=10 * SESSION_TTL_S).cookie, NOW) == EXPIRED


def test_a_lowered_lifetime_ends_the_longer_sessions_signed_before() -> None:
    key = session_key(TOKEN)
    cookie = issue(key, NOW, ttl_s=SESSION_TTL_S).cookie
    assert verify(key, cookie, NOW, ttl_s=3600) == EXPIRED
    assert verify(key, issue(key, NOW, ttl_s=3600).cookie, NOW + 3599, ttl_s=3600).valid


def test_logout_finds_the_id_of_an_expired_cookie_but_not_of_a_forged_one() -> None:
    key = session_key(TOKEN)
    issued = issue(key, NOW)
    assert session_id_of(key, issued.cookie) == issued.session_id  # expired or not: ours
    assert session_id_of(session_key(SecretStr("other")), issued.cookie) is None
    assert session_id_of(key, _resigned(issued.cookie, session_id="x" * 22)) is None
    assert session_id_of(key, "v1.1.\u00e9.x") is None


def _resigned(cookie: str, **change: str) -> str:
    version, expires, session_id, signature = cookie.split(".")
    parts = {"version": version, "expires": expires, "session_id": session_id, "signature": signature, **change}
    return ".".join(parts[k] for k in ("version", "expires", "session_id", "signature"))


@pytest.mark.parametrize("tamper", [
    pytest.param(lambda c: _resigned(c, expires=str(int(c.split(".")[1]) + 3600)), id="stretched-expiry"),
    pytest.param(lambda c: _resigned(c, session_id="x" * 22), id="other-id"),
    pytest.param(lambda c: _resigned(c, signature=c.split(".")[3][:-1] + ("A" if c[-1] != "A" else "B")),
                 id="flipped-signature"),
    pytest.param(lambda c: _resigned(c, version="v2"), id="other-version"),
    pytest.param(lambda c: _resigned(c, expires="²" * 3), id="unicode-digits"),
    pytest.param(lambda c: _resigned(c, expires="9" * 40), id="huge-expiry"),
    pytest.param(lambda c: c + ".x", id="extra-part"),
    pytest.param(lambda c: c.rsplit(".", 1)[0], id="no-signature"),
    pytest.param(lambda c: "r34d-t0ken", id="the-token-itself"),
    pytest.param(lambda c: "", id="empty"),
    pytest.param(lambda c: "v1.1.2.ü", id="non-ascii-signature"),
    pytest.param(lambda c: _resigned(c, session_id="é" * 22), id="non-ascii-id"),
])
def test_anything_we_did_not_sign_is_forged(tamper: object) -> None:
    key = session_key(TOKEN)
    cookie = issue(key, NOW).cookie
    assert callable(tamper)
    assert verify(key, tamper(cookie), NOW) == FORGED


def test_the_key_depends_only_on_the_token() -> None:
    """Every API worker process and every replica derives the same key: a session works on all of them."""
    assert session_key(SecretStr("r34d-t0ken")) == session_key(TOKEN)
    assert sessions.COOKIE != sessions.LEGACY_COOKIE
