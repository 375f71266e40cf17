"""The lab workload's read-only consumers, without a broker: a join that assigned nothing is left and made again."""

from __future__ import annotations

from typing import Any

import pytest

from txnwatch.lab import workload as workload_module
from txnwatch.lab.workload import Scenario, Workload


class FakeConsumer:
    """Assigned nothing for its first `empty_polls` polls (or ever, with None), then one partition."""

    def __init__(self, workload: Workload, empty_polls: int | None) -> None:
        self.workload, self.empty_polls, self.polls, self.closed = workload, empty_polls, 0, False
        self.topics: list[str] = []

    def subscribe(self, topics: list[str]) -> None:
        self.topics = topics

    def assignment(self) -> set[str]:
        return set() if self.empty_polls is None or self.polls < self.empty_polls else {"input-0"}

    def poll(self, timeout_ms: int) -> dict[Any, Any]:
        self.polls += 1
        if self.polls >= 3:
            self.workload._stop.set()
        return {}

    def close(self) -> None:
        self.closed = True


def made_consumers(monkeypatch: pytest.MonkeyPatch, empty_polls: list[int | None]) -> tuple[Workload, list[Any]]:
    workload = Workload("127.0.0.1:1", Scenario(name="t", producers=0), topic_prefix="t")
    made: list[FakeConsumer] = []

    def consumer(group: str, isolation: str, **extra: Any) -> FakeConsumer:
        made.append(FakeConsumer(workload, empty_polls[len(made)] if len(made) < len(empty_polls) else 0))
        return made[-1]

    monkeypatch.setattr(workload, "_consumer", consumer)
    return workload, made


def test_a_consumer_left_without_partitions_joins_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workload_module, "UNASSIGNED_RESTART_S", 0)
    workload, made = made_consumers(monkeypatch, [None])
    workload._consumer_loop("g", "read_committed")
    assert len(made) >= 2 and made[0].closed
    assert made[1].topics == [workload.input_topic, workload.output_topic]
    assert all(c.closed for c in made)


def test_a_consumer_with_partitions_keeps_its_membership(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workload_module, "UNASSIGNED_RESTART_S", 0)
    workload, made = made_consumers(monkeypatch, [0])
    workload._consumer_loop("g", "read_committed")
    assert len(made) == 1 and made[0].polls == 3 and made[0].closed


def test_a_join_gets_its_time_before_it_is_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    workload, made = made_consumers(monkeypatch, [None])  # the real 20 s: three polls come well inside it
    workload._consumer_loop("g", "read_committed")
    assert len(made) == 1
