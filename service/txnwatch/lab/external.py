"""A cluster the lab did not start (TXNWATCH_LAB_BOOTSTRAP): usable for observing, not for breaking."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from txnwatch.lab.errors import LabError
from txnwatch.lab.jars import DEFAULT_KAFKA_VERSION
from txnwatch.lab.settings import LAB_TRANSACTION_MAX_TIMEOUT_MS
from txnwatch.lab.wire import admin_client, find_transaction_coordinator, partition_leaders


@dataclass
class ExternalBroker:
    node_id: int
    port: int
    pid: int | None = None


class ExternalLab:
    """Same read-side surface as LabCluster; process-level faults raise LabError (tests skip on it)."""

    managed = False

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.kafka_version = os.environ.get("TXNWATCH_LAB_KAFKA_VERSION", DEFAULT_KAFKA_VERSION)
        self.transaction_max_timeout_ms = int(os.environ.get("TXNWATCH_LAB_TRANSACTION_MAX_TIMEOUT_MS",
                                                             LAB_TRANSACTION_MAX_TIMEOUT_MS))
        self.lab_dir: Path | None = None
        self.proxy = None

    @property
    def brokers(self) -> list[ExternalBroker]:
        admin = self.admin()
        try:
            return [ExternalBroker(b["broker_id"], b["port"]) for b in admin.describe_cluster()["brokers"]]
        finally:
            admin.close()

    def admin(self, **overrides: Any) -> Any:
        return admin_client(self.bootstrap_servers, **overrides)

    def broker_metrics_urls(self) -> dict[int, str]:
        """Unknown for a cluster the lab did not start: no JMX exporter endpoints."""
        return {}

    def leader_of(self, topic: str, partition: int) -> int:
        admin = self.admin()
        try:
            return partition_leaders(admin, topic)[partition]
        finally:
            admin.close()

    def transaction_coordinator(self, transactional_id: str) -> int:
        admin = self.admin()
        try:
            return find_transaction_coordinator(admin, transactional_id)
        finally:
            admin.close()

    def _unmanaged(self, *args: Any, **kwargs: Any) -> None:
        raise LabError("TXNWATCH_LAB_BOOTSTRAP points at a cluster the lab does not manage; "
                       "it cannot stop, start, freeze or thaw its brokers")

    stop_broker = start_broker = restart_broker = freeze_broker = thaw_broker = down = _unmanaged
