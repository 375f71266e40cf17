"""One read-token model for everything that reveals cluster data.

The API, /metrics (transactional ids, topics and groups are labels there), /openapi.json,
/docs, the console: with ``api.read_token`` set, each needs the token.  The check is one
ASGI middleware, :class:`ReadTokenGuard`, deny by default: a route added later is covered
without anyone remembering to, and only the paths listed in :data:`OPEN_PATHS` (the
Kubernetes probes, which must work without a secret) and :data:`OWN_AUTH_PREFIXES` (the
admin action, which has its own token) pass without it.

The token is accepted as ``Authorization: Bearer <token>`` (API clients, Prometheus'
``bearer_token``/ServiceMonitor ``bearerTokenSecret``) or as the session :data:`COOKIE` a browser
gets from the login page (txnwatch.serve.api.sessions: signed, expiring, never the token itself).  Tokens
are compared as bytes in constant time (the header's bytes as sent, the configured token's as
configured: txnwatch.core.config.token_problem keeps it visible ASCII), so a token cannot be guessed
byte by byte from response times; an empty configured token matches nothing.  Each wrong credential
is counted against its client (txnwatch.serve.api.throttle), which is answered 429 after too many.

:func:`require_reader` is the same check as a FastAPI dependency: routers declare it so
the OpenAPI document shows the bearer scheme; it never disagrees with the middleware.
"""

from __future__ import annotations

import enum
import hmac
import json
import time
from collections.abc import Callable, Iterable, Mapping
from http.cookies import SimpleCookie
from typing import Annotated
from urllib.parse import quote

from fastapi import HTTPException, Request, Security, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import SecretStr
from starlette.types import ASGIApp, Receive, Scope, Send

from txnwatch.serve.api import sessions
from txnwatch.serve.api.sessions import COOKIE
from txnwatch.serve.api.throttle import AuthThrottle, client_key

OPEN_PATHS: frozenset[str] = frozenset({"/healthz", "/readyz"})
OWN_AUTH_PREFIXES: tuple[str, ...] = ("/api/v1/admin/",)
DENIED = "read token missing or wrong: send 'Authorization: Bearer <api.read_token>'"
CHALLENGE = 'Bearer realm="txnwatch"'

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


def check_reader(expected: SecretStr, authorization: bytes | None, cookie: str | None, now_s: float) -> Check:
    """The bearer header if there is one, else the session cookie."""
    offered = bearer_token(authorization)
    if offered is not None:
        return Check.OK if token_matches(expected, offered) else Check.WRONG_BEARER
    if not cookie:
        return Check.ABSENT
    verdict = sessions.verify(sessions.session_key(expected), cookie, now_s)
    return Check.OK if verdict.valid else Check.FORGED_COOKIE if verdict.forged else Check.ABSENT


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
        check = check_reader(expected, headers.get(b"authorization"), _cookie(headers.get(b"cookie")), self.clock())
        if check is Check.OK:
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

    Counts nothing: the guard in front of every route already counted this request's failure."""
    token = request.app.state.runtime.settings.api.read_token
    if token is None:
        return
    authorization = request.headers.get("authorization")
    check = check_reader(token, authorization.encode("latin-1") if authorization is not None else None,
                         request.cookies.get(COOKIE), time.time())
    if check is not Check.OK:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, DENIED, headers={"WWW-Authenticate": CHALLENGE})
