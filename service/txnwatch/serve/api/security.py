"""One read-token model for everything that reveals cluster data.

The API, /metrics (transactional ids, topics and groups are labels there), /openapi.json,
/docs, the console: with ``api.read_token`` set, each needs the token.  The check is one
ASGI middleware, :class:`ReadTokenGuard`, deny by default: a route added later is covered
without anyone remembering to, and only the paths listed in :data:`OPEN_PATHS` (the
Kubernetes probes, which must work without a secret) and :data:`OWN_AUTH_PREFIXES` (the
admin action, which has its own token) pass without it.

The token is accepted as ``Authorization: Bearer <token>`` (API clients, Prometheus'
``bearer_token``/ServiceMonitor ``bearerTokenSecret``) or as the session :data:`COOKIE` a browser
gets from the login page (txnwatch.serve.api.sessions: signed, expiring, never the token itself), while
the session's row on the server (txnwatch.store.console_sessions) says it was not ended: one read of the
database per request that comes with a cookie, in a worker thread; bearer requests never touch it.  Tokens
are compared as bytes in constant time (the header's bytes as sent, the configured token's as
configured: txnwatch.core.config.token_problem keeps it visible ASCII), so a token cannot be guessed
byte by byte from response times; an empty configured token matches nothing.  Each wrong credential
is counted against its client (txnwatch.serve.api.throttle), which is answered 429 after too many.

:func:`require_reader` is the same check as a FastAPI dependency: routers declare it so
the OpenAPI document shows the bearer scheme; it never disagrees with the middleware (it trusts the
guard's mark on the request rather than reading the session's row a second time).
"""

from __future__ import annotations

import enum
import hmac
import json
import time
from collections.abc import Callable, Iterable, Mapping
from http.cookies import SimpleCookie
from typing import Annotated, NamedTuple
from urllib.parse import quote

from fastapi import HTTPException, Request, Security, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import SecretStr
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from txnwatch.core.epoch import from_ms
from txnwatch.runtime.lifecycle import Runtime
from txnwatch.serve.api import sessions
from txnwatch.serve.api.sessions import COOKIE, SESSION_TTL_S
from txnwatch.serve.api.throttle import AuthThrottle, client_key
from txnwatch.store import console_sessions

OPEN_PATHS: frozenset[str] = frozenset({"/healthz", "/readyz"})
OWN_AUTH_PREFIXES: tuple[str, ...] = ("/api/v1/admin/",)
DENIED = "read token missing or wrong: send 'Authorization: Bearer <api.read_token>'"
CHALLENGE = 'Bearer realm="txnwatch"'
#: The guard's mark on a request it let through with a read credential (in the ASGI scope's ``state``).
READER_CHECKED = "txnwatch_reader_checked"
SESSION_UNCHECKED = "the console session cannot be checked: database unreachable; retry shortly (a bearer token works)"

bearer = HTTPBearer(auto_error=False, scheme_name="readToken",
                    description="Needed only when `api.read_token` is configured.")


def token_matches(expected: SecretStr, offered: bytes) -> bool:
    """Constant-time comparison of bytes; an empty configured token (refused by the config) never matches."""
    secret = expected.get_secret_value().encode("utf-8")
    return bool(secret) and hmac.compare_digest(offered, secret)


def bearer_token(authorization: bytes | None) -> bytes | None:
    """The token of an ``Authorization: Bearer <token>`` header, as the bytes sent; None for another scheme."""
    scheme, _, offered = (authorization or b"").partition(b" ")
    return offered.strip() if scheme.lower() == b"bearer" and offered.strip() else None


class Check(enum.Enum):
    """A request's read credential: good, absent (or an expired session: a browser to send to the login
    page), or wrong (a bearer that does not match, a cookie we did not sign: someone guessing)."""

    OK = "ok"
    ABSENT = "absent"
    WRONG_BEARER = "wrong bearer token"
    FORGED_COOKIE = "session cookie not signed with the current token"


class Credential(NamedTuple):
    """A request's read credential as its bytes say; ``session_id`` is set for a signed, unexpired cookie,
    which is good only while the server's row of that session is live (:func:`session_live`)."""

    check: Check
    session_id: str | None = None


def read_credential(expected: SecretStr, authorization: bytes | None, cookie: str | None, now_s: float,
                    lifetime_s: int = SESSION_TTL_S) -> Credential:
    """The bearer header if there is one, else the session cookie (its signature and expiry)."""
    offered = bearer_token(authorization)
    if offered is not None:
        return Credential(Check.OK if token_matches(expected, offered) else Check.WRONG_BEARER)
    if not cookie:
        return Credential(Check.ABSENT)
    verdict = sessions.verify(sessions.session_key(expected), cookie, now_s, lifetime_s)
    if verdict.valid:
        return Credential(Check.OK, verdict.session_id)
    return Credential(Check.FORGED_COOKIE if verdict.forged else Check.ABSENT)


def check_reader(expected: SecretStr, authorization: bytes | None, cookie: str | None, now_s: float,
                 lifetime_s: int = SESSION_TTL_S) -> Check:
    """:func:`read_credential`'s verdict on the bytes alone (a cookie's row not asked)."""
    return read_credential(expected, authorization, cookie, now_s, lifetime_s).check


def session_live(runtime: Runtime, session_id: str, now_s: float) -> bool:
    """The session's row says it may be used (blocking: one indexed read)."""
    with runtime.read_sessions() as session:
        return console_sessions.is_live(session, session_id, now=from_ms(now_s * 1000))


async def checked(runtime: Runtime, credential: Credential, now_s: float) -> Check:
    """The credential's check, with a cookie's session asked of the server: an ended or unknown session is no
    credential (the browser goes to the login page; nobody guessed).  Raises SQLAlchemyError."""
    if credential.session_id is None:
        return credential.check
    live = await run_in_threadpool(session_live, runtime, credential.session_id, now_s)
    return Check.OK if live else Check.ABSENT


def is_open(path: str, open_paths: Iterable[str] = OPEN_PATHS,
            own_auth: Iterable[str] = OWN_AUTH_PREFIXES) -> bool:
    return path in set(open_paths) or any(path.startswith(p) for p in own_auth)


def too_many(retry_after_s: int) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """The 429 every door answers once a client failed too often: status, headers, JSON body."""
    body = json.dumps({"detail": f"too many failed authentications from this client; retry in {retry_after_s}s"})
    return 429, [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                 (b"retry-after", str(retry_after_s).encode())], body.encode()


class ReadTokenGuard:
    """Deny-by-default read token for every HTTP path but ``open_paths`` and ``own_auth`` prefixes.

    ``open_prefixes`` lets a part of the app open more (a login page, static assets);
    ``login_path``, if set, sends a browser (``Accept: text/html``) that lacks the token to
    that page with ``?next=`` instead of answering 401.
    """

    def __init__(self, app: ASGIApp, *, open_paths: Iterable[str] = OPEN_PATHS,
                 open_prefixes: Iterable[str] = (), own_auth: Iterable[str] = OWN_AUTH_PREFIXES,
                 login_path: str | None = None, clock: Callable[[], float] = time.time) -> None:
        """``clock`` (Unix seconds) is the one a session's expiry is checked against: create_app passes the
        app's, which the login signs with."""
        self.app = app
        self.open_paths = frozenset(open_paths)
        self.open_prefixes = tuple(open_prefixes)
        self.own_auth = tuple(own_auth)
        self.login_path = login_path
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path in self.open_paths or path.startswith(self.open_prefixes):
            await self.app(scope, receive, send)
            return
        state = scope["app"].state  # create_app sets both: a guard without them fails (500), never opens
        throttle: AuthThrottle = state.auth_throttle
        if path.startswith(self.own_auth):
            # The admin action checks its own token (and audits); a client throttled for failing it is turned
            # away here, before routing, body parsing and a database session (2.3 -> 0.7 ms CPU a request).
            retry_after = throttle.blocked(_client(scope), "admin")
            if retry_after is not None:
                await _answer(send, *too_many(retry_after))
                return
            await self.app(scope, receive, send)
            return
        expected: SecretStr | None = state.runtime.settings.api.read_token
        if expected is None:
            await self.app(scope, receive, send)
            return
        client = _client(scope)
        retry_after = throttle.blocked(client, "read")
        if retry_after is not None:
            await _answer(send, *too_many(retry_after))
            return
        headers = _headers(scope)
        now_s = self.clock()
        runtime: Runtime = state.runtime
        credential = read_credential(expected, headers.get(b"authorization"), _cookie(headers.get(b"cookie")), now_s,
                                     runtime.settings.console.session_lifetime_seconds)
        try:
            check = await checked(runtime, credential, now_s)
        except SQLAlchemyError:  # fail closed: a session that cannot be checked is not accepted
            body = json.dumps({"detail": SESSION_UNCHECKED}).encode()
            await _answer(send, 503, [(b"content-type", b"application/json"), (b"retry-after", b"5"),
                                      (b"content-length", str(len(body)).encode())], body)
            return
        if check is Check.OK:
            scope.setdefault("state", {})[READER_CHECKED] = True
            await self.app(scope, receive, send)
            return
        if check is not Check.ABSENT:
            throttle.failed(client, "read", check.value)
        if self.login_path and b"text/html" in headers.get(b"accept", b""):
            target = self.login_path + "?next=" + quote(path, safe="/")
            await _answer(send, 303, [(b"location", target.encode()), (b"content-length", b"0")], b"")
            return
        body = json.dumps({"detail": DENIED}).encode()
        await _answer(send, 401, [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                  (b"www-authenticate", CHALLENGE.encode())], body)


async def _answer(send: Send, code: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _client(scope: Scope) -> str:
    return client_key((scope.get("client") or ("",))[0])


def _headers(scope: Scope) -> Mapping[bytes, bytes]:
    return {k.lower(): v for k, v in scope.get("headers", [])}


def _cookie(header: bytes | None) -> str | None:
    if not header:
        return None
    try:
        morsel = SimpleCookie(header.decode("latin-1")).get(COOKIE)
    except Exception:  # a malformed Cookie header is no session, not an error
        return None
    return morsel.value if morsel is not None else None


async def require_reader(request: Request,
                         credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)]) -> None:
    """The guard's check as a dependency (async, no thread hop); documents the scheme in OpenAPI.

    Counts nothing: the guard in front of every route already counted this request's failure.  A request the
    guard let through with a credential carries its mark; one without (an app built without the guard) is
    checked here in full, a cookie's session row included."""
    runtime: Runtime = request.app.state.runtime
    token = runtime.settings.api.read_token
    if token is None or request.scope.get("state", {}).get(READER_CHECKED):
        return
    authorization = request.headers.get("authorization")
    now_s = request.app.state.clock()
    credential = read_credential(token, authorization.encode("latin-1") if authorization is not None else None,
                                 request.cookies.get(COOKIE), now_s, runtime.settings.console.session_lifetime_seconds)
    if await checked(runtime, credential, now_s) is not Check.OK:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, DENIED, headers={"WWW-Authenticate": CHALLENGE})
