"""Concurrent exchange of batched calls with kafka-python's connection manager.

This is the one adapter to kafka-python's networking internals (its
``KafkaConnectionManager`` and IO-loop futures, the same plumbing its own
``KafkaAdminClient`` is built on).  Everything above it speaks :class:`Call` and
:class:`Reply`, which keeps poll composition testable with a fake wire.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kafka.future import Future

from txnwatch.kafka.batches import Call

log = logging.getLogger(__name__)

# Slack over the per-request timeout, so the connection's own timer fires first and
# names the failure; ours only guards against a future nobody completes.
_GRACE_S = 1.0


@dataclass(frozen=True, slots=True, eq=False)
class Reply:
    """The answer to one call, or why there is none."""

    call: Call
    response: Any = None
    failure: BaseException | None = None


class Wire(Protocol):
    """What a poll needs from the network."""

    round_trips: int

    async def exchange(self, calls: Sequence[Call]) -> list[Reply]: ...

    def candidate_nodes(self) -> list[int]: ...

    def learn_metadata(self, response: Any) -> None: ...

    def supports(self, request_class: Any, version: int) -> bool: ...


class ManagerWire:
    """All calls of one exchange are written before any answer is awaited.

    Calls to different brokers therefore overlap completely, and calls to the same
    broker are pipelined on its connection, so an exchange costs one round trip.
    Should a broker get more calls than it accepts in flight, they go out in waves,
    each wave counted as a round trip of its own.
    """

    def __init__(self, manager: Any, timeout_ms: int, max_in_flight: int) -> None:
        self._manager = manager
        self._timeout_ms = timeout_ms
        self._max_in_flight = max(1, max_in_flight)
        self.round_trips = 0

    async def exchange(self, calls: Sequence[Call]) -> list[Reply]:
        replies: dict[int, Reply] = {}
        for wave in self._waves(calls):
            self.round_trips += 1
            futures = [(index, self._send(calls[index])) for index in wave]
            deadline = time.monotonic() + self._timeout_ms / 1000 + _GRACE_S
            for index, future in futures:
                remaining_ms = max(0.0, deadline - time.monotonic()) * 1000
                try:
                    response = await self._manager.wait_for(future, remaining_ms)
                except Exception as exc:  # every failure is data for the snapshot
                    replies[index] = Reply(calls[index], failure=exc)
                else:
                    replies[index] = Reply(calls[index], response=response)
        return [replies[i] for i in range(len(calls))]

    def _waves(self, calls: Sequence[Call]) -> list[list[int]]:
        per_node: dict[int, list[int]] = defaultdict(list)
        for index, call in enumerate(calls):
            per_node[call.node_id].append(index)
        depth = max((len(v) for v in per_node.values()), default=0)
        waves = -(-depth // self._max_in_flight)
        return [[i for indexes in per_node.values()
                 for i in indexes[w * self._max_in_flight:(w + 1) * self._max_in_flight]]
                for w in range(waves)]

    def _send(self, call: Call) -> Future:
        try:
            return self._manager.send(call.request, node_id=call.node_id,
                                      request_timeout_ms=self._timeout_ms)
        except Exception as exc:  # unknown broker id, cached authentication failure
            return Future().failure(exc)

    def candidate_nodes(self) -> list[int]:
        """Brokers to ask for metadata: the least loaded first, then every other known one."""
        first = self._manager.least_loaded_node()
        known = [b.node_id for b in self._manager.cluster.brokers()]
        ordered = ([first] if first is not None else []) + [n for n in known if n != first]
        return ordered

    def learn_metadata(self, response: Any) -> None:
        """Share a fresh Metadata answer with kafka-python, which resolves broker addresses from it."""
        try:
            self._manager.cluster.update_metadata(response)
        except Exception:  # its own refresh loop will catch up; this poll already has its layout
            log.debug("kafka-python refused a metadata answer", exc_info=True)

    def supports(self, request_class: Any, version: int) -> bool:
        versions = self._manager.broker_version_data
        if versions is None:
            return False
        try:
            return bool(versions.api_version(request_class) >= version)
        except Exception:
            return False
