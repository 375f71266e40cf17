"""Signing in and out of the console: the read token exchanged for a session, and that session ended.

A session is a signed cookie (txnwatch.serve.api.sessions) and a row on the server
(txnwatch.store.console_sessions): the login writes both, the Sign out ends the row, so the cookie, and any
copy of it, stops working on every worker and replica at once (issue 38 item 5).  Ending every session at
once is an admin action (txnwatch.remedy.console_sessions: ``txnwatch sessions end`` and POST
/api/v1/admin/console-sessions/end).
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Depends, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from txnwatch.core.epoch import from_ms
from txnwatch.runtime.lifecycle import Runtime
from txnwatch.serve.api import sessions
from txnwatch.serve.api.deps import runtime_of
from txnwatch.serve.api.security import require_reader, token_matches, too_many
from txnwatch.serve.api.sessions import COOKIE
from txnwatch.serve.api.throttle import AuthThrottle, client_key
from txnwatch.serve.console.router import LOGIN, page
from txnwatch.store import console_sessions

router = APIRouter(prefix="/console", include_in_schema=False)


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, error: bool = False, next: str = "/console") -> HTMLResponse:
    return page(request, "login.html", title="Sign in", error=error, next=_local(next))


def _local(target: str) -> str:
    """Only a path on this server: a login link must not send the browser elsewhere afterwards."""
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/console"


@router.post("/login")
async def login(request: Request) -> Response:
    """Exchanges the read token for a signed session cookie (txnwatch.serve.api.sessions) and its row on the server
    (txnwatch.store.console_sessions), which the guard accepts together, so pages, /docs and the API can be opened
    by URL in a browser.  The token itself is never stored in the browser; a wrong one counts against the client
    like a wrong bearer (429 after too many).  No row, no session: a database that cannot be written is a 503."""
    runtime = runtime_of(request)
    client = client_key(request.client.host if request.client else None)
    throttle: AuthThrottle = request.app.state.auth_throttle
    retry_after = throttle.blocked(client, "login")
    if retry_after is not None:
        code, headers, body = too_many(retry_after)
        return Response(body, code, headers={k.decode(): v.decode() for k, v in headers})
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    offered = (form.get("token") or [""])[0]
    target = _local((form.get("next") or ["/console"])[0])
    token = runtime.settings.api.read_token
    if token is None:
        return RedirectResponse(target, status.HTTP_303_SEE_OTHER)  # nothing to sign in to
    if not token_matches(token, offered.encode("utf-8")):
        throttle.failed(client, "login", "wrong token on the console login")
        return RedirectResponse(f"{LOGIN}?error=true&next={quote(target)}", status.HTTP_303_SEE_OTHER)
    lifetime_s = runtime.settings.console.session_lifetime_seconds
    now_s: float = request.app.state.clock()
    issued = sessions.issue(sessions.session_key(token), now_s, lifetime_s)
    await run_in_threadpool(_start_session, runtime, issued, now_s)  # no row, no session: a failure is the 503
    response = RedirectResponse(target, status.HTTP_303_SEE_OTHER)
    response.set_cookie(COOKIE, issued.cookie, httponly=True, samesite="strict", path="/",
                        secure=_secure(runtime, request), max_age=lifetime_s)
    response.delete_cookie(sessions.LEGACY_COOKIE, path="/")  # it held the token itself (before sessions)
    return response


def _start_session(runtime: Runtime, issued: sessions.Issued, now_s: float) -> None:
    with runtime.sessions() as session:
        console_sessions.start(session, issued.session_id, now=from_ms(now_s * 1000),
                               expires_at=from_ms(issued.expires_s * 1000))
        session.commit()


def _end_session(runtime: Runtime, session_id: str, now_s: float) -> None:
    with runtime.sessions() as session:
        console_sessions.end(session, session_id, now=from_ms(now_s * 1000))
        session.commit()


def _cross_site(request: Request) -> bool:
    """A POST a browser says comes from another site (``Sec-Fetch-Site``), or whose ``Origin`` names another host.
    ``Origin: null`` passes: with our ``Referrer-Policy: no-referrer`` browsers send it on our own forms."""
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return True
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return False
    return origin.partition("://")[2].rstrip("/") != request.headers.get("host", "")


@router.post("/logout")
async def logout(request: Request, _: Annotated[None, Depends(require_reader)]) -> Response:
    """Sign out: ends this browser's session on the server (every worker and replica refuses its cookie from now
    on, a copy of it too), clears the cookie and shows the login page.

    Safe from other sites as the login is: the cookie is ``SameSite=Strict``, so another site's form never sends
    it (the guard then answers as for any request without a session, and nothing is ended), and a POST the
    browser marks as cross-site, or whose Origin is another host, is refused (403) before anything is done."""
    if _cross_site(request):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "a sign-out sent from another site is refused")
    runtime = runtime_of(request)
    token = runtime.settings.api.read_token
    cookie = request.cookies.get(COOKIE)
    session_id = sessions.session_id_of(sessions.session_key(token), cookie) if token and cookie else None
    if session_id is not None:
        await run_in_threadpool(_end_session, runtime, session_id, request.app.state.clock())
    response = RedirectResponse(LOGIN if token is not None else "/console", status.HTTP_303_SEE_OTHER)
    response.delete_cookie(COOKIE, path="/", secure=_secure(runtime, request), httponly=True, samesite="strict")
    return response


def _secure(runtime: Runtime, request: Request) -> bool:
    """Secure when browsers reach us over https: the public URL says so, or the request came over https, which
    uvicorn learns from X-Forwarded-Proto when a trusted proxy (api.trusted_proxies) sends it."""
    public_url = runtime.settings.public_url or ""
    return public_url.startswith("https://") or request.url.scheme == "https"
