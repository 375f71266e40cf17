"""Connection lifecycle without a cluster: unreachable clusters are an exception, not a hang or a leak."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings, ClusterUnreachable


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_cluster_raises_within_the_timeout_and_leaks_nothing() -> None:
    threads_before = set(threading.enumerate())
    settings = ClusterConnectionSettings(name="gone", bootstrap_servers=(f"127.0.0.1:{_closed_port()}",),
                                         request_timeout_ms=500, connect_timeout_ms=1000)
    connection = ClusterConnection(settings)
    for _ in range(2):
        started = time.monotonic()
        with pytest.raises(ClusterUnreachable) as caught:
            connection.poll()
        assert time.monotonic() - started < 1 + 3  # the connect timeout, with room for a loaded machine
        assert caught.value.cluster == "gone" and "bootstrap" in caught.value.reason
        assert connection.last_poll_round_trips == 0
    connection.close()
    assert set(threading.enumerate()) <= threads_before


def test_closed_connection_refuses_to_poll() -> None:
    connection = ClusterConnection(ClusterConnectionSettings(name="x", bootstrap_servers=("127.0.0.1:1",)))
    connection.close()
    with pytest.raises(RuntimeError):
        connection.poll()
