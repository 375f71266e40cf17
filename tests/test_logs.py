"""JSON logs carry cluster and poll id, so an operator can follow one poll across log lines."""

from __future__ import annotations

import json
import logging

from tests.test_collector import FakePoller, RecordingSink, count_evaluate
from txnwatch.collect.poll_loop import ClusterPollLoop
from txnwatch.core import logs
from txnwatch.core.views import LatestState


def test_failed_poll_logs_cluster_and_poll_id_as_json(capsys) -> None:
    logs.configure("INFO", "json")
    try:
        clock = [0.0]
        c = ClusterPollLoop("east", lambda: FakePoller("east", fail=True), count_evaluate, lambda: 0, [RecordingSink()],
                             LatestState(["east"]), clock=lambda: clock[0])
        c.poll_once()
        clock[0] += 1000
        c.poll_once()
        lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
        failures = [line for line in lines if "polls failing" in line["msg"]]
        # The log budget: the outage starts with one line; the same failure again is not news (issue 15, defect 6).
        assert [(f["cluster"], f["poll_id"], f["level"]) for f in failures] == [("east", 1, "warning")]
        assert not [line for line in lines if "exc" in line]  # an unreachable cluster is no bug: no traceback
    finally:
        logging.getLogger().handlers.clear()
