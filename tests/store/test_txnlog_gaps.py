"""A history gap is never silent: a tail resuming past records compaction removed says so.

A fake log at the Kafka boundary (records keep their offsets; compaction removes some), the real tail
service and a real database: the tail stops, records are cleaned, the tail resumes.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry
from sqlalchemy import Engine

from tests.store.test_txnlog_tail import registered, the_log
from txnwatch.collect.txnlog_tail import ClusterTail
from txnwatch.core.model import RequestError, TxnLogRecord
from txnwatch.core.views import HistoryGap, LatestState
from txnwatch.metrics.history import HistoryCollector


class OffsetTail:
    """Reads a log whose records carry their own offsets (holes where the cleaner removed some)."""

    def __init__(self, log: Mapping[int, list[TxnLogRecord]], positions: Mapping[int, int]) -> None:
        self._log = log
        self._next = {p: positions.get(p, records[0].offset if records else 0) for p, records in log.items()}

    def read(self, timeout_ms: int = 0) -> tuple[list[TxnLogRecord], list[RequestError]]:
        out: list[TxnLogRecord] = []
        for p, records in sorted(self._log.items()):
            take = [r for r in records if r.offset >= self._next[p]][:7]
            out.extend(take)
            if take:
                self._next[p] = take[-1].offset + 1
        return out, []

    def positions(self) -> dict[int, int]:
        return dict(self._next)

    def end_offsets(self) -> dict[int, int]:
        return {p: records[-1].offset + 1 for p, records in self._log.items() if records}

    def close(self) -> None:
        pass


def drain(tail: ClusterTail, clock: list[float]) -> None:
    for _ in range(500):
        clock[0] += 6.0  # past the periodic check each step: commits, lag, caught-up
        if tail.step() == 0 and tail.step() == 0:
            return


def run(engine: Engine, first: Mapping[int, list[TxnLogRecord]], then: Mapping[int, list[TxnLogRecord]],
        ) -> tuple[LatestState, ClusterTail]:
    sessions = registered(engine)
    clock = [1_000.0]
    before = ClusterTail("c", "h", lambda p: OffsetTail(first, p), sessions, LatestState(["c"]),
                         clock=lambda: clock[0], read_timeout_ms=0)
    drain(before, clock)
    before.close()
    state = LatestState(["c"])
    after = ClusterTail("c", "h", lambda p: OffsetTail(then, p), sessions, state, clock=lambda: clock[0],
                        read_timeout_ms=0)
    drain(after, clock)
    return state, after


def test_resuming_past_compacted_records_reports_the_gap(engine: Engine) -> None:
    full = the_log(ids=1, transactions=10)[0]  # one id on partition 0, offsets 0..34
    # Down after offset 11; meanwhile the cleaner removed offsets 12..20 (superseded by the id's later records).
    first = {0: full[:12]}
    compacted = {0: [r for r in full if not 12 <= r.offset <= 20]}
    state, _ = run(engine, first, compacted)
    view = state.get("c")
    assert view is not None
    history = view.history
    assert history.gaps == (HistoryGap(0, 12, 20, full[11].timestamp_ms, full[21].timestamp_ms),)
    assert (history.gap_count, history.gap_records) == (1, 9)
    registry = CollectorRegistry()
    registry.register(HistoryCollector(state))
    assert registry.get_sample_value("txnwatch_history_gap_total", {"cluster": "c"}) == 1
    assert registry.get_sample_value("txnwatch_history_gap_records_total", {"cluster": "c"}) == 9
    assert registry.get_sample_value("txnwatch_history_gap_last_start_timestamp_seconds",
                                     {"cluster": "c"}) == (full[11].timestamp_ms or 0) / 1000
    assert registry.get_sample_value("txnwatch_history_gap_last_end_timestamp_seconds",
                                     {"cluster": "c"}) == (full[21].timestamp_ms or 0) / 1000


def test_resuming_where_nothing_was_cleaned_reports_no_gap(engine: Engine) -> None:
    full = the_log(ids=2, transactions=5)
    state, _ = run(engine, {p: r[:9] for p, r in full.items()}, full)
    view = state.get("c")
    assert view is not None and view.history.gaps == () and view.history.gap_count == 0


def test_a_first_start_on_a_compacted_log_is_not_a_gap_but_a_later_hole_is(engine: Engine) -> None:
    """History before txnwatch first read the log was never its to miss; once caught up, a hole is a gap."""
    full = the_log(ids=1, transactions=10)[0]
    already_compacted = [r for r in full if not 3 <= r.offset <= 8]
    sessions = registered(engine)
    clock = [1_000.0]
    log = {0: [r for r in already_compacted if r.offset < 25]}
    state = LatestState(["c"])
    tail = ClusterTail("c", "h", lambda p: OffsetTail(log, p), sessions, state, clock=lambda: clock[0],
                       read_timeout_ms=0)
    drain(tail, clock)
    view = state.get("c")
    assert view is not None and view.history.gap_count == 0
    # Caught up at 25; the tail then falls behind and offsets 25..27 are cleaned before it reads them.
    log[0] = [r for r in already_compacted if r.offset < 25 or r.offset > 27]
    drain(tail, clock)
    view = state.get("c")
    assert view is not None
    assert [(g.first_offset, g.last_offset, g.records) for g in view.history.gaps] == [(25, 27, 3)]


def test_under_an_id_pattern_the_tail_keeps_only_the_tenants_ids_and_still_advances(engine: Engine) -> None:
    """transactional_id_pattern scopes exact history too: other tenants' records move the positions (and are
    checked for gaps) but are neither applied nor stored."""
    from txnwatch.collect.txnlog_tail import cluster_id_for
    from txnwatch.store import txnlog as store_txnlog

    log = the_log(ids=4, transactions=3)  # app-0 .. app-3 on partitions 0 and 1
    sessions = registered(engine)
    clock = [1_000.0]
    tail = ClusterTail("c", "h", lambda p: OffsetTail(log, p), sessions, LatestState(["c"]), clock=lambda: clock[0],
                       read_timeout_ms=0, keeps=lambda tid: tid in {"app-1", "app-2"})
    drain(tail, clock)
    with sessions() as session:
        resumed = store_txnlog.load(session, cluster_id_for(sessions, "c"))
    assert set(resumed.state.ids) == {"app-1", "app-2"}
    assert resumed.positions == {p: len(records) for p, records in log.items()}
    assert resumed.counters["commit"] == 2 * 3
