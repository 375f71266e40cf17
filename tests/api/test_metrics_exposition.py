"""/metrics serves the render made after a poll, as bytes, gzip when asked; a scrape never renders it again."""

from __future__ import annotations

import gzip
import time

import pytest
from fastapi.testclient import TestClient

from txnwatch.core.config import load_settings
from txnwatch.metrics.exposition import Exposition
from txnwatch.runtime.wiring import build_runtime
from txnwatch.serve.app import create_app
from txnwatch.serve.metrics_port import accepts_gzip


@pytest.mark.parametrize(("header", "expected"), [
    pytest.param(None, False, id="absent"),
    pytest.param("identity", False, id="identity-only"),
    pytest.param("gzip", True, id="prometheus-sends-this"),
    pytest.param("deflate, gzip;q=0.5", True, id="with-q"),
    pytest.param("gzip;q=0", False, id="refused-with-q0"),
    pytest.param("br, *", True, id="wildcard"),
])
def test_gzip_negotiation(header: str | None, expected: bool) -> None:
    assert accepts_gzip(header) is expected


def test_scrapes_serve_the_poll_render_and_gzip_on_request() -> None:
    settings = load_settings(None, database_url="sqlite://", clusters=[dict(name="c", bootstrap_servers="127.0.0.1:9")])
    runtime = build_runtime(settings, collect=False)
    exposition = runtime.exposition
    assert isinstance(exposition, Exposition)  # the daemon process's own render (an API worker's only reads it)
    with TestClient(create_app(runtime, manage_lifecycle=False)) as client:
        exposition.start()
        try:
            deadline = time.monotonic() + 30
            while exposition.cached(True) is None and time.monotonic() < deadline:
                time.sleep(0.05)
            compressed = exposition.cached(True)
            assert compressed is not None
            rendered = gzip.decompress(compressed)  # only the gzip is kept
            assert b"txnwatch_cluster_up" in rendered
            assert exposition.cached(False) is None, "the text is decompressed off the event loop, by body()"
            renders: list[int] = []
            original = exposition.render

            def counted() -> bytes:
                renders.append(1)
                return original()

            exposition.render = counted  # type: ignore[method-assign]  # count the renders from here on
            plain = client.get("/metrics", headers={"Accept-Encoding": "identity"})
            zipped = client.get("/metrics", headers={"Accept-Encoding": "gzip"})
            assert renders == [], "a scrape rendered the registry instead of serving the poll's render"
            assert plain.headers.get("content-encoding") is None and plain.content == rendered
            assert zipped.headers["content-encoding"] == "gzip" and zipped.content == rendered  # httpx decodes it
            assert "Accept-Encoding" in zipped.headers["vary"]
            assert zipped.headers["content-length"] == str(len(compressed))  # the kept gzip, sent as it is
            exposition.on_poll("c", None, None, "down", 0)  # a poll finished: rendered again, by the thread
            deadline = time.monotonic() + 30
            while not renders and time.monotonic() < deadline:
                time.sleep(0.05)
            assert renders
        finally:
            exposition.stop()
    runtime.engine.dispose()


def test_the_render_waits_for_the_poll_in_flight() -> None:
    """A render holds the GIL for seconds at big scale: it starts once no poll runs (within max_age_s)."""
    from prometheus_client.registry import CollectorRegistry

    from txnwatch.core import pollwindow

    exposition = Exposition(CollectorRegistry(), max_age_s=60)
    with pollwindow.PROCESS.poll():
        exposition.start()
        try:
            time.sleep(0.5)
            assert exposition.cached(True) is None, "rendered while a poll was in flight"
        except BaseException:
            exposition.stop()
            raise
    try:
        deadline = time.monotonic() + 10
        while exposition.cached(True) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert exposition.cached(True) is not None, "no render after the poll ended"
    finally:
        exposition.stop()
