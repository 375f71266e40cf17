"""A wire (txnwatch.kafka.wire's exchange protocol) that answers each API with a scripted function and records
every call: one for the abort and the abort-by-id tests, each of which scripts its own default answers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from txnwatch.kafka.batches import Call
from txnwatch.kafka.wire import Reply


class ScriptedWire:
    def __init__(self, brokers: Sequence[int], answers: Mapping[str, Callable[[Call], Any]]) -> None:
        self.answers = dict(answers)
        self.brokers = sorted(brokers)
        self.calls: list[Call] = []
        self.round_trips = 0

    async def exchange(self, calls: Sequence[Call]) -> list[Reply]:
        """A scripted answer that raises is the call's failure, as a broker that did not answer."""
        self.round_trips += 1
        replies = []
        for call in calls:
            self.calls.append(call)
            try:
                replies.append(Reply(call, response=self.answers[call.api](call)))
            except Exception as exc:
                replies.append(Reply(call, failure=exc))
        return replies

    def candidate_nodes(self) -> list[int]:
        return list(self.brokers)

    def learn_metadata(self, response: Any) -> None:
        pass
