"""Failed authentication per client (issue 23 item 7): the window, the 429, the bounds on memory, log and audit."""

from __future__ import annotations

import logging
import multiprocessing
import tracemalloc

import pytest
from prometheus_client import CollectorRegistry

from txnwatch.metrics.auth_failures import AuthFailureMetrics, shared_counts
from txnwatch.serve.api.throttle import AuthThrottle, client_key


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def throttle(clock: Clock, limit: int = 5, window_s: float = 60, *, max_clients: int = 10_000,
             max_lines_per_window: int = 20, max_audits_per_window: int = 100) -> AuthThrottle:
    return AuthThrottle(limit=limit, window_s=window_s, clock=clock, max_clients=max_clients,
                        max_lines_per_window=max_lines_per_window, max_audits_per_window=max_audits_per_window)


def test_a_client_is_throttled_after_the_limit_until_its_window_ends() -> None:
    clock = Clock()
    t = throttle(clock)
    for attempt in range(1, 5):
        assert t.blocked("10.0.0.1", "read") is None
        assert t.failed("10.0.0.1", "read", "wrong bearer token").retry_after_s is None, attempt
    clock.now += 10
    assert t.failed("10.0.0.1", "read", "wrong bearer token").retry_after_s == 50  # the 5th: window began at 1000
    assert t.blocked("10.0.0.1", "read") == 50
    assert t.blocked("10.0.0.2", "read") is None  # another client is not affected
    clock.now += 49.5
    assert t.blocked("10.0.0.1", "read") == 1  # rounded up: never "retry in 0 s"
    clock.now += 0.5
    assert t.blocked("10.0.0.1", "read") is None  # the window ended
    assert t.failed("10.0.0.1", "read", "wrong bearer token").retry_after_s is None  # a fresh window


def test_successes_and_other_clients_do_not_reset_a_window() -> None:
    clock = Clock()
    t = throttle(clock, limit=3)
    t.failed("a", "login", "x")
    t.failed("b", "login", "x")
    t.failed("a", "admin", "x")  # kinds share the client's count
    assert t.blocked("a", "read") is None
    t.failed("a", "read", "x")
    assert t.blocked("a", "read") == 60


def test_memory_is_bounded_whatever_the_number_of_clients() -> None:
    """An attacker rotating through 50,000 addresses (ports never count; IPv6 counts per /64)."""
    clock = Clock()
    t = throttle(clock, max_clients=1000)
    tracemalloc.start()
    for i in range(50_000):
        t.failed(f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}", "read", "x")
        if i == 1_999:
            baseline, _ = tracemalloc.get_traced_memory()
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(t) == 1000
    assert current - baseline < 100_000, current - baseline  # flat once full (1000 windows of ~200 bytes)
    # The most recent failures are the ones kept: the newest client is still counted.
    assert t.failed("10.0.195.79", "read", "x").retry_after_s is None and len(t) == 1000


def test_one_log_line_per_client_per_window_and_a_cap_over_all_clients(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    t = throttle(clock, limit=10, max_lines_per_window=3)
    caplog.set_level(logging.WARNING, "txnwatch.auth")
    for _ in range(300):
        t.failed("192.0.2.7", "read", "wrong bearer token")
    assert len(caplog.records) == 1
    line = caplog.records[0].getMessage()
    assert "192.0.2.7" in line and "wrong bearer token" in line and "after 10 failures in 60s" in line
    for i in range(20):  # 20 more clients in the same window: 2 more lines, 18 left out
        t.failed(f"192.0.2.{100 + i}", "login", "wrong token on the console login")
    assert len(caplog.records) == 3
    clock.now += 60
    t.failed("192.0.2.7", "read", "wrong bearer token")  # a new window: its line says what was left out
    assert len(caplog.records) == 4
    assert "18 such lines about other clients left out" in caplog.records[-1].getMessage()


def test_audit_rows_up_to_the_limit_per_client_and_a_cap_over_all() -> None:
    clock = Clock()
    t = throttle(clock, limit=4, max_audits_per_window=10)
    audits = [t.failed("198.51.100.1", "admin", "x").audit for _ in range(300)]
    assert audits == [True] * 4 + [False] * 296
    others = [t.failed(f"198.51.100.{i}", "admin", "x").audit for i in range(2, 12)]
    assert others == [True] * 6 + [False] * 4


def test_failures_are_counted_by_kind_and_result() -> None:
    registry = CollectorRegistry(auto_describe=False)
    t = AuthThrottle(limit=2, window_s=60, metrics=AuthFailureMetrics(registry), clock=Clock())
    for _ in range(2):
        t.failed("c", "admin", "x")
    for _ in range(7):
        t.blocked("c", "admin")
    t.failed("d", "login", "x")

    def value(kind: str, result: str) -> float | None:
        return registry.get_sample_value("txnwatch_auth_failures_total", {"kind": kind, "result": result})

    assert (value("admin", "refused"), value("admin", "throttled")) == (2, 7)
    assert (value("login", "refused"), value("read", "refused"), value("read", "throttled")) == (1, 0, 0)


@pytest.mark.parametrize(("host", "key"), [
    pytest.param("203.0.113.9", "203.0.113.9", id="ipv4"),
    pytest.param("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64", id="ipv6-per-64"),
    pytest.param("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64", id="same-64"),
    pytest.param("::ffff:203.0.113.9", "203.0.113.9", id="ipv4-mapped"),
    pytest.param(None, "unknown", id="no-client"),
    pytest.param("x" * 500, "x" * 64, id="not-an-ip-bounded"),
])
def test_client_keys(host: str | None, key: str) -> None:
    assert client_key(host) == key


def _fail_in_a_worker(counts: object, failures: int) -> None:
    t = AuthThrottle(limit=3, window_s=60, metrics=AuthFailureMetrics(None, counts))
    for _ in range(failures):
        t.failed("192.0.2.1", "admin", "x")
    t.blocked("192.0.2.1", "admin")


def test_api_worker_processes_add_to_the_collectors_counter() -> None:
    """api.workers: the workers count, the collecting process renders /metrics (it registers the counter)."""
    counts = shared_counts()
    registry = CollectorRegistry(auto_describe=False)
    AuthFailureMetrics(registry, counts)
    spawn = multiprocessing.get_context("spawn")
    workers = [spawn.Process(target=_fail_in_a_worker, args=(counts, 5)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    assert registry.get_sample_value("txnwatch_auth_failures_total", {"kind": "admin", "result": "refused"}) == 10
    assert registry.get_sample_value("txnwatch_auth_failures_total", {"kind": "admin", "result": "throttled"}) == 2
