"""/metrics shows each id's state as the API does (issue 24 item 1): the log's where it speaks in exact mode, the
poll's for the others and whenever the log is not read."""

from __future__ import annotations

from txnwatch.core.model import ClusterSnapshot, TransactionDescription, TxnState
from txnwatch.core.views import EXACT, POLLING, ClusterView, HistoryView
from txnwatch.detect.txnlog import IdState
from txnwatch.metrics.findings import describe_findings

NOW_MS = 1_700_000_100_000


def _polled(tid: str, state: TxnState, start_ms: int) -> TransactionDescription:
    return TransactionDescription(tid, 1, state, 7, 0, 60_000, start_ms, frozenset())


def _logged(state: TxnState, start_ms: int | None) -> IdState:
    return IdState(state, 7, 1, 30_000, start_ms, NOW_MS - 1_000, (), 2, 2, None, 0, 10)


def _ages(mode: str) -> dict[tuple[str, str], float]:
    snapshot = ClusterSnapshot(cluster="c", taken_at_ms=NOW_MS, duration_ms=5, transactions={
        # the poll landed mid-transaction; the log has the commit since
        "committed": _polled("committed", TxnState.ONGOING, NOW_MS - 9_000),
        # both sources open, with different start times (the log's is the coordinator's own)
        "both": _polled("both", TxnState.ONGOING, NOW_MS - 5_000),
        "polled-only": _polled("polled-only", TxnState.PREPARE_COMMIT, NOW_MS - 3_000)})
    history = HistoryView(mode=mode, states={"committed": _logged(TxnState.COMPLETE_COMMIT, NOW_MS - 9_000),
                                             "both": _logged(TxnState.PREPARE_COMMIT, NOW_MS - 6_000),
                                             "logged-only": _logged(TxnState.ONGOING, NOW_MS - 2_000)})
    view = ClusterView(name="c", up=True, snapshot=snapshot, history=history)
    return {(s.labels["transactional_id"], s.labels["state"]): s.value
            for family in describe_findings([view], now_s=NOW_MS / 1000)
            if family.name == "txnwatch_transaction_age_seconds" for s in family.samples}


def test_exact_mode_shows_the_logs_state_and_polling_fills_in() -> None:
    assert _ages(EXACT) == {("both", "PrepareCommit"): 6.0, ("logged-only", "Ongoing"): 2.0,
                            ("polled-only", "PrepareCommit"): 3.0}


def test_polling_mode_shows_the_polls() -> None:
    assert _ages(POLLING) == {("committed", "Ongoing"): 9.0, ("both", "Ongoing"): 5.0,
                              ("polled-only", "PrepareCommit"): 3.0}
