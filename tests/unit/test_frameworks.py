"""Transactional ids read by the frameworks' naming rules: one row per case, with why; and ids that must not match.

The shapes are the frameworks' own (see txnwatch.core.frameworks): Kafka Streams ``ActiveTaskCreator``
(EOS v2: ``<application.id>-<process UUID>-<thread index>``), its EOS v1 ``<application.id>-<topicGroupId>_<partition>``
(``TaskId.toString``), and flink-connector-kafka's ``TransactionalIdFactory`` ``<prefix>-<subtaskId>-<offset>`` (the
checkpoint id under INCREMENTING, a pool slot from 0 under POOLING).  The property test builds ids the way each
framework builds them and reads them back, and shows that no printed-by-Java number is misread.
"""

from __future__ import annotations

import time
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txnwatch.core.frameworks import (
    FLINK_MAX_PARALLELISM,
    JAVA_LONG_MAX,
    MAX_ID_CHARS,
    FrameworkId,
    flink_id,
    recognise,
    streams_v2_id,
)
from txnwatch.core.vocabulary import Framework

V2, V1, FLINK = Framework.KAFKA_STREAMS_EOS_V2, Framework.KAFKA_STREAMS_EOS_V1, Framework.FLINK_KAFKA_SINK
UUID = "3f2a9c1e-7b4d-4e8a-9f10-2c6d8e0b1a57"


@pytest.mark.parametrize(("transactional_id", "expected"), [
    pytest.param(f"wordcount-{UUID}-1", FrameworkId(V2, "wordcount", process=UUID, thread=1),
                 id="1. Streams EOS v2: StreamThread-1 of one instance"),
    pytest.param(f"orders-enrich-v3-{UUID}-12", FrameworkId(V2, "orders-enrich-v3", process=UUID, thread=12),
                 id="2. Streams EOS v2: dashes and digits in application.id stay the application's"),
    pytest.param("wordcount-0_3", FrameworkId(V1, "wordcount", task="0_3"),
                 id="3. Streams EOS v1: task 0_3 (topic group 0, partition 3)"),
    pytest.param("my-app-12_120", FrameworkId(V1, "my-app", task="12_120"), id="4. Streams EOS v1: a dashed app"),
    pytest.param("orders-sink-3-1204", FrameworkId(FLINK, "orders-sink", subtask=3, checkpoint=1204),
                 id="5. Flink INCREMENTING: subtask 3, checkpoint 1,204"),
    pytest.param("job-a-0-0", FrameworkId(FLINK, "job-a", subtask=0, checkpoint=0),
                 id="6. Flink POOLING: subtask 0, slot 0 (pool slots count from 0)"),
    pytest.param(f"sink-{FLINK_MAX_PARALLELISM - 1}-{JAVA_LONG_MAX}",
                 FrameworkId(FLINK, "sink", subtask=FLINK_MAX_PARALLELISM - 1, checkpoint=JAVA_LONG_MAX),
                 id="7. Flink: the largest subtask and checkpoint Flink can print"),
    pytest.param("a-b-c-7-9", FrameworkId(FLINK, "a-b-c", subtask=7, checkpoint=9),
                 id="8. Flink: read from the right, as TransactionalIdFactory.extractPrefix does"),
    pytest.param(f"app-{UUID[:-12]}123456789012-2", FrameworkId(V2, "app", process=f"{UUID[:-12]}123456789012", thread=2),
                 id="9. a Streams id whose UUID ends in digits is also Flink-shaped: Streams wins (more specific)"),
    pytest.param("sink--3-7", FrameworkId(FLINK, "sink-", subtask=3, checkpoint=7),
                 id="10. Flink prints no negative subtask, so a doubled dash is the prefix's"),
    pytest.param("p" * 300 + "-3-7", FrameworkId(FLINK, "p" * 300, subtask=3, checkpoint=7),
                 id="11. a long prefix (past the cached length) is read the same, uncached"),
])
def test_recognised(transactional_id: str, expected: FrameworkId) -> None:
    assert recognise(transactional_id) == expected


@pytest.mark.parametrize("transactional_id", [
    pytest.param("payments-service-v2", id="1. an ordinary id with dashes and no numbers"),
    pytest.param("orders-2024-01", id="2. dashes and numbers, but 01 has a leading zero Java never prints"),
    pytest.param("invoice-7", id="3. one number: none of the shapes"),
    pytest.param("txn-2024-11-05-batch", id="4. numbers in the middle, a word at the end"),
    pytest.param("tx-40000-1", id="5. subtask 40,000: past Flink's largest parallelism (32,768)"),
    pytest.param("tx-1-99999999999999999999", id="6. a checkpoint past a Java long"),
    pytest.param("-3-7", id="7. no prefix before the numbers"),
    pytest.param("sink-3-7-", id="8. a trailing dash"),
    pytest.param("app-+3-7", id="9. a plus sign is not a Java-printed number"),
    pytest.param(f"app-{UUID.upper()}-1", id="10. an upper-case UUID: UUID.toString prints lower case"),
    pytest.param(f"app-{UUID}-0", id="11. thread 0: stream threads are numbered from 1"),
    pytest.param(f"{UUID}-1", id="12. a UUID and a thread but no application.id"),
    pytest.param("app-0_", id="13. an EOS v1 task without its partition"),
    pytest.param("app-0_1_2", id="14. two underscores: not TaskId.toString"),
    pytest.param("app-3-٣", id="15. a non-ASCII digit (Arabic-Indic three) is no Java-printed number"),
    pytest.param("", id="16. empty"),
])
def test_not_recognised(transactional_id: str) -> None:
    assert recognise(transactional_id) is None


def test_ids_longer_than_the_bound_are_nobodys_and_reading_stays_linear() -> None:
    assert recognise("p" * MAX_ID_CHARS + "-1-2") is None
    adversarial = "-1" * (MAX_ID_CHARS // 2 - 2) + "-x"  # dashes and digits everywhere, matching nothing
    started = time.perf_counter()
    assert recognise(adversarial) is None
    assert time.perf_counter() - started < 1.0  # a bound against quadratic backtracking, not a benchmark


_prefixes = st.text(st.characters(codec="ascii", categories=("L", "N", "P")), min_size=1, max_size=40)
_java_int = st.integers(min_value=0, max_value=2**31 - 1)


@given(prefix=_prefixes, subtask=st.integers(0, FLINK_MAX_PARALLELISM - 1), checkpoint=st.integers(0, JAVA_LONG_MAX))
def test_flink_ids_read_back(prefix: str, subtask: int, checkpoint: int) -> None:
    # Never read as a Streams id: the last part holds no '_' (not EOS v1), and a subtask of at most five digits
    # cannot end a UUID (EOS v2), whatever the prefix holds.
    assert recognise(flink_id(prefix, subtask, checkpoint)) == FrameworkId(FLINK, prefix, subtask=subtask,
                                                                            checkpoint=checkpoint)


@given(application=_prefixes, process=st.uuids(), thread=st.integers(1, 2**31 - 1))
def test_streams_v2_ids_read_back(application: str, process: uuid.UUID, thread: int) -> None:
    found = recognise(streams_v2_id(application, str(process), thread))
    assert found == FrameworkId(V2, application, process=str(process), thread=thread)


@given(application=_prefixes, group=_java_int, partition=_java_int)
def test_streams_v1_ids_read_back(application: str, group: int, partition: int) -> None:
    assert recognise(f"{application}-{group}_{partition}") == FrameworkId(V1, application, task=f"{group}_{partition}")


@given(st.text(max_size=60))
def test_anything_is_read_without_error_and_only_as_java_prints_numbers(text: str) -> None:
    found = recognise(text)
    if found is not None and found.framework is FLINK:
        assert text == flink_id(found.application, found.subtask or 0, found.checkpoint or 0)
