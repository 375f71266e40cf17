"""The daemon's front (txnwatch.serve.front): the probes it answers itself are byte for byte the API's answers,
everything else is the API's own answer, and the API application is built only when something else is asked."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import make_client, make_settings
from tests.api.factory import PROD, STAGING
from tests.api.test_failures import seed
from txnwatch.runtime.lifecycle import Runtime
from txnwatch.runtime.wiring import build_runtime
from txnwatch.serve.app import create_app
from txnwatch.serve.front import Front, daemon_app

TOKEN = "front-test-token"


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    url = f"sqlite:///{tmp_path_factory.mktemp('front') / 'txnwatch.db'}"
    seed(url)
    rt = build_runtime(make_settings(url, read_token=TOKEN), collect=False)
    yield rt
    rt.engine.dispose()


class Built:
    """The API factory the daemon uses, counting its calls."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime, self.calls = runtime, 0

    def __call__(self) -> Any:
        self.calls += 1
        return create_app(self.runtime, manage_lifecycle=False)


def _answer(response: httpx.Response) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    return response.status_code, list(response.headers.raw), response.content


def _ready(runtime: Runtime) -> None:
    now_ms = int(time.time() * 1000)
    for name in (PROD, STAGING):
        runtime.state.update(name, up=True, polls=1, last_poll_at_ms=now_ms, last_success_at_ms=now_ms)


def _not_polled(runtime: Runtime) -> None:
    for name in (PROD, STAGING):
        runtime.state.update(name, up=False, polls=0, last_poll_at_ms=None, last_success_at_ms=None,
                             last_error="NoBrokersAvailable")


PROBES = [
    pytest.param("GET", "/healthz", {}, b"", id="healthz"),
    pytest.param("GET", "/readyz", {}, b"", id="readyz"),
    pytest.param("GET", "/readyz?verbose=1", {}, b"", id="readyz-with-a-query"),
    pytest.param("GET", "/healthz", {"Authorization": "Bearer wrong"}, b"", id="healthz-with-a-wrong-token"),
]


def _same_answer(runtime: Runtime, method: str, url: str, headers: dict[str, str],
                 body: bytes) -> tuple[Built, TestClient]:
    """Sends one request to a new front and to the API alone, asserts both answer it alike, and gives back the
    front's builder (how often it built the API) and the front's client."""
    built = Built(runtime)
    front = TestClient(Front(runtime, built), raise_server_exceptions=False)
    api = make_client(runtime)
    assert _answer(front.request(method, url, headers=headers, content=body)) == \
        _answer(api.request(method, url, headers=headers, content=body))
    return built, front


@pytest.mark.parametrize("state", [pytest.param(_ready, id="ready"), pytest.param(_not_polled, id="not-polled")])
@pytest.mark.parametrize(("method", "url", "headers", "body"), PROBES)
def test_the_front_answers_a_probe_as_the_api_does_without_building_it(
        runtime: Runtime, state: Any, method: str, url: str, headers: dict[str, str], body: bytes) -> None:
    state(runtime)
    built, _ = _same_answer(runtime, method, url, headers, body)
    assert built.calls == 0


OTHERS = [
    pytest.param("GET", "/api/v1/clusters", {"Authorization": f"Bearer {TOKEN}"}, b"", id="api-list"),
    pytest.param("GET", "/api/v1/clusters", {}, b"", id="api-without-token"),
    pytest.param("GET", "/metrics", {"Authorization": f"Bearer {TOKEN}"}, b"", id="metrics-on-the-api-port"),
    pytest.param("GET", "/nowhere", {"Authorization": f"Bearer {TOKEN}"}, b"", id="not-found"),
    pytest.param("HEAD", "/healthz", {}, b"", id="head-probe"),
    pytest.param("POST", "/readyz", {}, b"", id="post-probe"),
    pytest.param("GET", "/healthz/", {}, b"", id="trailing-slash"),
    pytest.param("GET", "/healthz", {}, b"x" * 70_000, id="probe-with-a-body-over-the-limit"),
    pytest.param("GET", "/readyz", {}, b"{}", id="probe-with-a-body"),
]


@pytest.mark.parametrize(("method", "url", "headers", "body"), OTHERS)
def test_anything_else_is_the_api_s_own_answer(runtime: Runtime, method: str, url: str, headers: dict[str, str],
                                               body: bytes) -> None:
    _ready(runtime)
    built, front = _same_answer(runtime, method, url, headers, body)
    front.get("/api/v1/clusters")
    assert built.calls == 1  # built once, on the first request it could not answer itself


def test_a_readiness_that_raises_is_left_to_the_api(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """The API's own error handling answers it (here starlette's 500), not a second copy of it in the front."""
    import txnwatch.serve.front as front_module

    def broken(_: Runtime) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(front_module, "readiness", broken)
    monkeypatch.setattr("txnwatch.serve.api.routers.health.readiness", broken)
    built = Built(runtime)
    answer = TestClient(Front(runtime, built), raise_server_exceptions=False).get("/readyz")
    assert (answer.status_code, answer.text, built.calls) == (500, "Internal Server Error", 1)


class Lifecycle:
    """A runtime's start and stop, recorded (the front's lifespan calls nothing else)."""

    def __init__(self, fail_start: bool = False) -> None:
        self.calls: list[str] = []
        self.fail_start = fail_start

    def start(self) -> None:
        self.calls.append("start")
        if self.fail_start:
            raise RuntimeError("cannot start")

    def stop(self) -> None:
        self.calls.append("stop")


def test_the_front_starts_the_runtime_before_serving_and_stops_it_after() -> None:
    lifecycle = Lifecycle()
    with TestClient(Front(lifecycle, Built(lifecycle))) as client:  # type: ignore[arg-type]  # start/stop only
        assert (client.get("/healthz").status_code, lifecycle.calls) == (200, ["start"])
    assert lifecycle.calls == ["start", "stop"]


def test_a_runtime_that_cannot_start_fails_the_startup_and_is_not_stopped() -> None:
    lifecycle = Lifecycle(fail_start=True)
    with pytest.raises(RuntimeError, match="cannot start"), \
            TestClient(Front(lifecycle, Built(lifecycle))):  # type: ignore[arg-type]  # start/stop only
        pass
    assert lifecycle.calls == ["start"]


def test_the_daemon_serves_through_the_front(runtime: Runtime) -> None:
    app = daemon_app(runtime)
    assert isinstance(app, Front)
    client = TestClient(app)
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/api/v1/clusters", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
