"""Console sessions end when asked (issue 38 item 5), on SQLite and PostgreSQL.

Before, a session was a signed cookie alone: no logout, a copied cookie worked for 12 h, and the only way to end
it was to rotate the read token, which also cut off every scraper.  Here the daemon's app (the real guard, the
real login, a migrated store on both backends) signs browsers in with the form and then: a Sign out ends that
session on the server, so a copy of its cookie taken before is refused; "end every session" (the admin API and
`txnwatch sessions end`) refuses every earlier session while bearer tokens keep working; and the lifetime is
``console.session_lifetime_seconds``, checked against the app's clock (injected here).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from tests.fixtures.migrated import migrate
from txnwatch.cli.commands import app as cli_app
from txnwatch.core.config import Settings
from txnwatch.runtime.wiring import build_runtime
from txnwatch.serve.api.sessions import COOKIE
from txnwatch.serve.app import create_app
from txnwatch.store.console_sessions import ConsoleSession
from txnwatch.store.models import AdminAudit

READ, ADMIN = "r34d-t0ken", "4dmin-t0ken"
BEARER = {"Authorization": f"Bearer {READ}"}
PAGE = "/console/runbooks"  # a console page that needs the read token and no cluster data
T0 = 1_800_000_000.0


class Clock:
    """The app's clock (Unix seconds): the login signs expiries with it and the guard checks them against it."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@contextmanager
def console(db_url: str, clock: Clock | None = None, *, admin_enabled: bool = True,
            **console_settings: Any) -> Iterator[tuple[TestClient, Any]]:
    """The daemon's app on a migrated store (migrated once: a second app on the same URL shares its sessions)."""
    migrate(db_url)
    settings = Settings(database_url=db_url, clusters=[{"name": "c", "bootstrap_servers": "127.0.0.1:1"}],
                        api={"read_token": READ, "admin_enabled": admin_enabled, "admin_token": ADMIN},
                        console=console_settings)
    runtime = build_runtime(settings, collect=False)
    app = create_app(runtime, manage_lifecycle=False, clock=clock or Clock())
    try:
        yield TestClient(app, raise_server_exceptions=False), runtime
    finally:
        runtime.engine.dispose()


def sign_in(client: TestClient) -> str:
    """A browser's sign-in through the form: the session cookie it gets."""
    response = client.post("/console/login", data={"token": READ, "next": PAGE}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == PAGE, response.text
    cookie = response.cookies[COOKIE]
    client.cookies.clear()  # each request below says which cookie it sends
    return cookie


def status_with(client: TestClient, cookie: str) -> int:
    """What a script holding (a copy of) the cookie gets for a console page (JSON: 401 when refused)."""
    return client.get(PAGE, headers={"Cookie": f"{COOKIE}={cookie}", "Accept": "application/json"}).status_code


def test_a_copied_cookie_stops_working_after_logout(db_url: str) -> None:
    with console(db_url) as (client, _):
        cookie, other = sign_in(client), sign_in(client)
        copy = str(cookie)  # what a proxy log or a shared profile kept
        assert status_with(client, cookie) == 200
        page = client.get(PAGE, headers={"Cookie": f"{COOKIE}={cookie}"})
        assert 'action="/console/logout"' in page.text and "Sign out" in page.text  # the link on every page

        out = client.post("/console/logout", headers={"Cookie": f"{COOKIE}={cookie}"}, follow_redirects=False)
        assert out.status_code == 303 and out.headers["location"] == "/console/login"
        cleared = out.headers["set-cookie"]
        assert cleared.startswith(f'{COOKIE}=""') and "Max-Age=0" in cleared and "SameSite=strict" in cleared

        assert status_with(client, copy) == 401
        browser = client.get(PAGE, headers={"Cookie": f"{COOKIE}={copy}", "Accept": "text/html"},
                             follow_redirects=False)
        assert browser.status_code == 303 and browser.headers["location"].startswith("/console/login?next=")
        assert status_with(client, other) == 200  # another browser's session is its own
        assert client.get("/api/v1/clusters", headers=BEARER).status_code == 200  # scrapers untouched
        assert status_with(client, sign_in(client)) == 200  # and the token's holder signs in again


def test_a_sign_out_from_another_site_ends_nothing(db_url: str) -> None:
    """SameSite=Strict keeps the cookie off another site's form; a POST marked cross-site is refused anyway."""
    with console(db_url) as (client, _):
        cookie = sign_in(client)
        for headers in ({"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
                        {"Origin": "https://evil.example"}):
            refused = client.post("/console/logout", headers={"Cookie": f"{COOKIE}={cookie}", **headers},
                                  follow_redirects=False)
            assert refused.status_code == 403, headers
            assert status_with(client, cookie) == 200
        # What another site's form really sends: no cookie (SameSite=Strict), so the guard sends it to the login.
        blind = client.post("/console/logout", headers={"Accept": "text/html"}, follow_redirects=False)
        assert blind.status_code == 303 and blind.headers["location"].startswith("/console/login")
        assert status_with(client, cookie) == 200
        # Our own form, as browsers send it under Referrer-Policy: no-referrer.
        own = client.post("/console/logout", headers={"Cookie": f"{COOKIE}={cookie}", "Origin": "null",
                                                     "Sec-Fetch-Site": "same-origin"}, follow_redirects=False)
        assert own.status_code == 303 and status_with(client, cookie) == 401


def _end_by_api(client: TestClient, db_url: str) -> dict[str, Any]:
    response = client.post("/api/v1/admin/console-sessions/end", headers={"Authorization": f"Bearer {ADMIN}"})
    assert response.status_code == 200, response.text
    return dict(response.json())


def _end_by_cli(client: TestClient, db_url: str) -> dict[str, Any]:
    env = {"TXNWATCH_DATABASE_URL": db_url, "TXNWATCH_CONFIG": ""}
    result = CliRunner().invoke(cli_app, ["sessions", "end"], env=env)
    assert result.exit_code == 0, result.output
    words = result.output.split()
    return {"ended": int(words[1]), "audit_id": int(words[-1].rstrip(")")), "outcome": result.output}


@pytest.mark.parametrize("end", [pytest.param(_end_by_api, id="admin-api"), pytest.param(_end_by_cli, id="cli")])
def test_ending_every_session_refuses_each_earlier_one(db_url: str, end: Any) -> None:
    with console(db_url) as (client, runtime):
        earlier = [sign_in(client) for _ in range(3)]
        out = sign_in(client)
        client.post("/console/logout", headers={"Cookie": f"{COOKIE}={out}"}, follow_redirects=False)
        assert [status_with(client, c) for c in earlier] == [200, 200, 200]

        answer = end(client, db_url)
        assert answer["ended"] == 3  # the signed-out one was ended already

        assert [status_with(client, c) for c in earlier] == [401, 401, 401]
        assert client.get("/api/v1/clusters", headers=BEARER).status_code == 200  # no token rotated
        later = sign_in(client)
        assert status_with(client, later) == 200
        with runtime.sessions() as session:
            row = session.get(AdminAudit, answer["audit_id"])
            assert row is not None and row.action == "end_console_sessions" and not row.dry_run
            assert row.outcome == "ended 3 console sessions" and row.finished_at is not None
            if end is _end_by_api:
                assert (row.actor, row.client) == ("api:admin-token", "testclient")
            else:
                assert row.actor == "cli:database" and "@" in (row.client or "")  # user@host


def test_ending_every_session_needs_the_admin_token(db_url: str) -> None:
    with console(db_url) as (client, runtime):
        cookie = sign_in(client)
        for headers in ({}, {"Authorization": f"Bearer {READ}"}, {"Cookie": f"{COOKIE}={cookie}"}):
            assert client.post("/api/v1/admin/console-sessions/end", headers=headers).status_code == 401
        assert status_with(client, cookie) == 200
        with runtime.sessions() as session:
            refused = session.scalars(select(AdminAudit).where(AdminAudit.outcome.startswith("refused"))).all()
        assert refused and {r.action for r in refused} == {"end_console_sessions"}
    with console(db_url, admin_enabled=False) as (client, _):
        answer = client.post("/api/v1/admin/console-sessions/end", headers={"Authorization": f"Bearer {ADMIN}"})
        assert answer.status_code == 403


def test_the_lifetime_is_honoured(db_url: str) -> None:
    clock = Clock()
    with console(db_url, clock, session_lifetime_seconds=600) as (client, runtime):
        response = client.post("/console/login", data={"token": READ}, follow_redirects=False)
        assert "Max-Age=600" in response.headers["set-cookie"]
        cookie = response.cookies[COOKIE]
        client.cookies.clear()
        clock.now = T0 + 599
        assert status_with(client, cookie) == 200
        clock.now = T0 + 600
        assert status_with(client, cookie) == 401
        assert status_with(client, sign_in(client)) == 200  # signed at T0 + 600: good until T0 + 1200
        with runtime.sessions() as session:  # that sign-in deleted the expired row: the table stays bounded
            assert len(session.scalars(select(ConsoleSession.id)).all()) == 1


def test_a_session_longer_than_a_lowered_lifetime_ends(db_url: str) -> None:
    """Restarted with a lower lifetime, the daemon refuses the older, longer sessions at once."""
    clock = Clock()
    with console(db_url, clock) as (client, _):
        cookie = sign_in(client)  # 12 h, the default
        clock.now = T0 + 3600
        assert status_with(client, cookie) == 200
    with console(db_url, clock, session_lifetime_seconds=1800) as (client, _):
        assert status_with(client, cookie) == 401
        assert status_with(client, sign_in(client)) == 200


def test_a_session_that_cannot_be_checked_is_refused(db_url: str) -> None:
    """Fail closed: with the sessions' table gone (a database that lost it, a restore without it), a cookie gets a
    503 that says why, never the page; the bearer token still works."""
    with console(db_url) as (client, runtime):
        cookie = sign_in(client)
        with runtime.engine.begin() as connection:
            connection.exec_driver_sql("DROP TABLE console_sessions")
        answer = client.get(PAGE, headers={"Cookie": f"{COOKIE}={cookie}"})
        assert answer.status_code == 503 and "console session cannot be checked" in answer.json()["detail"]
        assert client.get("/api/v1/clusters", headers=BEARER).status_code == 200


def test_a_cookie_signed_without_a_row_is_refused(db_url: str) -> None:
    """A cookie signed with the token but never started here (signed before this release, or by a tool): no
    row, no session."""
    from pydantic import SecretStr

    from txnwatch.serve.api import sessions

    with console(db_url) as (client, _):
        forged_ahead = sessions.issue(sessions.session_key(SecretStr(READ)), T0).cookie
        assert status_with(client, forged_ahead) == 401


def test_the_rows_hold_no_token(db_url: str) -> None:
    with console(db_url) as (client, runtime):
        cookie = sign_in(client)
        with Session(runtime.engine) as session:
            (row,) = session.scalars(select(ConsoleSession)).all()
        assert row.id in cookie and cookie.split(".")[3] not in repr(vars(row)) and READ not in repr(vars(row))
        assert row.ended_at is None and row.expires_at > row.started_at


def test_the_cli_needs_a_database(tmp_path: Any) -> None:
    env = {"TXNWATCH_DATABASE_URL": "sqlite://", "TXNWATCH_CONFIG": ""}
    result = CliRunner().invoke(cli_app, ["sessions", "end"], env={**os.environ, **env})
    assert result.exit_code == 2 and "in-memory SQLite" in result.output
