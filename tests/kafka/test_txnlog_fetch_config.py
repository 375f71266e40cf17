"""The tail's consumer asks brokers to hold a fetch until there is something worth a round-trip (issue 25).

kafka-python's default ``fetch_min_bytes`` of 1 answered every record of a trickling producer in its own fetch:
on the peers lab the tail's I/O thread alone spent 1.8 CPU-s a minute.  A broker now answers once 64 KiB are
there (a log being read back fills that at once) or after the max wait, 2 s by default (what a trickle waits, at
most: ``transaction_log.fetch_wait_ms``; a quiet log costs per fetch round, not per record)."""

from __future__ import annotations

from typing import Any

import pytest

from txnwatch.kafka import txnlog
from txnwatch.kafka.settings import ClusterConnectionSettings


class Refused(Exception):
    pass


def consumer_config(monkeypatch: pytest.MonkeyPatch, **settings: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def fake_consumer(**config: Any) -> None:
        seen.update(config)
        raise Refused  # nothing more of the tail is built

    monkeypatch.setattr(txnlog, "KafkaConsumer", fake_consumer)
    with pytest.raises(Refused):
        txnlog.TransactionLogTail(ClusterConnectionSettings(name="c", bootstrap_servers=("127.0.0.1:9",), **settings))
    return seen


def test_a_trickle_is_fetched_in_batches_within_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    config = consumer_config(monkeypatch)
    assert config["fetch_min_bytes"] == 64 * 1024
    assert config["fetch_max_wait_ms"] == txnlog.FETCH_MAX_WAIT_MS == 2_000
    assert config["max_poll_records"] == 10_000


def test_the_operator_sets_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake_consumer(**config: Any) -> None:
        seen.update(config)
        raise Refused

    monkeypatch.setattr(txnlog, "KafkaConsumer", fake_consumer)
    for wait in (100, 700, 5_000):
        with pytest.raises(Refused):
            txnlog.TransactionLogTail(ClusterConnectionSettings(name="c", bootstrap_servers=("127.0.0.1:9",)),
                                      fetch_wait_ms=wait)
        assert seen["fetch_max_wait_ms"] == wait  # under half the default request timeout (10 s)


def test_the_max_wait_stays_under_half_the_request_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    assert consumer_config(monkeypatch, request_timeout_ms=600)["fetch_max_wait_ms"] == 500
    assert consumer_config(monkeypatch, request_timeout_ms=1_500)["fetch_max_wait_ms"] == 750
    assert consumer_config(monkeypatch, request_timeout_ms=2_000)["fetch_max_wait_ms"] == 1_000
    assert consumer_config(monkeypatch, request_timeout_ms=4_000)["fetch_max_wait_ms"] == 2_000
    assert consumer_config(monkeypatch, request_timeout_ms=10_000)["fetch_max_wait_ms"] == 2_000
    assert consumer_config(monkeypatch, request_timeout_ms=1)["fetch_max_wait_ms"] == 500  # floor of 1 s / 2


def test_a_full_read_shortens_the_wait_until_a_read_comes_back_short() -> None:
    """kafka-python leaves a partition whose records it is still handing out out of the next fetch; with every
    other partition caught up the broker holds that fetch for the whole wait, and the busy partition waits behind
    it.  While reads fill the poll the wait is short; a trickle keeps the long one."""
    waits: list[int] = []
    wait = txnlog.FetchWait(quiet_ms=2_000, full=10_000, set_wait=waits.append)
    wait.opening()  # a tail opens as if behind
    for records in (10_000, 10_000, 3, 0, 0, 9_999, 10_000, 10_000, 42):
        wait.after_read(records)
    assert waits == [txnlog.BUSY_FETCH_WAIT_MS, 2_000, txnlog.BUSY_FETCH_WAIT_MS, 2_000]  # only on a change
    short = txnlog.FetchWait(quiet_ms=50, full=10, set_wait=waits.append)
    short.after_read(10)
    assert waits[-1] == 50  # never longer than the operator's own wait
    txnlog.FetchWait(quiet_ms=2_000, full=10, set_wait=None).after_read(10)  # a fetcher it cannot change: nothing


def test_the_wait_control_reaches_kafka_pythons_fetcher_config() -> None:
    """The setter changes what kafka-python's Fetcher reads for every fetch request it builds (its own config);
    a fetcher without such a config gets no setter."""
    from kafka.consumer.fetcher import Fetcher

    from txnwatch.kafka import txnlog_batches

    assert Fetcher.DEFAULT_CONFIG["fetch_max_wait_ms"] == 500  # the key kafka-python's requests read
    config = dict(Fetcher.DEFAULT_CONFIG)
    consumer = type("Consumer", (), {"_fetcher": type("F", (), {"config": config})()})()
    set_wait = txnlog_batches.fetch_wait_control(consumer)
    assert set_wait is not None
    set_wait(100)
    assert config["fetch_max_wait_ms"] == 100
    assert txnlog_batches.fetch_wait_control(object()) is None
    assert txnlog_batches.fetch_wait_control(type("C", (), {"_fetcher": type("F", (), {"config": {}})()})()) is None
