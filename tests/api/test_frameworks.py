"""The frameworks by name in the API: transactions, hanging episodes and LSO stalls say the application behind an
id, and GET /api/v1/lingering lists the Flink sink transactions detection found lingering, with the command that
ends them.  On the seeded database of tests/api/factory.py (``orders-app-0_0`` is a Kafka Streams EOS v1 task id);
the lingering findings are detection's own (txnwatch.detect.evaluate over a snapshot), published as a poll does.
"""

from __future__ import annotations

from dataclasses import replace

from fastapi.testclient import TestClient

from tests.api.conftest import Seeded, make_client, make_settings
from tests.api.factory import BOOTSTRAP, PROD, STAGING
from tests.api.helpers import ok
from tests.unit.detect.builders import TP, TP1, snapshot, txn
from txnwatch.core.model import BrokerRelease, TxnState
from txnwatch.core.views import ClusterView
from txnwatch.detect import INITIAL, evaluate
from txnwatch.runtime.wiring import build_runtime

STREAMS_V1 = {"framework": "kafka_streams_eos_v1", "application": "orders-app", "process": None, "thread": None,
              "task": "0_0", "subtask": None, "checkpoint": None}


def test_transactions_say_their_framework(client: TestClient) -> None:
    items = {i["transactional_id"]: i for i in ok(client, "/api/v1/transactions", limit=1000)["items"]}
    assert items["orders-app-0_0"]["framework"] == STREAMS_V1
    assert items["orders-app-0_1"]["framework"]["task"] == "0_1"
    assert items["idle-1"]["framework"] is None, "an id no naming rule reads has none"
    detail = ok(client, f"/api/v1/transactions/{PROD}/orders-app-0_0")
    assert detail["framework"] == STREAMS_V1


def test_hanging_and_stalls_say_the_framework_of_their_transactional_id(client: TestClient) -> None:
    hanging = [h for h in ok(client, "/api/v1/hanging")["items"] if h["transactional_id"] == "orders-app-0_0"]
    assert hanging and all(h["framework"] == STREAMS_V1 for h in hanging)
    stalls = [s for s in ok(client, "/api/v1/lso-stalls")["items"]
              if s["blocking_transactional_id"] == "orders-app-0_0"]
    assert stalls and all(s["blocking_framework"] == STREAMS_V1 for s in stalls)
    assert all(s["blocking_framework"] is None for s in ok(client, "/api/v1/lso-stalls")["items"]
               if s["blocking_transactional_id"] is None)


NOW = 10_000_000


def _published(seeded: Seeded, release: tuple[int, int]) -> TestClient:
    rt = build_runtime(make_settings(seeded.url), collect=False)
    polled = snapshot(at=NOW, txns=(
        txn("orders-sink-3-1204", pid=42, epoch=1, partitions=(TP, TP1), start=NOW - 90_000, timeout=3_600_000),
        txn("orders-sink-3-1205", pid=43, state=TxnState.COMPLETE_COMMIT, partitions=(), start=NOW - 60_000),
        txn("orders-sink-4-1205", pid=44, partitions=(TP,), start=NOW - 30_000)))
    polled = replace(polled, cluster=PROD, broker_releases=(BrokerRelease(1, release, False, 2),))
    _, findings = evaluate(INITIAL, polled, NOW)
    rt.state.publish(ClusterView(name=PROD, up=True, snapshot=polled, findings=findings))
    rt.state.publish(ClusterView(name=STAGING))
    return make_client(rt)


def test_lingering_lists_what_detection_found_with_the_abort_by_id(seeded: Seeded) -> None:
    with _published(seeded, (4, 1)) as client:
        (item,) = ok(client, "/api/v1/lingering")["items"]
        assert ok(client, "/api/v1/lingering", cluster=STAGING)["items"] == []
    assert (item["cluster"], item["transactional_id"], item["reason"]) == (PROD, "orders-sink-3-1204", "superseded")
    assert (item["prefix"], item["subtask"], item["checkpoint"]) == ("orders-sink", 3, 1204)
    assert (item["superseded_by"], item["superseded_checkpoint"]) == ("orders-sink-3-1205", 1205)
    assert item["framework"]["framework"] == "flink_kafka_sink" and item["framework"]["checkpoint"] == 1204
    assert item["partitions"] == ["orders-0", "orders-1"] and item["age_seconds"] == 90.0
    assert item["abort_by_id_command"].endswith(
        f"abort --bootstrap-server {','.join(BOOTSTRAP[PROD])} --transactional-id orders-sink-3-1204 --execute")
    assert "newer checkpoint" in item["reason_explanation"] or "Flink commits" in item["reason_explanation"]


def test_lingering_names_no_abort_by_id_below_kafka_4_1(seeded: Seeded) -> None:
    with _published(seeded, (4, 0)) as client:
        (item,) = ok(client, "/api/v1/lingering")["items"]
    assert item["abort_by_id_command"] is None
