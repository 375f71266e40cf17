"""Raw Kafka protocol calls the lab needs and kafka-python's public API does not offer.

kafka-python 3.x runs all I/O on the admin client's event-loop thread; these
helpers schedule a coroutine there and block for the answer.  Everything here
talks to one specific broker on purpose: fault injection is about *which*
broker sees *what*.
"""

from __future__ import annotations

from typing import Any

from kafka import KafkaAdminClient
from kafka.protocol.metadata import CoordinatorType, FindCoordinatorRequest


def admin_client(bootstrap: str, **overrides: Any) -> KafkaAdminClient:
    config: dict[str, Any] = {"bootstrap_servers": bootstrap, "client_id": "txnwatch-lab",
                              "request_timeout_ms": 15_000}
    config.update(overrides)
    return KafkaAdminClient(**config)


def send(admin: KafkaAdminClient, request: Any, node_id: int | None = None) -> Any:
    """Send one request to `node_id` (or the least loaded broker) and return the decoded response."""
    manager = admin._manager  # kafka-python's connection manager; the admin API is built on it

    async def _call() -> Any:
        return await manager.send(request, node_id=node_id)

    return manager.run(_call)


def find_transaction_coordinator(admin: KafkaAdminClient, transactional_id: str) -> int:
    """Node id of the coordinator for `transactional_id`; raises the broker's error (e.g. while
    __transaction_state is still being created)."""
    from kafka.errors import NoError, for_code

    response = send(admin, FindCoordinatorRequest(key_type=CoordinatorType.TRANSACTION.value,
                                                  coordinator_keys=[transactional_id], min_version=4))
    coordinator = response.coordinators[0]
    error = for_code(coordinator.error_code)
    if error is not NoError:
        raise error(f"FindCoordinator({transactional_id!r}): {coordinator.error_message}")
    return int(coordinator.node_id)


def partition_leaders(admin: KafkaAdminClient, topic: str) -> dict[int, int]:
    """partition -> leader node id (-1 while leaderless), straight from a fresh Metadata response."""
    topics = admin.describe_topics([topic])
    return {p["partition_index"]: p["leader_id"] for p in topics[0]["partitions"]}
