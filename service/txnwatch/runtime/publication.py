"""What the collector process hands its API worker processes (``api.workers`` ≥ 1): files in a private directory.

With API workers the daemon is one collector process (polls, transaction-log tails, the store, alerting,
the /metrics render) and N processes that serve HTTP on the same listening socket.  A scrape or a request
then never waits for the GIL a poll holds (issue 18: scrape p99 396 ms at 49k series with both in one
process).  The workers read the database themselves; what lives only in the collector's memory is
published here once per render (after each poll, and at least every poll interval):

* ``metrics.gz``: the rendered exposition (gzip, the only form the collector keeps), served as it is, and
  decompressed by the worker for the rare scrape that does not accept gzip;
* ``views``: the clusters' views without the heavy parts of their snapshots (partitions, groups,
  transactions: the API reads those from the database) and of their findings, but with the groups' lag of the
  poll (``findings.lags``: the API's current consumer lag, serve/api/current_lag.py; as many as /metrics exports,
  ``max_groups`` / ``max_group_partitions`` bound both) and the lingering Flink transactions (one per open
  transaction at most), the replica's leases and the store's health.

Each file is written to a temporary name and renamed, so a reader sees a whole file or the previous one;
``views`` is written last and carries a generation number, the one thing a request checks (one ``stat``).
The directory is created 0700 by the daemon and read by its own children only: ``views`` is a pickle
because it holds the same frozen dataclasses the API already reads, and nothing else can write there.
"""

from __future__ import annotations

import copyreg
import gzip
import io
import os
import pickle
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from txnwatch.core.findings import Findings, GroupLag
from txnwatch.core.model import TopicPartition
from txnwatch.core.views import ClusterView, LatestState
from txnwatch.fleet.leadership import Leadership
from txnwatch.store.health import StoreHealth

METRICS_GZ, VIEWS = "metrics.gz", "views"


@dataclass(frozen=True)
class Digest:
    """The collector's in-memory facts the API needs, as of ``published_at_ms``."""

    generation: int
    published_at_ms: int
    views: tuple[ClusterView, ...] = ()
    leader: bool = False
    terms: dict[str, int] = field(default_factory=dict)
    store_error: str | None = None


def light(view: ClusterView) -> ClusterView:
    """The view without what the API never reads from memory (it queries the database for those)."""
    snapshot = view.snapshot
    if snapshot is not None:
        snapshot = replace(snapshot, listed=(), transactions={}, partitions={}, groups={}, first_unconsumed_ms={},
                           unreadable_records={}, committed_records={})
    findings = view.findings
    if findings is not None:  # what the caps left out (GET /api/v1/clusters/{name}), the groups' lag
        # (GET /api/v1/consumer-groups: the poll's, fresher than the stored samples) and the lingering Flink
        # transactions (GET /api/v1/lingering: no table holds them); none of the other rows
        findings = Findings(findings.cluster, findings.now_ms, omitted=dict(findings.omitted), lags=findings.lags,
                            lingering=findings.lingering)
    return replace(view, snapshot=snapshot, findings=findings,
                   history=replace(view.history, states={}) if view.history.states else view.history)


# A poll's group lags (up to max_group_partitions a cluster: 20,000 by default) pickled as flat tuples, their
# TopicPartition unpacked: at 20,000 the collector's dump takes 77 ms of CPU instead of 260, a worker's load 153
# instead of 210.  Generic over GroupLag's fields, in their order, the partition's two in the place of ``tp``.
_LAG_FIELDS = tuple(f.name for f in fields(GroupLag))
_TP = _LAG_FIELDS.index("tp")


def _group_lag(*row: Any) -> GroupLag:
    return GroupLag(*row[:_TP], TopicPartition(row[_TP], row[_TP + 1]), *row[_TP + 2:])  # type: ignore[call-arg]  # mypy counts no fields in a starred tuple: the row holds exactly GroupLag's (_LAG_FIELDS)


def _reduce_group_lag(lag: GroupLag) -> tuple[Any, tuple[Any, ...]]:
    values = [getattr(lag, name) for name in _LAG_FIELDS]
    values[_TP:_TP + 1] = lag.tp
    return _group_lag, tuple(values)


_DISPATCH = {**copyreg.dispatch_table, GroupLag: _reduce_group_lag}


def dumps(digest: Digest) -> bytes:
    """The digest as the API workers read it (``pickle.loads``)."""
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _DISPATCH
    pickler.dump(digest)
    return out.getvalue()


def make_directory() -> Path:
    """A fresh private directory (0700, under TMPDIR: writable with a read-only root too)."""
    return Path(tempfile.mkdtemp(prefix="txnwatch-api-"))


def remove_directory(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)


def _write(directory: Path, name: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, directory / name)
    except BaseException:
        os.unlink(tmp)
        raise


class MetricsFile:
    """The render alone, for the metrics port's process (txnwatch.serve.metrics_port) when no API worker needs the
    views: ``metrics.gz`` only, written as :class:`Publisher` writes it (temporary name, then renamed)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def publish(self, compressed: bytes) -> None:
        _write(self.directory, METRICS_GZ, compressed)


class Publisher:
    """Collector side: called by the exposition thread after each render (one writer, no lock needed)."""

    def __init__(self, directory: Path, state: LatestState, leadership: Leadership, health: StoreHealth,
                 clusters: Sequence[str]) -> None:
        self.directory = directory
        self._state, self._leadership, self._health, self._clusters = state, leadership, health, list(clusters)
        self._generation = 0

    def publish(self, compressed: bytes) -> None:
        """Hand on one render (the exposition's gzip) with the views as of now."""
        self._generation += 1
        terms = {name: term for name in self._clusters if (term := self._leadership.term(name)) is not None}
        digest = Digest(generation=self._generation, published_at_ms=int(time.time() * 1000),
                        views=tuple(light(v) for v in self._state.views()), leader=self._leadership.is_leader(),
                        terms=terms, store_error=self._health.error)
        _write(self.directory, METRICS_GZ, compressed)
        _write(self.directory, VIEWS, dumps(digest))


class Publication:
    """Worker side: the latest digest and exposition, reloaded when the collector has published anew.

    :meth:`refresh` is called once per request (``api.deps.get_runtime``); it costs one ``stat`` unless
    something new was published.  Until the first publication the worker knows nothing of the collector:
    every cluster shows as not polled yet and ``/metrics`` answers 503 (the collector renders within seconds).
    """

    def __init__(self, directory: Path, clusters: Sequence[str]) -> None:
        self.directory = directory
        self._clusters = list(clusters)
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None
        self.digest = Digest(generation=0, published_at_ms=0)
        self.metrics: bytes | None = None  # gzip
        self.state = PublishedState(self._clusters)
        self.leadership = PublishedLeadership(self)
        self.health = StoreHealth()
        self.exposition = PublishedExposition(self)

    def refresh(self) -> None:
        try:
            stat = os.stat(self.directory / VIEWS)
        except FileNotFoundError:
            return
        key = (stat.st_ino, stat.st_mtime_ns)
        if key == self._seen:
            return
        with self._lock:
            if key == self._seen:
                return
            try:
                digest = pickle.loads((self.directory / VIEWS).read_bytes())
                metrics = (self.directory / METRICS_GZ).read_bytes()
            except FileNotFoundError:  # replaced between stat and read: the next request reads the newer one
                return
            self.digest, self.metrics, self._seen = digest, metrics, key
            self.state.replace_all(digest.views)
            if digest.store_error:
                self.health.write_failed(digest.store_error)
            else:
                self.health.write_succeeded()

    def age_s(self, now_ms: int | None = None) -> float | None:
        """Seconds since the collector last published; None before its first publication."""
        if not self.digest.published_at_ms:
            return None
        return ((now_ms if now_ms is not None else int(time.time() * 1000)) - self.digest.published_at_ms) / 1000


class PublishedState(LatestState):
    """The collector's views as last published; replaced whole, as :class:`LatestState` views are."""

    def replace_all(self, views: Sequence[ClusterView]) -> None:
        with self._lock:
            self._views = {**{name: ClusterView(name=name) for name in self._views}, **{v.name: v for v in views}}
            self._generation += 1


class PublishedLeadership:
    """The collector's leases as last published; a worker never takes, renews or fences a lease itself."""

    def __init__(self, publication: Publication) -> None:
        self._publication = publication

    def term(self, cluster: str) -> int | None:
        return self._publication.digest.terms.get(cluster)

    def holds(self, cluster: str) -> bool:
        return cluster in self._publication.digest.terms

    def held(self) -> list[str]:
        return sorted(self._publication.digest.terms)

    def is_leader(self) -> bool:
        return self._publication.digest.leader

    def fence(self, session: Session | Connection, cluster: str) -> None:
        raise RuntimeError("an API worker never writes as a lease holder")

    def send_window(self, cluster: str | None) -> AbstractContextManager[float | None]:
        return nullcontext(None)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


class PublishedExposition:
    """/metrics in a worker: the collector's render, as bytes; never rendered here (the registry is over there)."""

    def __init__(self, publication: Publication) -> None:
        self._publication = publication

    def cached(self, compressed: bool) -> bytes | None:
        """The published gzip as it is; None for a scrape without gzip (:meth:`body` decompresses, off the loop)."""
        return self._publication.metrics if compressed else None

    def body(self, compressed: bool) -> bytes:
        metrics = self._publication.metrics
        if metrics is None:
            raise NotPublishedYet("the collector has not rendered /metrics yet")
        return metrics if compressed else gzip.decompress(metrics)


class NotPublishedYet(Exception):
    """A worker asked for what the collector has not published yet (the first seconds after start)."""

