"""The composition root: services start in order, stop in reverse, and a failed start undoes itself."""

from __future__ import annotations

import dataclasses
from functools import partial

import pytest

from txnwatch.core.config import load_settings
from txnwatch.runtime.lifecycle import Service
from txnwatch.runtime.wiring import build_runtime


def test_services_start_in_order_and_stop_in_reverse() -> None:
    settings = load_settings(None, database_url="sqlite://", clusters=[dict(name="c", bootstrap_servers="127.0.0.1:9")])
    runtime = build_runtime(settings)
    # The archive's children last: the first stopped, so nothing writes after the daemon has stopped.
    assert [s.name for s in runtime.services] == ["leadership", "store", "alerting", "transaction-log", "exposition",
                                                  "collector", "archive-children"]
    calls: list[str] = []
    services = tuple(Service(n, partial(calls.append, f"start {n}"), partial(calls.append, f"stop {n}"))
                     for n in ("a", "b", "c"))
    scripted = dataclasses.replace(build_runtime(settings, collect=False), services=services)
    scripted.start()
    scripted.stop()
    assert calls == ["start a", "start b", "start c", "stop c", "stop b", "stop a"]
    runtime.engine.dispose()


def test_a_service_that_fails_to_start_stops_the_ones_before_it() -> None:
    settings = load_settings(None, database_url="sqlite://")
    calls: list[str] = []

    def broken() -> None:
        raise RuntimeError("no")

    runtime = dataclasses.replace(build_runtime(settings, collect=False), services=(
        Service("a", lambda: calls.append("start a"), lambda: calls.append("stop a")),
        Service("b", broken, lambda: calls.append("stop b")),
        Service("c", lambda: calls.append("start c"), lambda: calls.append("stop c")),
    ))
    with pytest.raises(RuntimeError, match="no"):
        runtime.start()
    runtime.stop()  # nothing left to stop twice
    assert calls == ["start a", "stop a"]
