"""Fail closed: no token the auth layer cannot use is accepted (issue 23, items 3 and 9).

Before: ``TXNWATCH_API__ADMIN_TOKEN=""`` with ``admin_enabled: true`` passed `config check` and a POST to
the abort without an Authorization header reached Kafka's WriteTxnMarkers (an empty read token opened
every page the same way); a non-ASCII read token passed `config check`, was refused as a bearer (the
header decoded as latin-1, compared as UTF-8) and the login answered 500.  Now `config check` (and so
`run`) refuses them with one line naming the variable and never quoting the value; tokens are compared
as bytes in constant time on every door, and an empty configured token matches nothing even if it got
past the config.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from tests.fixtures.migrated import migrate
from txnwatch.core.config import ApiConfig, ConfigError, Settings, load_settings
from txnwatch.remedy.guard import AdminRefused, check_admin
from txnwatch.runtime.wiring import build_runtime
from txnwatch.serve.api.security import Check, check_reader, token_matches
from txnwatch.serve.app import create_app

#: Every visible ASCII character but the alphanumerics: each must work as a bearer and on the login form.
PUNCTUATION_TOKEN = "Tk-._~+/=!#$%&'()*,:;<>?@[]^`{|}\"\\0"


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TXNWATCH_")}


@pytest.mark.parametrize(("env", "variable", "expected"), [
    pytest.param({"TXNWATCH_API__ADMIN_ENABLED": "true", "TXNWATCH_API__ADMIN_TOKEN": ""},
                 "TXNWATCH_API__ADMIN_TOKEN", "is empty or blank", id="empty-admin-token"),
    pytest.param({"TXNWATCH_API__ADMIN_ENABLED": "true", "TXNWATCH_API__ADMIN_TOKEN": "   "},
                 "TXNWATCH_API__ADMIN_TOKEN", "is empty or blank", id="blank-admin-token"),
    pytest.param({"TXNWATCH_API__READ_TOKEN": ""}, "TXNWATCH_API__READ_TOKEN", "is empty or blank",
                 id="empty-read-token"),
    pytest.param({"TXNWATCH_API__READ_TOKEN": "\t\n"}, "TXNWATCH_API__READ_TOKEN", "is empty or blank",
                 id="blank-read-token"),
    pytest.param({"TXNWATCH_API__READ_TOKEN": "s3cret-tok\n"}, "TXNWATCH_API__READ_TOKEN",
                 "ends with whitespace", id="secret-made-with-echo"),
    pytest.param({"TXNWATCH_API__READ_TOKEN": "s3cret-tök"}, "TXNWATCH_API__READ_TOKEN", "visible ASCII only",
                 id="non-ascii-read-token"),
    pytest.param({"TXNWATCH_API__READ_TOKEN": "s3cret tok"}, "TXNWATCH_API__READ_TOKEN", "visible ASCII only",
                 id="inner-space"),
    pytest.param({"TXNWATCH_API__ADMIN_ENABLED": "true", "TXNWATCH_API__ADMIN_TOKEN": "ädmin"},
                 "TXNWATCH_API__ADMIN_TOKEN", "visible ASCII only", id="non-ascii-admin-token"),
])
def test_config_check_refuses_tokens_that_cannot_guard(tmp_path: Path, env: dict[str, str], variable: str,
                                                       expected: str) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("clusters: []\n")
    result = subprocess.run([sys.executable, "-m", "txnwatch", "config", "check", str(config)], capture_output=True,
                            text=True, timeout=60, env={**clean_env(), **env})
    assert result.returncode == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(f"txnwatch: environment {variable}: ") and expected in lines[0], lines[0]
    for value in env.values():
        if value.strip() and value not in ("true",):
            assert value.strip() not in lines[0]  # the token is never printed back


@pytest.mark.parametrize("api", [
    pytest.param({"read_token": PUNCTUATION_TOKEN}, id="punctuation-read-token"),
    pytest.param({"admin_enabled": False, "admin_token": ""}, id="empty-admin-token-admin-off"),
    pytest.param({"admin_enabled": True, "admin_token": "a" * 200}, id="long-admin-token"),
])
def test_usable_tokens_pass(api: dict[str, object]) -> None:
    load_settings(None, api=api)


def test_the_same_in_a_file_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith("TXNWATCH_")]:
        monkeypatch.delenv(name)
    path = tmp_path / "c.yaml"
    path.write_text('api: {admin_enabled: true, admin_token: ""}\n')
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert err.value.problems == [f"{path}: api.admin_token: is empty or blank: set a token, or set "
                                  "admin_enabled: false"]


def test_an_empty_token_matches_nothing_even_past_the_config() -> None:
    """Defence in depth: settings built without validation (a test, a tool) still fail closed."""
    empty = SecretStr("")
    assert not token_matches(empty, b"")
    assert check_reader(empty, None, None, 0) is Check.ABSENT
    assert check_reader(empty, b"Bearer ", None, 0) is Check.ABSENT
    settings = Settings.model_construct(api=ApiConfig.model_construct(admin_enabled=True, admin_token=empty))
    for offered in (None, "", b""):
        with pytest.raises(AdminRefused) as err:
            check_admin(settings, offered)
        assert not err.value.disabled


@pytest.mark.parametrize(("offered", "expected"), [
    pytest.param(b"T0ken", True, id="same-bytes"),
    pytest.param(b"T0ken ", False, id="trailing-space"),
    pytest.param(b"t0ken", False, id="case"),
    pytest.param("T0kén".encode(), False, id="utf-8-lookalike"),
    pytest.param("T0kén".encode("latin-1"), False, id="latin-1-lookalike"),
    pytest.param(b"", False, id="empty"),
])
def test_tokens_are_compared_as_bytes(offered: bytes, expected: bool) -> None:
    assert token_matches(SecretStr("T0ken"), offered) is expected


@pytest.fixture
def app_client(tmp_path: Path) -> Iterator[tuple[TestClient, Settings]]:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    settings = load_settings(None, database_url=url, clusters=[{"name": "c", "bootstrap_servers": "127.0.0.1:1"}],
                             api={"read_token": PUNCTUATION_TOKEN, "admin_enabled": True,
                                  "admin_token": PUNCTUATION_TOKEN[::-1]})
    runtime = build_runtime(settings, collect=False)
    yield TestClient(create_app(runtime, manage_lifecycle=False), raise_server_exceptions=False), settings
    runtime.engine.dispose()


def test_every_door_compares_the_same_bytes(app_client: tuple[TestClient, Settings]) -> None:
    """The token with every punctuation character works as a bearer, on the login form and for admin;
    non-ASCII bytes in a header or a form are a 401 or a failed login, never a 500."""
    client, _ = app_client
    assert client.get("/api/v1/clusters", headers={"Authorization": f"Bearer {PUNCTUATION_TOKEN}"}).status_code == 200
    raw = httpx.Headers([(b"Authorization", b"Bearer " + "tök\xe9n".encode())])
    assert client.get("/api/v1/clusters", headers=raw).status_code == 401
    login = client.post("/console/login", data={"token": PUNCTUATION_TOKEN}, follow_redirects=False)
    assert login.status_code == 303 and login.headers["location"] == "/console"
    client.cookies.clear()
    wrong = client.post("/console/login", data={"token": "tökén ✓"}, follow_redirects=False)
    assert wrong.status_code == 303 and "error=true" in wrong.headers["location"]
    admin = client.post("/api/v1/admin/abort", json={"cluster": "c", "topic": "t", "partition": 0,
                                                     "producer_id": 1, "producer_epoch": 0},
                        headers={"Authorization": f"Bearer {PUNCTUATION_TOKEN[::-1]}"})
    assert admin.status_code == 503  # past the guard: the (absent) cluster is reached for, not refused


def test_an_empty_admin_token_past_the_config_never_reaches_kafka(tmp_path: Path) -> None:
    """The defect as it was: the abort without an Authorization header.  Settings forced past validation."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    base = load_settings(None, database_url=url, clusters=[{"name": "c", "bootstrap_servers": "127.0.0.1:1"}])
    settings = base.model_copy(update={"api": ApiConfig.model_construct(
        **{**base.api.model_dump(), "admin_enabled": True, "admin_token": SecretStr(""),
           "read_token": SecretStr("")})})
    runtime = build_runtime(settings, collect=False)
    client = TestClient(create_app(runtime, manage_lifecycle=False), raise_server_exceptions=False)
    body = {"cluster": "c", "topic": "t", "partition": 0, "producer_id": 1, "producer_epoch": 0, "dry_run": False}
    assert client.post("/api/v1/admin/abort", json=body).status_code == 401  # was 503: Kafka was called
    assert client.post("/api/v1/admin/abort", json=body, headers={"Authorization": "Bearer "}).status_code == 401
    assert client.get("/api/v1/clusters").status_code == 401  # an empty read token opens nothing either
    runtime.engine.dispose()
