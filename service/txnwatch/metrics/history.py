"""/metrics for where coordinator history comes from, and what only the transaction log can tell.

The commit/abort/fencing/epoch-bump families in :mod:`txnwatch.metrics.findings` take their values
from the log when a cluster is in exact mode; this collector adds the mode itself and
the log-only counters (producer id changes, expirations, InitProducerId, records read,
unknown records), the tail's lag, and the log's view of open, stuck and over-long
transactions.  Names are documented in docs/metrics.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from txnwatch.core.views import EXACT, POLLING, LatestState
from txnwatch.core.vocabulary import TxnEvent

#: HistoryView.counters keys -> (family, help); cumulative since the cluster's first tail (stored).
LOG_COUNTERS = {
    TxnEvent.PRODUCER_ID_CHANGE: ("txnwatch_producer_id_changes", ("Transactional ids moved to a new producer id (KIP-360: "
                           "epoch exhaustion or a fresh InitProducerId), from the transaction log.")),
    TxnEvent.EXPIRED: ("txnwatch_transactional_id_expirations", ("Transactional ids expired by the coordinator "
                "(transactional.id.expiration.ms; tombstones in the transaction log).")),
    TxnEvent.INIT_PRODUCER_ID: ("txnwatch_init_producer_id", ("InitProducerId on an idle id (a producer started or "
                         "restarted with it), from the transaction log.")),
    "records": ("txnwatch_txnlog_records", "__transaction_state records read and applied."),
    TxnEvent.UNKNOWN_RECORD: ("txnwatch_txnlog_unknown_records", ("Transaction log records txnwatch could not decode "
                       "(new value versions, damaged bytes); kept with their raw bytes as anomalies.")),
    TxnEvent.UNKNOWN_STATE: ("txnwatch_txnlog_unknown_states", ("Transaction log records with a transaction status this "
                      "txnwatch does not know.")),
    TxnEvent.UNKNOWN_FIELDS: ("txnwatch_txnlog_unknown_fields", ("Transaction log records with tagged fields or a value "
                       "version this txnwatch does not know (decoded, the rest kept raw).")),
}


class HistoryCollector(Collector):
    def __init__(self, state: LatestState) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        mode = GaugeMetricFamily("txnwatch_history_mode", "1 for the mode coordinator history comes from: exact "
                                 "(the transaction log) or polling (fallback; see /api/v1/clusters for why).",
                                 labels=["cluster", "mode"])
        lag = GaugeMetricFamily("txnwatch_txnlog_lag_records", "Records in __transaction_state not yet applied.",
                                labels=["cluster"])
        last = GaugeMetricFamily("txnwatch_txnlog_last_record_timestamp_seconds",
                                 "Coordinator time of the newest applied transaction log record.", labels=["cluster"])
        ids = GaugeMetricFamily("txnwatch_txnlog_transactional_ids", "Transactional ids the log currently holds.",
                                labels=["cluster"])
        open_ = GaugeMetricFamily("txnwatch_txnlog_open_transactions", "Open transactions (Ongoing, Prepare*) per "
                                  "the log.", labels=["cluster"])
        stuck = GaugeMetricFamily("txnwatch_txnlog_stuck_prepare", "Transactions in Prepare* longer than "
                                  "detection.prepare_stuck_seconds, per the log.", labels=["cluster"])
        long_ = GaugeMetricFamily("txnwatch_txnlog_long_transactions", "Ongoing transactions past their "
                                  "transaction.timeout.ms plus grace, per the log.", labels=["cluster"])
        gaps = CounterMetricFamily("txnwatch_history_gap", "Runs of __transaction_state offsets compacted away before "
                                   "this process's tail read them (history gaps; since the process started).",
                                   labels=["cluster"])
        gap_records = CounterMetricFamily("txnwatch_history_gap_records", "Transaction log records compacted away "
                                          "before they were read: their transitions are lost, so the log-derived "
                                          "counters are lower bounds over the gaps' spans.", labels=["cluster"])
        gap_start = GaugeMetricFamily("txnwatch_history_gap_last_start_timestamp_seconds", "Coordinator time of the "
                                      "last record read before the newest history gap (absent when unknown).",
                                      labels=["cluster"])
        gap_end = GaugeMetricFamily("txnwatch_history_gap_last_end_timestamp_seconds", "Coordinator time of the "
                                    "first record read after the newest history gap.", labels=["cluster"])
        counters = {key: CounterMetricFamily(name, doc, labels=["cluster"]) for key, (name, doc) in LOG_COUNTERS.items()}
        for view in self._state.views():
            h = view.history
            for m in (EXACT, POLLING):
                mode.add_metric([view.name, m], 1.0 if h.mode == m else 0.0)
            for key, family in counters.items():
                family.add_metric([view.name], h.counters.get(key, 0))
            gaps.add_metric([view.name], h.gap_count)
            gap_records.add_metric([view.name], h.gap_records)
            if h.gaps and h.gaps[-1].after_ms is not None:
                gap_start.add_metric([view.name], h.gaps[-1].after_ms / 1000)
            if h.gaps and h.gaps[-1].before_ms is not None:
                gap_end.add_metric([view.name], h.gaps[-1].before_ms / 1000)
            if not h.exact:
                continue
            if h.lag_records is not None:
                lag.add_metric([view.name], h.lag_records)
            if h.last_record_at_ms is not None:
                last.add_metric([view.name], h.last_record_at_ms / 1000)
            ids.add_metric([view.name], h.ids)
            open_.add_metric([view.name], h.open_transactions)
            stuck.add_metric([view.name], h.stuck_prepare)
            long_.add_metric([view.name], h.long_transactions)
        yield from (mode, lag, last, ids, open_, stuck, long_, gaps, gap_records, gap_start, gap_end,
                    *counters.values())
