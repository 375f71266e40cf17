"""Uniquely named topics, created and waited for, so concurrent tests never share a partition."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

from kafka.admin import NewTopic
from kafka.errors import KafkaError

from txnwatch.lab.errors import LabError


def unique_topic_name(hint: str = "lab") -> str:
    hint = re.sub(r"[^A-Za-z0-9._-]+", "-", hint).strip("-")[:60] or "lab"
    return f"{hint}-{uuid.uuid4().hex[:8]}"


def create_topic(admin: Any, name: str, partitions: int = 3, replication: int = 3, *,
                 configs: dict[str, str] | None = None, timeout: float = 30.0) -> str:
    """Create `name` and return once every partition has a leader in Metadata: before that, a
    producer's first send or a DescribeProducers would race the controller."""
    admin.create_topics([NewTopic(name, partitions, replication, topic_configs=configs or {})])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            parts = admin.describe_topics([name])[0]["partitions"]
            if len(parts) == partitions and all(p["leader_id"] >= 0 for p in parts):
                return name
        except (KafkaError, IndexError, KeyError):
            pass
        time.sleep(0.1)
    raise LabError(f"topic {name} has no leader for every partition after {timeout}s")


def delete_topics_quietly(admin: Any, names: list[str]) -> None:
    if names:
        try:
            admin.delete_topics(names, timeout_ms=10_000)
        except KafkaError:
            pass  # best effort: a test may have left a broker down
