"""The list endpoints' answer cache (serve/answer_cache.py): equal to the route's answer, gone with a new
generation or after its max age, bounded, behind the read-token guard, and never over the uncached routes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, select
from sqlalchemy.orm import Session
from starlette.types import Message, Receive, Scope, Send

from tests.api.conftest import Seeded, make_client, make_settings
from tests.api.factory import PROD, Factory, seed_scenario
from tests.fixtures.migrated import migrate
from txnwatch.core.views import ClusterView
from txnwatch.runtime.lifecycle import Runtime
from txnwatch.runtime.wiring import build_runtime
from txnwatch.serve.answer_cache import (
    CACHED_PATHS,
    ENTRY_OVERHEAD_BYTES,
    REFRESH_AT,
    AnswerCache,
    AnswerCacheMiddleware,
    normalised_query,
)
from txnwatch.store import models as m
from txnwatch.store.db import make_engine
from txnwatch.store.rollup_models import Offender

LISTS = [
    "/api/v1/transactions",
    "/api/v1/transactions?min_age_seconds=20&sort=transactional_id",
    "/api/v1/transactions?state=Ongoing&state=PrepareCommit&limit=3",
    f"/api/v1/transactions?cluster={PROD}&hanging=true",
    "/api/v1/hanging",
    "/api/v1/lso-stalls",
    "/api/v1/partitions",
    "/api/v1/consumer-groups",
    "/api/v1/clusters",
    "/api/v1/alerts",
    "/api/v1/alerts?state=firing&state=pending&limit=5",
    "/api/v1/verification",
    f"/api/v1/reports/{PROD}/transactions",
    f"/api/v1/reports/{PROD}/topics",
    f"/api/v1/reports/{PROD}/lag",
    f"/api/v1/reports/{PROD}/offenders",
]


def _timeless(value: Any) -> Any:
    """The answer without fields computed from the request's clock (ages, durations): two requests a few
    milliseconds apart differ there and nowhere else."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items()
                if "seconds" not in k and not k.endswith("_ago") and k not in ("window_start", "window_end")}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


@pytest.fixture(scope="module")
def clients(seeded: Seeded) -> Iterator[tuple[TestClient, TestClient]]:
    cached = build_runtime(make_settings(seeded.url), collect=False)
    uncached = build_runtime(make_settings(seeded.url, answer_cache_bytes=0), collect=False)
    with make_client(cached) as a, make_client(uncached) as b:
        yield a, b
    cached.engine.dispose()
    uncached.engine.dispose()


@pytest.mark.parametrize("path", LISTS)
def test_a_cached_answer_equals_an_uncached_one(clients: tuple[TestClient, TestClient], path: str) -> None:
    cached, uncached = clients
    first, again, plain = cached.get(path), cached.get(path), uncached.get(path)
    assert first.status_code == again.status_code == plain.status_code == 200
    assert again.content == first.content  # the second one is the kept bytes, age fields included
    assert _timeless(again.json()) == _timeless(plain.json())
    assert again.headers["content-type"] == plain.headers["content-type"]
    assert again.headers["x-content-type-options"] == "nosniff"  # the outer middleware still runs


@pytest.fixture
def own(tmp_path: Path) -> Iterator[tuple[Runtime, TestClient, str]]:
    """A database of its own: these tests write to it between requests."""
    url = f"sqlite:///{tmp_path / 'txnwatch.db'}"
    migrate(url)
    engine = make_engine(url)
    with Session(engine) as session:
        seed_scenario(session)
        session.commit()
    engine.dispose()
    runtime = build_runtime(make_settings(url, answer_cache_max_age_seconds=60), collect=False)
    with make_client(runtime) as client:
        yield runtime, client, url
    runtime.engine.dispose()


def _add_transaction(url: str, transactional_id: str) -> None:
    engine = make_engine(url)
    with Session(engine) as session:
        prod = session.scalars(select(m.Cluster).where(m.Cluster.name == PROD)).one()
        f = Factory(session, datetime.now(timezone.utc))
        f.txn(prod, transactional_id, age=7, partitions=["orders-0"], producer_id=9999)
        session.commit()
    engine.dispose()


def _ids(client: TestClient) -> set[str]:
    body = client.get("/api/v1/transactions?limit=1000").json()
    return {item["transactional_id"] for item in body["items"]}


def test_a_new_generation_invalidates(own: tuple[Runtime, TestClient, str]) -> None:
    runtime, client, url = own
    before = _ids(client)
    _add_transaction(url, "late-writer")
    assert "late-writer" not in _ids(client)  # same generation, within the max age: the kept answer
    runtime.state.publish(ClusterView(name=PROD))  # a poll published
    assert "late-writer" in _ids(client)
    assert _ids(client) == before | {"late-writer"}


def test_the_sinks_having_written_invalidates(own: tuple[Runtime, TestClient, str]) -> None:
    runtime, client, url = own
    _ids(client)
    _add_transaction(url, "written-by-a-sink")
    runtime.state.changed()  # what the poll loop calls once its sinks are done
    assert "written-by-a-sink" in _ids(client)


def test_an_answer_older_than_the_max_age_is_recomputed(own: tuple[Runtime, TestClient, str]) -> None:
    _, client, url = own
    cache = client.app.state.answer_cache  # type: ignore[attr-defined]  # TestClient.app is a plain ASGI app
    _ids(client)
    _add_transaction(url, "after-a-while")
    assert "after-a-while" not in _ids(client)
    cache.max_age_s = 0.0  # every kept answer is now too old
    assert "after-a-while" in _ids(client)


def test_alerts_are_kept_until_the_evaluator_has_written(own: tuple[Runtime, TestClient, str]) -> None:
    """Alert rows are written only by the evaluator, a poll sink, after which the poll loop calls
    ``changed()`` (the outbox writes its own table, which no alert answer shows)."""
    runtime, client, url = own
    assert "/api/v1/alerts" in CACHED_PATHS
    count = len(client.get("/api/v1/alerts?limit=500").json()["items"])
    engine = make_engine(url)
    with Session(engine) as session:
        session.execute(delete(m.Alert))
        session.commit()
    engine.dispose()
    assert count > 0
    assert len(client.get("/api/v1/alerts?limit=500").json()["items"]) == count  # the kept answer
    runtime.state.changed()  # the poll's sinks (the evaluator among them) have written
    assert client.get("/api/v1/alerts?limit=500").json()["items"] == []


def test_a_report_is_kept_for_its_max_age_only(own: tuple[Runtime, TestClient, str]) -> None:
    """The pipeline writes reports from another process, which no generation sees: a new run's rows show once the
    kept answer is older than the max age (1 s by default), and never before."""
    _, client, url = own
    cache = client.app.state.answer_cache  # type: ignore[attr-defined]  # TestClient.app is a plain ASGI app
    page = f"/api/v1/reports/{PROD}/offenders"
    assert client.get(page).json() == []
    engine = make_engine(url)
    with Session(engine) as session:
        day = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
        session.add(Offender(cluster=PROD, period="day", period_start=day, computed_at=day, kind="txn_aborts",
                             rank=1, subject="app-1", value=3.0))
        session.commit()
    engine.dispose()
    assert client.get(page).json() == []  # the kept answer
    cache.max_age_s = 0.0
    assert [o["subject"] for o in client.get(page).json()] == ["app-1"]


def test_uncached_routes_see_writes_at_once(own: tuple[Runtime, TestClient, str]) -> None:
    """One id's page is never kept: it is read after an action on that id, when a stale answer misleads most."""
    _, client, url = own
    _add_transaction(url, "short-lived")
    page = f"/api/v1/transactions/{PROD}/short-lived"
    assert page.split("?")[0] not in CACHED_PATHS
    assert client.get(page).status_code == 200
    engine = make_engine(url)
    with Session(engine) as session:
        session.execute(delete(m.TransactionState).where(m.TransactionState.transactional_id == "short-lived"))
        session.commit()
    engine.dispose()
    assert client.get(page).status_code == 404


def test_the_guard_still_runs_before_a_cached_answer(seeded: Seeded) -> None:
    runtime = build_runtime(make_settings(seeded.url, read_token="s3cret-token-of-enough-length"), collect=False)
    with make_client(runtime) as client:
        ok = client.get("/api/v1/transactions", headers={"Authorization": "Bearer s3cret-token-of-enough-length"})
        assert ok.status_code == 200
        assert client.get("/api/v1/transactions").status_code == 401
        assert client.get("/api/v1/transactions", headers={"Authorization": "Bearer wrong"}).status_code == 401
    runtime.engine.dispose()


def test_errors_are_not_kept(own: tuple[Runtime, TestClient, str]) -> None:
    _, client, _ = own
    cache = client.app.state.answer_cache  # type: ignore[attr-defined]  # TestClient.app is a plain ASGI app
    assert client.get("/api/v1/transactions?cluster=nope").status_code == 404
    assert client.get("/api/v1/transactions?limit=0").status_code == 422
    assert len(cache) == 0


# --- the cache itself -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "expected"), [
    pytest.param(b"", "", id="empty"),
    pytest.param(b"b=2&a=1", "a=1&b=2", id="names-sorted"),
    pytest.param(b"state=Ongoing&state=Empty", "state=Ongoing&state=Empty", id="repeated-values-keep-order"),
    pytest.param(b"limit=5&cluster=x&limit=10", "cluster=x&limit=5&limit=10", id="last-wins-kept-last"),
    pytest.param(b"id_prefix=a%2Fb&x=", "id_prefix=a%2Fb&x=", id="escapes-and-blanks"),
])
def test_normalised_query(raw: bytes, expected: str) -> None:
    assert normalised_query(raw) == expected


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_cache_stays_under_its_byte_budget_and_evicts_the_least_recently_used() -> None:
    clock = Clock()
    body = b"x" * 1000
    cache = AnswerCache(budget_bytes=8 * (1000 + ENTRY_OVERHEAD_BYTES + 100), max_age_s=1, clock=clock)
    keys = [(f"/p{i}", "", "reader", 1) for i in range(40)]
    for i, key in enumerate(keys):
        assert cache.put(key, 200, [], body)
        if i == 5:
            assert cache.get(keys[0]) is not None  # used recently: survives the next evictions
        assert cache.used_bytes <= cache.budget_bytes
    assert len(cache) == 8
    assert cache.get(keys[-1]) is not None
    assert cache.get(keys[1]) is None  # evicted
    assert cache.get(keys[0]) is None  # evicted too, once 8 newer ones came


def test_an_entry_bigger_than_an_eighth_of_the_budget_is_not_kept() -> None:
    cache = AnswerCache(budget_bytes=80_000, max_age_s=1, clock=Clock())
    assert not cache.put(("/p", "", "reader", 1), 200, [], b"x" * 10_001)
    assert len(cache) == 0 and cache.used_bytes == 0


def test_max_age_and_generation_are_part_of_what_is_served() -> None:
    clock = Clock()
    cache = AnswerCache(budget_bytes=1 << 20, max_age_s=1.0, clock=clock)
    cache.put(("/p", "", "reader", 1), 200, [(b"content-type", b"application/json")], b"{}")
    assert cache.get(("/p", "", "reader", 2)) is None
    clock.now += 1.0
    answer = cache.get(("/p", "", "reader", 1))
    assert answer is not None and answer.body == b"{}"
    clock.now += 0.001
    assert cache.get(("/p", "", "reader", 1)) is None
    assert json.loads(answer.body) == {}


class _Generation:
    """What the middleware reads of a runtime: ``refresh()`` and ``state.generation``."""

    def __init__(self) -> None:
        self.state = self
        self.generation = 1

    def refresh(self) -> None:
        pass


class _SlowRoute:
    """An ASGI route that answers ``status`` once ``release`` is set, counting how often it ran."""

    def __init__(self, status: int = 200) -> None:
        self.calls = 0
        self.status = status
        self.release = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.calls += 1
        await self.release.wait()
        await send({"type": "http.response.start", "status": self.status, "headers": [(b"content-type", b"x")]})
        await send({"type": "http.response.body", "body": f"answer {self.calls}".encode()})


def _app() -> Any:
    """The least of a Starlette app the middleware reads: ``app.state.runtime``'s generation."""
    app = type("App", (), {})()
    app.state = type("State", (), {})()
    app.state.runtime = _Generation()
    return app


async def _get(middleware: AnswerCacheMiddleware, app: Any, path: str) -> tuple[int, bytes]:
    """One GET of ``path`` through ``middleware``: its status and body."""
    got: list[Message] = []

    async def send(message: Message) -> None:
        got.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"", "app": app}
    await middleware(scope, receive, send)
    return got[0]["status"], got[1]["body"]


async def _requests(route: _SlowRoute, n: int) -> list[tuple[int, bytes]]:
    app = _app()
    middleware = AnswerCacheMiddleware(route, cache=AnswerCache(1 << 20, 60.0))
    tasks = [asyncio.ensure_future(_get(middleware, app, "/api/v1/transactions")) for _ in range(n)]
    await asyncio.sleep(0.01)  # every request has arrived while the first is still computing
    route.release.set()
    return list(await asyncio.gather(*tasks))


def test_concurrent_misses_of_one_key_are_computed_once() -> None:
    route = _SlowRoute()
    answers = asyncio.run(_requests(route, 20))
    assert route.calls == 1
    assert answers == [(200, b"answer 1")] * 20


def test_waiters_compute_their_own_when_the_first_answer_cannot_be_kept() -> None:
    route = _SlowRoute(status=503)
    answers = asyncio.run(_requests(route, 5))
    assert route.calls == 5  # a 503 is never shared: each request gets an answer of its own
    assert {status for status, _ in answers} == {503}


def test_a_hot_answer_is_recomputed_before_it_ages_out_so_no_request_waits_for_it() -> None:
    """Past REFRESH_AT of its max age a requested answer is still served, and recomputed behind it: the next
    request after the max age gets the new answer without computing (issue 25: expiries set the p99)."""
    async def run() -> list[tuple[int, bytes]]:
        clock = Clock()
        cache = AnswerCache(1 << 20, 1.0, clock=clock)
        route = _SlowRoute()
        route.release.set()
        app = _app()
        middleware = AnswerCacheMiddleware(route, cache=cache)

        async def one() -> tuple[int, bytes]:
            return await _get(middleware, app, "/api/v1/partitions")

        seen = [await one()]  # computed: answer 1
        clock.now += 0.5
        seen.append(await one())  # young: served, nothing recomputed
        assert route.calls == 1
        clock.now += 0.3  # 0.8 s old, past REFRESH_AT (0.75) of the 1 s max age
        seen.append(await one())  # still answer 1, and answer 2 is computed behind it
        await asyncio.gather(*middleware._refreshing)
        assert route.calls == 2
        clock.now += 0.5  # answer 1 would be 1.3 s old now; answer 2 is 0.5 s old
        seen.append(await one())
        assert route.calls == 2  # no request computed it
        return seen

    assert asyncio.run(run()) == [(200, b"answer 1")] * 3 + [(200, b"answer 2")]
    assert 0 < REFRESH_AT < 1
