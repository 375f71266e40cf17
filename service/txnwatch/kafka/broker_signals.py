"""The brokers' other transaction signals, picked out of the same JMX exporter output as verification.

Verification (kafka.broker_metrics) is what txnwatch needed the exporters for; the same scrape
carries four more MBeans that say what the brokers themselves think of transactions, which
txnwatch shows beside its own figures (docs/metrics.md, "Brokers' transaction signals").  Each is
optional: a broker on an older Kafka, or an exporter whose rules or ``includeObjectNames`` drop
it, simply does not report it, and the field stays None.  Names were checked on the exporter
output of Kafka 4.4.0 lab brokers (tests/kafka/data), with the same tolerance for naming as
verification: the common Kafka rules (lower case, ``kafka_server_replicamanager_partitionswithlatetransactionscount``)
and the exporter's default naming (``kafka_server_ReplicaManager_Value{name="PartitionsWithLateTransactionsCount"}``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from txnwatch.core.model import BrokerTxnSignals

_LATE = "partitionswithlatetransactionscount"
_LSO_LAG = "laststableoffsetlag"
_UNKNOWN_DESTINATION = "unknowndestinationqueuesize"
_APPEND_RETRY = "logappendretryqueuesize"
_TXN_COORDINATOR = "transaction_coordinator_metrics"  # not group-coordinator-metrics, which has the same attributes
_LOAD_MAX, _LOAD_AVG = "partition_load_time_max", "partition_load_time_avg"


def parse_signals(samples: Iterable[tuple[str, Mapping[str, str], float]]) -> BrokerTxnSignals:
    """(sample name, labels, value) of one exporter answer -> the signals found in it."""
    found: dict[str, float] = {}
    lso_lag: list[tuple[str, int, int]] = []
    for raw_name, raw_labels, value in samples:
        name = raw_name.lower()
        if name.endswith("_created"):
            continue
        labels = {k.lower(): v for k, v in raw_labels.items()}
        full = f"{name}_{labels.get('name', '').lower()}"
        if _LSO_LAG in full:
            partition = labels.get("partition", "")
            if "topic" in labels and partition.isdigit():
                lso_lag.append((labels["topic"], int(partition), int(value)))
            continue
        for key in (_LATE, _UNKNOWN_DESTINATION, _APPEND_RETRY):
            if key in full:
                found[key] = value
        if _TXN_COORDINATOR in name.replace("-", "_"):
            for key in (_LOAD_MAX, _LOAD_AVG):
                if name.replace("-", "_").endswith(key):
                    found[key] = value
    return BrokerTxnSignals(
        late_transaction_partitions=_int(found.get(_LATE)),
        lso_lag=tuple(sorted(lso_lag)) if lso_lag else None,
        marker_unknown_destination_queue=_int(found.get(_UNKNOWN_DESTINATION)),
        marker_log_append_retry_queue=_int(found.get(_APPEND_RETRY)),
        coordinator_load_ms_max=_finite(found.get(_LOAD_MAX)),
        coordinator_load_ms_avg=_finite(found.get(_LOAD_AVG)))


def _int(value: float | None) -> int | None:
    finite = _finite(value)
    return None if finite is None else int(finite)


def _finite(value: float | None) -> float | None:
    """Kafka reports a load time of NaN (avg) or -Infinity (max) when no __transaction_state partition loaded within
    its metrics window (2 samples of 30 s by default: before the first load, and again about a minute after the last
    one): not a figure."""
    return None if value is None or value != value or value in (float("inf"), float("-inf")) else value
