"""One long-lived connection to one cluster: the public face of ``txnwatch.kafka``.

The kafka-python client is created on first use, not in the constructor, so a
collector can be set up while a cluster is down; after the cluster turns out to be
unreachable it is thrown away and bootstrapped afresh on the next poll, which picks
up moved brokers and recovers without outside help.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from types import TracebackType
from typing import TypeVar

from kafka.net.selector import NetworkSelector

from txnwatch.core.model import AbortOutcome, ClusterSnapshot, ResponseRefused, TerminateOutcome, TopicPartition
from txnwatch.kafka.abort import abort_transaction
from txnwatch.kafka.bounded import BoundedManager, RefusalLog
from txnwatch.kafka.broker_metrics import expand_urls, scrape
from txnwatch.kafka.encoded import RequestMemo
from txnwatch.kafka.errors import ClusterUnreachable
from txnwatch.kafka.poll import collect
from txnwatch.kafka.record_count import RecordCounts
from txnwatch.kafka.records import RecordDates
from txnwatch.kafka.settings import ClusterConnectionSettings
from txnwatch.kafka.terminate import terminate_transaction
from txnwatch.kafka.wire import ManagerWire

log = logging.getLogger(__name__)
T = TypeVar("T")


class _Client:
    """kafka-python's IO loop plus connection manager: what ``KafkaAdminClient`` owns, minus its blocking API."""

    def __init__(self, settings: ClusterConnectionSettings, refusals: RefusalLog) -> None:
        config = settings.client_config()
        self.max_in_flight: int = config["max_in_flight_requests_per_connection"]
        self.net = NetworkSelector(client_id=settings.client_id)
        # Every connection reads its answers under the cluster's bounds (frame size, entries: kafka/bounded.py).
        self.manager = BoundedManager(self.net, settings.response_bounds, refusals, **config)
        self.net.start()
        try:
            self.manager.bootstrap(settings.connect_timeout_ms)
        except BaseException:
            self.close()
            raise

    def run(self, coroutine: Callable[[], Awaitable[T]]) -> T:
        """Run on the client's IO thread, blocking the caller until done."""
        result: T = self.manager.run(coroutine)
        return result

    def close(self) -> None:
        try:
            self.net.run(self.manager.close)
        except Exception:
            log.debug("closing kafka connections failed", exc_info=True)
        self.net.close()


class ClusterConnection:
    """Polls one cluster into :class:`~txnwatch.core.model.ClusterSnapshot` objects.

    Safe to share between threads: polls and admin aborts may overlap, and the
    underlying IO loop serialises their network work.
    """

    def __init__(self, settings: ClusterConnectionSettings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._client: _Client | None = None
        self._max_transaction_timeout_ms: int | None = None
        self._last_round_trips = 0
        self._closed = False
        # Answers refused over a bound (kafka/bounded.py), by any of the client's connections.
        self._refusals = RefusalLog()
        # Timestamps of first unconsumed records, kept across polls (and reconnects): they never change.
        self._record_dates = RecordDates(settings.record_fetch_limit)
        # Records a read_committed consumer gets up to the LSO, per (partition, committed offset), counted on.
        self._record_counts = RecordCounts(settings.record_fetch_limit)
        # The poll's ListOffsets and DescribeProducers requests, encoded once while leaders stay put (issue 25).
        self._requests = RequestMemo()

    @property
    def settings(self) -> ClusterConnectionSettings:
        return self._settings

    @property
    def last_poll_round_trips(self) -> int:
        """Sequential network round trips of the most recent poll (requests in one round overlap)."""
        return self._last_round_trips

    def poll(self) -> ClusterSnapshot:
        """One snapshot of the cluster; per-request failures are inside it.

        Raises :class:`ClusterUnreachable` when no broker answers at all.
        """
        taken_at_ms = int(time.time() * 1000)
        started = time.monotonic()
        self._last_round_trips = 0
        client = self._connected()
        self._refusals.take()  # a poll fails for its own refusals only
        wire = ManagerWire(client.manager, self._settings.request_timeout_ms, client.max_in_flight)
        try:
            collected = client.run(lambda: collect(wire, self._settings, taken_at_ms=taken_at_ms,
                                                   known_max_timeout_ms=self._max_transaction_timeout_ms,
                                                   record_dates=self._record_dates,
                                                   record_counts=self._record_counts,
                                                   requests=self._requests))
        except Exception as exc:
            # Unreachable, or kafka-python's IO loop broke: either way the next poll starts afresh.
            self._discard(client)
            self._raise_refused(exc)
            raise
        finally:
            self._last_round_trips = wire.round_trips
        # An answer refused over a bound fails the poll: what the other answers say may be partial, and the
        # cluster must show why (kafka/bounded.py).
        self._raise_refused(None, client)
        if collected.max_transaction_timeout_ms is not None:
            self._max_transaction_timeout_ms = collected.max_transaction_timeout_ms
        snapshot = collected.snapshot
        if self._settings.reads_broker_metrics:
            # The brokers' own verification figures ride along with the poll; a slow exporter costs at most
            # broker_metrics_timeout_ms (all brokers in parallel), a dead one is an error in the snapshot.
            urls = expand_urls(self._settings.broker_metrics_url_template, dict(self._settings.broker_metrics_urls),
                               snapshot.brokers)
            snapshot = replace(snapshot, broker_verification=scrape(urls, self._settings.broker_metrics_timeout_ms))
        return replace(snapshot, duration_ms=int((time.monotonic() - started) * 1000))

    def probe(self) -> None:
        """Bootstrap if not connected (one connection, ApiVersions, Metadata); raises ClusterUnreachable.

        The collector calls this while it backs off a failing cluster: far cheaper than a poll,
        and a client that bootstrapped is kept for the poll that follows.
        """
        self._connected()

    def abort_transaction(self, tp: TopicPartition, producer_id: int | None, producer_epoch: int | None,
                          coordinator_epoch: int | None = None, *, dry_run: bool = True,
                          start_offset: int | None = None) -> AbortOutcome:
        """Write an ABORT marker for an open transaction on ``tp``, as ``kafka-transactions.sh abort`` does.

        ``coordinator_epoch=None`` takes the one the partition leader reports; ``start_offset`` (with no
        producer id) names the transaction by where it started, as Kafka's tool does.  Dry run by
        default: an abort is irreversible and a caller should look before it leaps.
        """
        client = self._connected()
        wire = ManagerWire(client.manager, self._settings.request_timeout_ms, client.max_in_flight)
        try:
            return client.run(lambda: abort_transaction(
                wire, self._settings.name, tp, producer_id, producer_epoch, coordinator_epoch, dry_run, start_offset))
        except Exception:
            self._discard(client)
            raise

    def terminate_transaction(self, transactional_id: str, *, dry_run: bool = True) -> TerminateOutcome:
        """Abort ``transactional_id``'s ongoing transaction, as Kafka 4.1's ``forceTerminateTransaction`` does
        (txnwatch.kafka.terminate): refused on clusters older than 4.1 and when the id has none ongoing."""
        client = self._connected()
        wire = ManagerWire(client.manager, self._settings.request_timeout_ms, client.max_in_flight)
        try:
            return client.run(lambda: terminate_transaction(wire, self._settings.name, transactional_id,
                                                            dry_run=dry_run, sleep=client.net.sleep,
                                                            timeout_ms=self._settings.request_timeout_ms))
        except Exception:
            self._discard(client)
            raise

    def close(self) -> None:
        with self._lock:
            self._closed = True
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> ClusterConnection:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _connected(self) -> _Client:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"connection to cluster {self._settings.name!r} is closed")
            if self._client is None:
                self._refusals.take()
                try:
                    self._client = _Client(self._settings, self._refusals)
                except Exception as exc:
                    self._raise_refused(exc)
                    raise ClusterUnreachable(self._settings.name, f"bootstrap failed: {exc}{self._security_hint()}") from exc
            return self._client

    def _raise_refused(self, cause: Exception | None, client: _Client | None = None) -> None:
        """Raise ResponseRefused if an answer was refused since the refusals were last taken (the cause's
        "Unable to bootstrap" or a request's failure says less than the refusal does)."""
        refusals = self._refusals.take()
        if not refusals:
            return
        if client is not None:
            self._discard(client)
        raise ResponseRefused(self._settings.name, refusals) from cause

    def _security_hint(self) -> str:
        """kafka-python reports a refused login or handshake as a timeout; say where to look instead."""
        s = self._settings
        provider_error = getattr(s.sasl_provider, "last_error", None)
        if provider_error:
            return f" (sasl_mechanism {s.sasl_mechanism}: {provider_error})"
        if s.security_protocol.startswith("SASL"):
            return (f" (security_protocol {s.security_protocol}, sasl_mechanism {s.sasl_mechanism}: check the "
                    "SASL credentials and that this listener enables the mechanism)")
        if s.security_protocol == "SSL":
            return " (security_protocol SSL: check ssl_cafile and, for mutual TLS, ssl_certfile/ssl_keyfile)"
        return ""

    def _discard(self, client: _Client) -> None:
        with self._lock:
            if self._client is client:
                self._client = None
                self._max_transaction_timeout_ms = None
        client.close()
