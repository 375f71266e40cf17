"""Which framework named a transactional id, and what the name says: application or job, subtask, checkpoint.

On-call wants "job X's sink, subtask 3, checkpoint 1,204 is lingering", not 40 raw ids; the frameworks that own most
transactional ids build them by fixed rules, read here from their sources:

* **Kafka Streams, ``exactly_once_v2``** (``ActiveTaskCreator``): ``<application.id>-<process id>-<thread index>``,
  the process id a ``java.util.UUID`` (lowercase hex ``8-4-4-4-12``, its ``toString``), the index the stream thread's
  number (``StreamThread-1`` is 1).  One producer per thread, so an id lives as long as the thread.
* **Kafka Streams, ``exactly_once``** (EOS v1, removed in Kafka 4.0): ``<application.id>-<task id>``, the task id
  ``TaskId.toString``'s ``<topicGroupId>_<partition>``.  One producer per task.
* **Flink KafkaSink** (flink-connector-kafka 3.x to 5.x, ``TransactionalIdFactory``):
  ``<transactionalIdPrefix>-<subtaskId>-<offset>``.  Under the ``INCREMENTING`` naming strategy (the default, and
  3.x's only one) the offset is the checkpoint id, one new id per checkpoint; under ``POOLING`` (4.x+) it is the
  lowest slot not held by an ongoing transaction, counted from 0, so the same few ids are reused.  The name alone
  cannot tell the two apart: :attr:`FrameworkId.checkpoint` is "checkpoint id, or pool slot".

Numbers are read as Java prints them (``Integer.toString``/``Long.toString``: no sign, no leading zero, no ``+``),
so ``orders-2024-01`` is nobody's; a Flink subtask is below Flink's largest parallelism (32,768) and a checkpoint
fits a Java ``long``.  The rules are tried most specific first (a Streams id whose UUID ends in twelve digits is
also Flink-shaped).  An id of an application that merely looks like one of these (``billing-3-7``) is read as
that framework's: the shapes leave no room to tell, which is why :mod:`txnwatch.detect.lingering` judges a Flink id
against its siblings' commits, never by its name alone.

Pure and bounded: each rule reads the id from its right end (linear, no backtracking), ids longer than
:data:`MAX_ID_CHARS` are nobody's, and the answers for the most recent :data:`CACHED_IDS` short ids are kept.
"""

from __future__ import annotations

import functools
import heapq
import re
from collections.abc import Iterable
from typing import NamedTuple

from txnwatch.core.vocabulary import Framework

#: Flink's largest parallelism (``KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM``): subtask ids are below it.
FLINK_MAX_PARALLELISM = 32_768
#: A Java ``long``'s largest value: a checkpoint id (or pool slot) above it was not printed by Flink.
JAVA_LONG_MAX = 2**63 - 1
#: A Java ``int``'s largest value (a stream thread's index, a topic group id, a partition).
JAVA_INT_MAX = 2**31 - 1
#: Longer ids are not read (Kafka allows 32,767 bytes; no framework's name comes near).
MAX_ID_CHARS = 4_096
#: Ids are read again every poll and render: the last CACHED_IDS of at most CACHED_ID_CHARS characters are
#: remembered (a few MB at most), so a cluster's ids cost a dictionary lookup after the first poll.
CACHED_IDS = 16_384
CACHED_ID_CHARS = 255

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.ASCII)  # UUID.toString
_UUID_CHARS = 36


class FrameworkId(NamedTuple):
    """What a transactional id's name says about its owner; fields a framework does not have are None.

    ``application`` is the Kafka Streams ``application.id`` or the Flink sink's ``transactionalIdPrefix`` (one per
    sink, usually named after the job).
    """

    framework: Framework
    application: str
    #: Kafka Streams EOS v2: the instance's process UUID (a new one at every start unless its state dir keeps it).
    process: str | None = None
    #: Kafka Streams EOS v2: the stream thread's index (1 for StreamThread-1).
    thread: int | None = None
    #: Kafka Streams EOS v1: the task, ``<topicGroupId>_<partition>``.
    task: str | None = None
    #: Flink: the sink's subtask index (0-based).
    subtask: int | None = None
    #: Flink: the checkpoint id (INCREMENTING naming) or the pool slot (POOLING naming).
    checkpoint: int | None = None

    @property
    def sink(self) -> tuple[str, int] | None:
        """A Flink id's (prefix, subtask): the ids Flink commits in checkpoint order; None for other frameworks."""
        return (self.application, self.subtask) if self.subtask is not None else None


def recognise(transactional_id: str) -> FrameworkId | None:
    """The framework that named ``transactional_id`` and what the name says, or None when no rule reads it.

    Read from the right, as Flink's own ``TransactionalIdFactory.extractPrefix`` does (the prefix or application id
    may hold dashes, the numbers after it cannot): linear in the id's length, whatever it holds.
    """
    if not transactional_id or len(transactional_id) > MAX_ID_CHARS or not "0" <= transactional_id[-1] <= "9":
        return None  # every shape ends with a number: most other ids stop here
    if len(transactional_id) <= CACHED_ID_CHARS:
        return _cached(transactional_id)
    return _read(transactional_id)


@functools.lru_cache(maxsize=CACHED_IDS)
def _cached(transactional_id: str) -> FrameworkId | None:
    return _read(transactional_id)


def _read(transactional_id: str) -> FrameworkId | None:
    head, dash, last = transactional_id.rpartition("-")
    if not dash or not head:
        return None
    return _streams_v2(head, last) or _streams_v1(head, last) or _flink(head, last)


def _number(text: str, largest: int) -> int | None:
    """``text`` as Java prints a number >= 0 (ASCII digits, no sign, no leading zero) up to ``largest``, else None."""
    if (not text or len(text) > len(str(largest)) or not text.isascii() or not text.isdigit()
            or (text[0] == "0" and len(text) > 1)):
        return None
    value = int(text)
    return value if value <= largest else None


def _streams_v2(head: str, last: str) -> FrameworkId | None:
    process, application = head[-_UUID_CHARS:], head[:-_UUID_CHARS - 1]
    if len(head) <= _UUID_CHARS + 1 or head[-_UUID_CHARS - 1] != "-" or _UUID.fullmatch(process) is None:
        return None
    thread = _number(last, JAVA_INT_MAX)
    if not thread:  # stream threads are numbered from 1
        return None
    return FrameworkId(Framework.KAFKA_STREAMS_EOS_V2, application, process=process, thread=thread)


def _streams_v1(head: str, last: str) -> FrameworkId | None:
    group, underscore, partition = last.partition("_")
    if not underscore or _number(group, JAVA_INT_MAX) is None or _number(partition, JAVA_INT_MAX) is None:
        return None
    return FrameworkId(Framework.KAFKA_STREAMS_EOS_V1, head, task=last)


def _flink(head: str, last: str) -> FrameworkId | None:
    prefix, dash, subtask_text = head.rpartition("-")
    if not dash or not prefix:
        return None
    subtask = _number(subtask_text, FLINK_MAX_PARALLELISM - 1)
    checkpoint = _number(last, JAVA_LONG_MAX)
    if subtask is None or checkpoint is None:
        return None
    return FrameworkId(Framework.FLINK_KAFKA_SINK, prefix, subtask=subtask, checkpoint=checkpoint)


def flink_id(prefix: str, subtask: int, checkpoint: int) -> str:
    """The id Flink's KafkaSink gives ``prefix``'s ``subtask`` at ``checkpoint`` (or pool slot): tests and the lab."""
    return f"{prefix}-{subtask}-{checkpoint}"


def streams_v2_id(application_id: str, process: str, thread: int) -> str:
    """The id Kafka Streams (exactly_once_v2) gives ``application_id``'s stream thread ``thread`` of ``process``."""
    return f"{application_id}-{process}-{thread}"


class ApplicationCount(NamedTuple):
    """One application's transactional ids as one poll listed them."""

    framework: Framework
    application: str
    ids: int
    open_transactions: int


def by_application(listed: Iterable[tuple[str, bool]], limit: int) -> tuple[tuple[ApplicationCount, ...], int]:
    """The ``limit`` applications with the most open transactions (then the most ids, then by name) of the
    ``(transactional id, open)`` pairs, and how many applications the cap left out: an ``application`` label is
    bounded by it, whatever the tenants name their apps."""
    ids: dict[tuple[Framework, str], int] = {}
    opened: dict[tuple[Framework, str], int] = {}
    for transactional_id, is_open in listed:
        named = recognise(transactional_id)
        if named is None:
            continue
        key = (named.framework, named.application)
        ids[key] = ids.get(key, 0) + 1
        opened[key] = opened.get(key, 0) + int(is_open)
    rows = [ApplicationCount(f, app, n, opened[(f, app)]) for (f, app), n in ids.items()]
    kept = heapq.nsmallest(max(0, limit), rows, key=lambda r: (-r.open_transactions, -r.ids, r.application,
                                                                 r.framework))
    return tuple(kept), len(rows) - len(kept)
