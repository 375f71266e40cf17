"""API worker processes (api.workers >= 1) answer as the daemon's own process does, from what it publishes."""

from __future__ import annotations

import gzip
import pickle
import time
from pathlib import Path
from typing import Any

from tests.api.conftest import make_client, make_settings
from tests.api.factory import PROD, STAGING
from txnwatch.core.canary import CanaryAttempt, CanaryRound, CanaryView, CoordinatorLocation
from txnwatch.core.model import BrokerVerification, ClusterSnapshot, PartitionSnapshot, TopicPartition
from txnwatch.core.views import ClusterView, HistoryView
from txnwatch.metrics.exposition import Exposition
from txnwatch.runtime.publication import VIEWS, Digest, Publication, Publisher, dumps, light
from txnwatch.runtime.wiring import build_api_runtime, build_runtime

PATHS = ("/api/v1/clusters", f"/api/v1/clusters/{PROD}", f"/api/v1/clusters/{STAGING}", "/api/v1/verification",
         "/api/v1/transactions?limit=5")


def _timeless(body: Any) -> Any:
    """An answer without the fields computed from the clock at request time (windows, ages)."""
    if isinstance(body, dict):
        return {k: _timeless(v) for k, v in body.items() if k not in ("window_start", "window_end", "age_seconds")}
    if isinstance(body, list):
        return [_timeless(v) for v in body]
    return body


def _snapshot(now_ms: int) -> ClusterSnapshot:
    from txnwatch.kafka.errors import from_exception

    tp = TopicPartition("orders", 0)
    return ClusterSnapshot(
        cluster=PROD, taken_at_ms=now_ms, duration_ms=7,
        partitions={tp: PartitionSnapshot(tp, leader=1, high_watermark=10, last_stable_offset=4, log_start_offset=0)},
        errors=(from_exception("ListTransactions", "broker:2", ConnectionRefusedError("refused")),),
        broker_verification=(BrokerVerification("1", "http://b1/metrics", verifications=50, failures=2,
                                                time_ms_quantiles=((0.99, 12.5),)),))


def _canary(now_ms: int) -> CanaryView:
    """A canary round that committed on two partitions (its coordinator broker 2)."""
    round_ = CanaryRound(now_ms, "txnwatch-canary-prod", CoordinatorLocation(2, 7, 2, (2,)),
                         (CanaryAttempt(0, 1, commit_ms=12, visible_ms=30), CanaryAttempt(1, 2, commit_ms=9,
                                                                                           visible_ms=25)))
    return CanaryView("txnwatch-canary-prod", "_txnwatch_canary", 15.0, round_)


def _publish(daemon, directory: Path, now_ms: int) -> bytes:
    daemon.state.update(PROD, up=True, polls=3, failed_polls=1, last_poll_at_ms=now_ms, last_success_at_ms=now_ms,
                        last_poll_duration_ms=7, snapshot=_snapshot(now_ms),
                        history=HistoryView(mode="exact", reason="", ids=4), canary=_canary(now_ms))
    daemon.state.update(STAGING, up=False, polls=2, failed_polls=2, last_poll_at_ms=now_ms,
                        last_error="ClusterUnreachable: refused")
    assert isinstance(daemon.exposition, Exposition)
    compressed = daemon.exposition.render()
    Publisher(directory, daemon.state, daemon.leadership, daemon.store_health, [PROD, STAGING]).publish(compressed)
    return gzip.decompress(compressed)


def test_a_worker_answers_every_view_as_the_daemon_process_does(seeded, tmp_path: Path) -> None:
    settings = make_settings(seeded.url)
    daemon = build_runtime(settings, collect=False)
    worker = build_api_runtime(settings, tmp_path)
    try:
        with make_client(daemon) as here, make_client(worker) as there:
            before = there.get("/metrics")
            assert before.status_code == 503 and before.headers["retry-after"]
            ready = there.get("/readyz").json()
            assert "the collector process has not published its first poll yet" in ready["reasons"]
            text = _publish(daemon, tmp_path, int(time.time() * 1000))
            for path in PATHS:
                mine, theirs = here.get(path), there.get(path)
                assert mine.status_code == theirs.status_code == 200, path
                assert _timeless(mine.json()) == _timeless(theirs.json()), path
            assert here.get("/readyz").json() == there.get("/readyz").json()
            canary = there.get(f"/api/v1/clusters/{PROD}").json()["canary"]  # equal to the daemon's, as above
            assert canary["ok"] is True and [a["visible_ms"] for a in canary["attempts"]] == [30, 25]
            page = there.get("/console/")
            assert page.status_code == 200 and "ClusterUnreachable: refused" in page.text
            scraped = there.get("/metrics", headers={"Accept-Encoding": "gzip"})
            assert scraped.headers["content-encoding"] == "gzip"
            assert scraped.content == text  # httpx undoes the gzip
            plain = there.get("/metrics", headers={"Accept-Encoding": "identity"})  # decompressed by the worker
            assert plain.headers.get("content-encoding") is None and plain.content == text
            assert b'txnwatch_cluster_up{cluster="' + PROD.encode() + b'"} 1.0' in scraped.content
    finally:
        daemon.engine.dispose()
        worker.engine.dispose()


def test_a_worker_reloads_only_what_changed_and_flags_a_silent_collector(seeded, tmp_path: Path) -> None:
    settings = make_settings(seeded.url)
    daemon = build_runtime(settings, collect=False)
    worker = build_api_runtime(settings, tmp_path)
    try:
        _publish(daemon, tmp_path, int(time.time() * 1000))
        worker.refresh()
        first = worker.state.get(PROD)
        assert first is not None and first.up
        worker.refresh()
        assert worker.state.get(PROD) is first  # nothing new published: the same objects, nothing reread
        daemon.state.update(PROD, last_error="a newer poll")
        _publish(daemon, tmp_path, int(time.time() * 1000))
        worker.refresh()
        newer = worker.state.get(PROD)
        assert newer is not first and newer is not None and newer.last_error == "a newer poll"  # reread
        # The collector stops publishing (stuck, or dead): readiness says so.
        digest = pickle.loads((tmp_path / VIEWS).read_bytes())
        old = Digest(generation=digest.generation + 1, published_at_ms=digest.published_at_ms - 3_600_000,
                     views=digest.views, leader=True, terms=digest.terms)
        (tmp_path / VIEWS).write_bytes(pickle.dumps(old))
        with make_client(worker) as there:
            reasons = there.get("/readyz").json()["reasons"]
        assert any(r.startswith("the collector process has not published for 36") for r in reasons), reasons
    finally:
        daemon.engine.dispose()
        worker.engine.dispose()


def test_published_views_leave_out_what_the_api_reads_from_the_database() -> None:
    now_ms = 1_795_000_000_000
    from txnwatch.core.findings import Findings, GroupLag
    from txnwatch.core.model import TopicPartition

    lag = GroupLag(PROD, "g", TopicPartition("orders", 0), 5, 1, 1, 0.5)
    counted = GroupLag(PROD, "h", TopicPartition("orders", 1), 7, 2, 2, 0.5, lag_records=1)
    findings = Findings(PROD, now_ms, lags=(lag, counted), omitted={("consumer_group", "cap"): 3})
    view = ClusterView(name=PROD, up=True, snapshot=_snapshot(now_ms), findings=findings)
    kept = light(view)
    assert kept.snapshot is not None and view.snapshot is not None and kept.findings is not None
    # The groups' lag of the poll stays (the API's current consumer lag), counted or not, and reads back whole.
    assert kept.findings.lags == (lag, counted) and kept.findings.omitted == {("consumer_group", "cap"): 3}
    read = pickle.loads(dumps(Digest(generation=1, published_at_ms=now_ms, views=(kept,))))
    assert read.views[0].findings.lags == (lag, counted) and read.views[0] == kept
    assert (kept.snapshot.partitions, kept.snapshot.groups, kept.snapshot.transactions) == ({}, {}, {})
    assert kept.snapshot.errors == view.snapshot.errors
    assert kept.snapshot.broker_verification == view.snapshot.broker_verification
    assert kept.snapshot.taken_at_ms == now_ms and kept.up


def test_a_reader_without_a_publication_knows_every_cluster_but_nothing_of_them(tmp_path: Path) -> None:
    publication = Publication(tmp_path, [PROD, STAGING])
    publication.refresh()
    assert [v.name for v in publication.state.views()] == [PROD, STAGING]
    assert all(v.last_poll_at_ms is None for v in publication.state.views())
    assert publication.exposition.cached(True) is None and publication.age_s() is None
    assert not publication.leadership.holds(PROD) and not publication.leadership.is_leader()
