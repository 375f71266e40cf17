"""From database rows to the data of response models."""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from pydantic import BaseModel

from txnwatch.core.canary import CanaryView
from txnwatch.core.epoch import from_ms
from txnwatch.core.findings import Transition
from txnwatch.core.frameworks import recognise
from txnwatch.core.redact import redact, redact_optional


@cache
def _field_names(model: type[BaseModel]) -> tuple[str, ...]:
    return tuple(model.model_fields)


def from_row(model: type[BaseModel], row: object, **computed: Any) -> dict[str, Any]:
    """The fields of ``model`` taken from a row's columns (a Core row, a dataclass or an ORM object), or
    from ``computed`` for those it lacks; plain data for :func:`params.json_response`.

    A Core row is read in one C-level pass (``zip`` of its keys and values): ``getattr`` per field on a
    Row goes through SQLAlchemy's Python key lookup, a sixth of the CPU of a 100-item page."""
    keys = getattr(row, "_fields", None)
    if keys is not None:
        values = dict(zip(keys, row, strict=True))  # type: ignore[call-overload]
        data = {name: values[name] for name in _field_names(model) if name not in computed}
    else:
        data = {name: getattr(row, name) for name in _field_names(model) if name not in computed}
    return {**data, **computed}


def seconds_between(start: datetime, end: datetime) -> float:
    return max(0.0, (end - start).total_seconds())


def gap(hwm: int | None, lso: int | None) -> int | None:
    """HWM − LSO: what read_committed consumers cannot see yet."""
    return None if hwm is None or lso is None else max(0, hwm - lso)


def framework_of(transactional_id: str | None) -> dict[str, Any] | None:
    """What the id's name says of its framework (``FrameworkOut``'s data), or None when no naming rule reads it."""
    found = recognise(transactional_id) if transactional_id else None
    return found._asdict() if found is not None else None


def transition_view(t: Transition) -> dict[str, object]:
    """A transition as the API's ``TransitionOut`` serves it and the console's timeline shows it, built here only:
    its times as datetimes, its partitions as topic-partition text (a stored text that named no partition as it
    was), the rest as the one transition type holds it."""
    return {
        "observed_at": from_ms(t.at_ms), "from_state": t.from_state, "to_state": t.to_state,
        "producer_id": t.producer_id, "producer_epoch": t.producer_epoch, "prev_producer_id": t.prev_producer_id,
        "prev_producer_epoch": t.prev_producer_epoch, "timeout_ms": t.timeout_ms,
        "txn_started_at": from_ms(t.start_ms),
        "partitions": [f"{topic}-{p}" if p >= 0 else topic for topic, p in t.partitions], "events": list(t.events),
        "duration_ms": t.duration_ms, "log_partition": t.log_partition, "log_offset": t.log_offset,
        "client_transaction_version": t.client_transaction_version, "detail": t.detail, "source": t.source.value}


def canary_view(view: CanaryView) -> dict[str, Any]:
    """The canary's latest round and finding as the API's ``CanaryOut`` serves them and the console shows them,
    built here only; messages pass the redaction of every other answer."""
    round_, failure = view.last_round, view.finding
    location = round_.coordinator if round_ is not None else None
    return {
        "transactional_id": view.transactional_id, "topic": view.topic, "interval_seconds": view.interval_s,
        "ok": round_.ok if round_ is not None else None,
        "last_round_at": from_ms(round_.at_ms) if round_ is not None else None,
        "coordinator": location.broker_id if location else None,
        "transaction_state_partition": location.state_partition if location else None,
        "transaction_state_leader": location.state_leader if location else None,
        "attempts": [{"partition": a.partition, "leader": a.leader_id, "ok": a.ok, "commit_ms": a.commit_ms,
                      "visible_ms": a.visible_ms,
                      **({"stage": a.error.stage.value, "error": a.error.name,
                          "error_class": a.error.error_class.value, "message": redact(a.error.message)}
                         if a.error is not None else {})}
                     for a in (round_.attempts if round_ is not None else ())],
        "failing": None if failure is None else {
            "since": from_ms(failure.since_ms), "last_failure_at": from_ms(failure.last_failure_ms),
            "failed_rounds": failure.failed_rounds, "blame": failure.blame.kind.value,
            "broker_id": failure.blame.broker_id, "transaction_state_partition": failure.blame.state_partition,
            "blame_text": failure.blame.text, "error": failure.error.name,
            "error_class": failure.error.error_class.value, "failing_partitions": list(failure.failing_partitions)},
        "last_error": redact_optional(view.last_error),
    }
