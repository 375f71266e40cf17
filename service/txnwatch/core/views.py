"""The latest view of each cluster, published by the collector for /metrics, the API and /readyz.

Views are immutable and replaced whole, so a reader (a scrape, an API request) never
sees half a poll and never waits on Kafka or on the collector: it takes the current
reference and reads from it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from txnwatch.core.canary import CanaryView
from txnwatch.core.findings import Findings
from txnwatch.core.model import BrokerRelease, ClusterSnapshot, TxnState

EXACT, POLLING = "exact", "polling"


#: History gaps a view keeps for the API and console (newest last); the counters count every one.
KEPT_GAPS = 20


@dataclass(frozen=True, slots=True)
class HistoryGap:
    """One run of missing offsets on one coordinator partition.

    ``after_ms`` is the coordinator time of the last record read before the gap (None when it
    was read by an earlier run of the daemon: the span then starts at the stored position,
    time unknown); ``before_ms`` that of the first record after it.  Transitions in between
    are lost; counters over that span are lower bounds.
    """

    log_partition: int
    first_offset: int
    last_offset: int
    after_ms: int | None
    before_ms: int | None

    @property
    def records(self) -> int:
        """Records the cleaner removed: the topic's offsets are dense, one record each."""
        return self.last_offset - self.first_offset + 1


class LoggedState(Protocol):
    """What /metrics reads of an id's state as the transaction log says it (detect.txnlog.IdState is one)."""

    @property
    def state(self) -> TxnState: ...
    @property
    def start_ms(self) -> int | None: ...
    @property
    def timeout_ms(self) -> int: ...


@dataclass(frozen=True)
class HistoryView:
    """Where coordinator history comes from for one cluster, published by its transaction-log tail.

    ``mode`` is ``exact`` while the tail reads ``__transaction_state`` and ``polling``
    otherwise, with ``reason`` saying why (ACLs, topic not created yet, not the leader).
    ``counters`` are the cumulative log-derived counters as committed to the database.
    """

    mode: str = POLLING
    reason: str = "transaction log tail not started"
    counters: Mapping[str, int] = field(default_factory=dict)
    lag_records: int | None = None
    last_record_at_ms: int | None = None
    caught_up_at_ms: int | None = None
    ids: int = 0
    open_transactions: int = 0
    stuck_prepare: int = 0
    long_transactions: int = 0
    decode_errors: int = 0
    #: Offsets compaction removed before this process's tail read them (detect/txnlog_gaps.py): the newest
    #: KEPT_GAPS, and the totals since the process started (not stored: a restart forgets them).
    gaps: tuple[HistoryGap, ...] = ()
    gap_count: int = 0
    gap_records: int = 0
    #: Each id's state as the log last committed it (exact mode only): the tail's own committed mapping, never
    #: changed after publication (detect.txnlog.apply builds a new one), so it is shared, not copied.  /metrics
    #: shows these where the log speaks, as the API and console do (issue 24: one view of an id).
    states: Mapping[str, LoggedState] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        return self.mode == EXACT


@dataclass(frozen=True)
class ClusterView:
    """What is known about one cluster after its latest poll attempt."""

    name: str
    up: bool = False
    polls: int = 0
    failed_polls: int = 0
    consecutive_failures: int = 0
    last_poll_at_ms: int | None = None
    last_success_at_ms: int | None = None
    last_poll_duration_ms: int | None = None
    last_error: str | None = None
    #: Answers refused over a bound (kafka/bounded.py) since the process started, by (broker, reason).
    refused: Mapping[tuple[str, str], int] = field(default_factory=dict)
    snapshot: ClusterSnapshot | None = None
    findings: Findings | None = None
    counters: Mapping[str, int] = field(default_factory=dict)
    history: HistoryView = field(default_factory=HistoryView)
    #: The transactional canary's latest round and finding, where this replica runs it (None otherwise).
    canary: CanaryView | None = None


class LatestState:
    """Thread-safe registry of ClusterViews; the only shared mutable object besides the DB."""

    def __init__(self, cluster_names: list[str] | tuple[str, ...] = ()) -> None:
        self._lock = threading.Lock()
        self._views: dict[str, ClusterView] = {name: ClusterView(name=name) for name in cluster_names}
        self._generation = 0

    @property
    def generation(self) -> int:
        """Bumped by every change of a view (a poll's publication, a tail's update, a worker's reload).

        The API's answer cache (serve/answer_cache.py) keys on it: an answer computed before a change is never
        served after it."""
        return self._generation

    def publish(self, view: ClusterView) -> None:
        with self._lock:
            self._views[view.name] = view
            self._generation += 1

    def changed(self) -> None:
        """Something the views stand for changed without a new view (a poll's sinks have written its rows)."""
        with self._lock:
            self._generation += 1

    def update(self, name: str, **changes: Any) -> ClusterView:
        with self._lock:
            view = replace(self._views.get(name) or ClusterView(name=name), **changes)
            self._views[name] = view
            self._generation += 1
            return view

    def get(self, name: str) -> ClusterView | None:
        return self._views.get(name)

    def views(self) -> list[ClusterView]:
        with self._lock:
            return list(self._views.values())


def lowest_release(view: ClusterView | None) -> BrokerRelease | None:
    """The oldest broker of the view's latest snapshot (ApiVersions, every poll); None before one answered."""
    snapshot = view.snapshot if view is not None else None
    found = snapshot.broker_releases if snapshot is not None else ()
    return min(found, key=lambda r: (r.release, not r.newest_known), default=None)
