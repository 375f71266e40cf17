"""Signing in to the console in headless chromium (issue 23 item 8): the browser keeps a session, not the token.

Before, the cookie the login set was the read token itself.  Here chromium is sent from /console to the
login page, signs in through the form, lands back on the page it asked for, and its cookie jar holds an
HttpOnly, SameSite=Strict session that page scripts cannot read and that does not contain the token.
"""

from __future__ import annotations

from pathlib import Path

from tests.console.browser import Browser
from tests.fixtures.guarded import READ, serving
from txnwatch.serve.api.sessions import COOKIE


def test_sign_in_keeps_a_session_not_the_token(tmp_path: Path, browser: Browser) -> None:
    with serving(tmp_path) as (url, _, _), browser.open(url + "/console/runbooks") as visit:
        page = visit.page
        assert page.url.startswith(url + "/console/login?next=")
        page.fill("input[name=token]", "not-the-token")
        page.click("button[type=submit]")
        page.wait_for_load_state("networkidle")
        assert "That is not the read token." in page.content()
        page.fill("input[name=token]", READ)
        page.click("button[type=submit]")
        page.wait_for_load_state("networkidle")
        assert page.url == url + "/console/runbooks"
        assert "Sign in" not in page.title()
        cookies = {c["name"]: c for c in page.context.cookies()}
        session = cookies[COOKIE]
        assert session["httpOnly"] and session["sameSite"] == "Strict" and not session["secure"]
        assert READ not in session["value"]
        assert page.evaluate("document.cookie") == ""  # scripts never see it
        assert page.goto(url + "/api/v1/clusters").status == 200  # the session opens the API too
        visit.assert_clean()


def test_sign_out_in_the_browser_ends_the_session_on_the_server(tmp_path: Path, browser: Browser) -> None:
    """The header's Sign out, clicked in chromium (which sends its own Origin and Sec-Fetch-Site on the form's
    POST): back on the login page, no cookie left, and the cookie copied before is refused by the server."""
    import httpx

    with serving(tmp_path) as (url, _, _), browser.open(url + "/console/runbooks") as visit:
        page = visit.page
        page.fill("input[name=token]", READ)
        page.click("button[type=submit]")
        page.wait_for_load_state("networkidle")
        copied = {c["name"]: c["value"] for c in page.context.cookies()}[COOKIE]
        page.click("text=Sign out")
        page.wait_for_load_state("networkidle")
        assert page.url.startswith(url + "/console/login")
        assert COOKIE not in {c["name"] for c in page.context.cookies()}
        assert page.goto(url + "/console/runbooks").url.startswith(url + "/console/login?next=")
        refused = httpx.get(url + "/api/v1/clusters", cookies={COOKIE: copied})
        assert refused.status_code == 401
        visit.assert_clean()

