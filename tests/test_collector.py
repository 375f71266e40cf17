"""Collector scheduling: no overlap per cluster, no cluster delays another, failures back off."""

from __future__ import annotations

import threading
import time
from typing import Any

from prometheus_client.registry import CollectorRegistry

from txnwatch.collect.poll_loop import ClusterPollLoop, Collector
from txnwatch.core.backoff import Backoff
from txnwatch.core.findings import Findings
from txnwatch.core.model import ClusterSnapshot, RequestError
from txnwatch.core.views import LatestState
from txnwatch.metrics.poll_counters import PollMetrics


class FakePoller:
    def __init__(self, name: str, delay: float = 0.0, fail: bool = False) -> None:
        self.name, self.delay, self.fail = name, delay, fail
        self.active = 0
        self.max_active = 0
        self.calls = 0
        self.lock = threading.Lock()

    def poll(self) -> ClusterSnapshot:
        with self.lock:
            self.active += 1
            self.calls += 1
            self.max_active = max(self.max_active, self.active)
        try:
            time.sleep(self.delay)
            if self.fail:
                raise ConnectionError("no broker answered")
            now = int(time.time() * 1000)
            return ClusterSnapshot(cluster=self.name, taken_at_ms=now, duration_ms=int(self.delay * 1000),
                                   errors=(RequestError("DescribeProducers", "t-0", 6, "NOT_LEADER_OR_FOLLOWER"),))
        finally:
            with self.lock:
                self.active -= 1

    def close(self) -> None:
        pass


class RecordingSink:
    def __init__(self) -> None:
        self.calls: list[tuple[str, bool, str | None]] = []

    def on_poll(self, cluster: str, snapshot: Any, findings: Any, error: str | None, now_ms: int) -> None:
        self.calls.append((cluster, snapshot is not None, error))


def count_evaluate(state: int, snapshot: ClusterSnapshot, now_ms: int) -> tuple[int, Findings]:
    return state + 1, Findings(snapshot.cluster, now_ms)


def make(name: str, poller: FakePoller, state: LatestState, sink: RecordingSink, **kw: Any) -> ClusterPollLoop:
    return ClusterPollLoop(name, lambda: poller, count_evaluate, lambda: 0, [sink], state, **kw)


def test_slow_cluster_never_delays_another_and_never_overlaps() -> None:
    state, sink = LatestState(["slow", "fast"]), RecordingSink()
    slow, fast = FakePoller("slow", delay=1.5), FakePoller("fast")
    collector = Collector([(make("slow", slow, state, sink), 0.2), (make("fast", fast, state, sink), 0.2)])
    collector.start()
    time.sleep(2.0)
    collector.stop()
    assert slow.max_active == 1, "polls of one cluster overlapped"
    assert fast.calls >= 6, f"fast cluster polled only {fast.calls} times next to a slow one"
    assert slow.calls <= 2


def test_failures_mark_down_back_off_and_recover() -> None:
    clock = [1000.0]
    state, sink = LatestState(["c"]), RecordingSink()
    registry = CollectorRegistry(auto_describe=False)
    poller = FakePoller("c", fail=True)
    c = ClusterPollLoop("c", lambda: poller, count_evaluate, lambda: 0, [sink, PollMetrics(registry, ["c"])], state,
                         clock=lambda: clock[0], backoff=Backoff(base_s=10, cap_s=40))
    c.poll_once()
    view = state.get("c")
    assert view is not None and not view.up and "no broker answered" in (view.last_error or "")
    c.poll_once()  # within backoff: not attempted
    assert poller.calls == 1
    for expected_delay in (10, 20, 40, 40):
        clock[0] += expected_delay - 0.5
        c.poll_once()
        calls = poller.calls
        clock[0] += 0.5
        c.poll_once()
        assert poller.calls == calls + 1
    poller.fail = False
    clock[0] += 40
    c.poll_once()
    view = state.get("c")
    assert view is not None and view.up and view.consecutive_failures == 0 and view.last_error is None
    def total(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(f"txnwatch_{name}_total", {"cluster": "c", **labels})

    assert (total("polls"), total("poll_failures")) == (6, 5)
    assert (total("request_errors", api="DescribeProducers"), total("request_errors", api="ListOffsets")) == (1, 0)
    assert sink.calls[-1] == ("c", True, None)
    assert any(err for _, _, err in sink.calls)


def test_detection_failure_keeps_daemon_and_previous_state() -> None:
    state, sink = LatestState(["c"]), RecordingSink()

    def broken(prev: Any, snap: ClusterSnapshot, now_ms: int) -> tuple[Any, Any]:
        raise ValueError("unexpected answer")

    c = ClusterPollLoop("c", lambda: FakePoller("c"), broken, lambda: "prev", [sink], state)
    c.poll_once()
    view = state.get("c")
    assert view is not None and view.up and view.findings is None
    assert c._detector_state == "prev"


def test_sink_failure_does_not_stop_other_sinks() -> None:
    state, good = LatestState(["c"]), RecordingSink()

    class Broken:
        def on_poll(self, *args: Any) -> None:
            raise RuntimeError("db down")

    c = ClusterPollLoop("c", lambda: FakePoller("c"), count_evaluate, lambda: 0, [Broken(), good], state)
    c.poll_once()
    assert good.calls == [("c", True, None)]


def test_followers_do_not_poll_and_each_term_starts_from_the_state_read_for_it() -> None:
    state, sink = LatestState(["c"]), RecordingSink()
    leading = [False]
    poller = FakePoller("c")
    starts = iter([0, 10])  # what the store holds open when each term begins
    c = ClusterPollLoop("c", lambda: poller, count_evaluate, lambda: next(starts), [sink], state,
                         leading=lambda: leading[0])
    c.poll_once()
    assert poller.calls == 0
    leading[0] = True
    c.poll_once()
    c.poll_once()
    assert c._detector_state == 2
    leading[0] = False
    c.poll_once()
    leading[0] = True
    c.poll_once()
    assert poller.calls == 3 and c._detector_state == 11


def test_a_new_epoch_is_a_new_term_and_a_lost_cluster_leaves_no_stale_view() -> None:
    """Leases: losing the cluster and winning it back between two ticks still restarts detection from the
    store (the epoch changed), and a replica that lost the cluster stops exporting it (its view is reset)."""
    state, sink = LatestState(["c"]), RecordingSink()
    epoch: list[int | None] = [1]
    poller = FakePoller("c")
    starts = iter([0, 100])
    c = ClusterPollLoop("c", lambda: poller, count_evaluate, lambda: next(starts), [sink], state,
                         leading=lambda: epoch[0])
    c.poll_once()
    polled = state.get("c")
    assert c._detector_state == 1 and polled is not None and polled.last_poll_at_ms is not None
    epoch[0] = 3  # lost epoch 1, another replica held 2, this one won 3: all between two ticks
    c.poll_once()
    assert c._detector_state == 101
    epoch[0] = None
    c.poll_once()
    view = state.get("c")
    assert view is not None and view.last_poll_at_ms is None and view.snapshot is None
    assert poller.calls == 2


def test_poll_runs_with_the_cyclic_gc_paused() -> None:
    """The answers of a big poll set off full collections again and again (txnwatch.core.pollwindow)."""
    import gc

    from txnwatch.core.pollwindow import PollWindow

    seen: list[bool] = []

    class GcPoller(FakePoller):
        def poll(self) -> ClusterSnapshot:
            seen.append(gc.isenabled())
            return super().poll()

    was = gc.isenabled()
    gc.enable()
    try:
        state, sink = LatestState(), RecordingSink()
        make("a", GcPoller("a"), state, sink, window=PollWindow()).poll_once()
        assert seen == [False] and gc.isenabled()
        assert sink.calls == [("a", True, None)]
    finally:
        (gc.enable if was else gc.disable)()
