"""One read-token model for everything that reveals cluster data.

The API, /metrics (transactional ids, topics and groups are labels there), /openapi.json,
/docs, the console: with ``api.read_token`` set, each needs the token.  The check is one
ASGI middleware, :class:`ReadTokenGuard`, deny by default: a route added later is covered
without anyone remembering to, and only the paths listed in :data:`OPEN_PATHS` (the
Kubernetes probes, which must work without a secret) and :data:`OWN_AUTH_PREFIXES` (the
admin action, which has its own token) pass without it.

The token is accepted as ``Authorization: Bearer <token>`` (API clients, Prometheus'
``bearer_token``/ServiceMonitor ``bearerTokenSecret``) or as the :data:`COOKIE` a browser
gets from a login page.  Compared in constant time, so it cannot be guessed byte by byte
from response times.

:func:`require_reader` is the same check as a FastAPI dependency: routers declare it so
the OpenAPI document shows the bearer scheme; it never disagrees with the middleware.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterable, Mapping
from http.cookies import SimpleCookie
from typing import Annotated
from urllib.parse import quote

from fastapi import HTTPException, Request, Security, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import SecretStr
from starlette.types import ASGIApp, Receive, Scope, Send

COOKIE = "txnwatch_read_token"
OPEN_PATHS: frozenset[str] = frozenset({"/healthz", "/readyz"})
OWN_AUTH_PREFIXES: tuple[str, ...] = ("/api/v1/admin/",)
DENIED = "read token missing or wrong: send 'Authorization: Bearer <api.read_token>'"
CHALLENGE = 'Bearer realm="txnwatch"'

bearer = HTTPBearer(auto_error=False, scheme_name="readToken",
                    description="Needed only when `api.read_token` is configured.")


def token_ok(expected: SecretStr | None, authorization: str | None, cookie: str | None) -> bool:
    """True without a configured token; else the bearer header (or, failing that, the cookie) must match."""
    if expected is None:
        return True
    scheme, _, offered = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not offered:
        offered = cookie or ""
    return hmac.compare_digest(offered.encode(), expected.get_secret_value().encode())


def is_open(path: str, open_paths: Iterable[str] = OPEN_PATHS,
            own_auth: Iterable[str] = OWN_AUTH_PREFIXES) -> bool:
    return path in set(open_paths) or any(path.startswith(p) for p in own_auth)


class ReadTokenGuard:
    """Deny-by-default read token for every HTTP path but ``open_paths`` and ``own_auth`` prefixes.

    ``open_prefixes`` lets a part of the app open more (a login page, static assets);
    ``login_path``, if set, sends a browser (``Accept: text/html``) that lacks the token to
    that page with ``?next=`` instead of answering 401.
    """

    def __init__(self, app: ASGIApp, *, open_paths: Iterable[str] = OPEN_PATHS,
                 open_prefixes: Iterable[str] = (), own_auth: Iterable[str] = OWN_AUTH_PREFIXES,
                 login_path: str | None = None) -> None:
        self.app = app
        self.open_paths = frozenset(open_paths)
        self.open_prefixes = tuple(open_prefixes) + tuple(own_auth)
        self.login_path = login_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path in self.open_paths or path.startswith(self.open_prefixes):
            await self.app(scope, receive, send)
            return
        expected = _expected_token(scope)
        headers = _headers(scope)
        if token_ok(expected, headers.get("authorization"), _cookie(headers.get("cookie"))):
            await self.app(scope, receive, send)
            return
        if self.login_path and "text/html" in headers.get("accept", ""):
            target = self.login_path + "?next=" + quote(path, safe="/")
            await send({"type": "http.response.start", "status": 303,
                        "headers": [(b"location", target.encode()), (b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        body = json.dumps({"detail": DENIED}).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", CHALLENGE.encode())]})
        await send({"type": "http.response.body", "body": body})


def _expected_token(scope: Scope) -> SecretStr | None:
    app = scope.get("app")
    runtime = getattr(getattr(app, "state", None), "runtime", None)
    token: SecretStr | None = runtime.settings.api.read_token if runtime is not None else None
    return token


def _headers(scope: Scope) -> Mapping[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _cookie(header: str | None) -> str | None:
    if not header:
        return None
    try:
        morsel = SimpleCookie(header).get(COOKIE)
    except Exception:  # a malformed Cookie header is no token, not an error
        return None
    return morsel.value if morsel is not None else None


async def require_reader(request: Request,
                         credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)]) -> None:
    """The guard's check as a dependency (async, no thread hop); documents the scheme in OpenAPI."""
    token = request.app.state.runtime.settings.api.read_token
    if not token_ok(token, request.headers.get("authorization"), request.cookies.get(COOKIE)):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, DENIED, headers={"WWW-Authenticate": CHALLENGE})
