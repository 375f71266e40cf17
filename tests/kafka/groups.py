"""Consumer-group helpers shared by the lag tests on the lab."""

from __future__ import annotations

from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.structs import OffsetAndMetadata


def commit_offsets(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit (topic, partition) -> offset for ``group``, as a consumer of that group would."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({KafkaTopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()})
    finally:
        consumer.close()
