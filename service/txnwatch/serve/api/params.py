"""What the routers' parameters share: pagination cursors, time bounds, text values, rendering.

Every rejection is a 422 in FastAPI's own shape (``detail[].loc`` names the
parameter), including the checks FastAPI cannot express, so clients parse one format.
The dependencies (runtime, sessions, cluster scope) are in :mod:`txnwatch.serve.api.deps`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Annotated, Any

import pydantic_core
from fastapi import Query, Response
from fastapi.exceptions import RequestValidationError
from pydantic import AfterValidator, BaseModel

MAX_LIMIT = 1000
#: Kafka's own wire types bound what a parameter can be: a partition or an epoch is an INT32, a producer id or
#: an offset an INT64 (the protocol's JSON schemas). Past them nothing can exist, and the database's BIGINT
#: (or SQLite's 64-bit integer) would refuse the value with a 500: they are a 422 in the parameter's name instead.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def invalid(param: str, message: str, value: Any, where: str = "query") -> RequestValidationError:
    return RequestValidationError([{"type": "value_error", "loc": (where, param), "msg": message, "input": value}])


Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"Page size, 1 to {MAX_LIMIT}.")]
CursorParam = Annotated[str | None, Query(max_length=2048, description="`next_cursor` of the previous page.")]


# --- cursors ---------------------------------------------------------------------------------------------


def encode_cursor(kind: str, key: Sequence[Any]) -> str:
    """Opaque to clients; ``kind`` ties it to one endpoint and sort so it cannot be replayed elsewhere."""
    values = [v.isoformat() if isinstance(v, datetime) else v for v in key]
    raw = json.dumps([kind, values], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(token: str | None, kind: str, types: Sequence[type]) -> tuple[Any, ...] | None:
    """The keyset the cursor carries, typed as ``types``; 422 naming ``cursor`` if it is not one of ours."""
    if token is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        got_kind, values = json.loads(raw)
        if got_kind != kind or not isinstance(values, list) or len(values) != len(types):
            raise ValueError
        return tuple(_typed(value, type_) for value, type_ in zip(values, types, strict=False))
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise invalid("cursor", "invalid cursor: pass the next_cursor of a previous page requested with the same "
                                "sort and order", token) from None


def _typed(value: Any, type_: type) -> Any:
    if type_ is datetime:
        if not isinstance(value, str):
            raise ValueError
        parsed = datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            raise ValueError
        return parsed.astimezone(timezone.utc)
    if type_ is int:
        if not isinstance(value, int) or isinstance(value, bool) or not -2**63 <= value < 2**63:
            raise ValueError
        return value
    if not isinstance(value, type_) or (isinstance(value, str) and "\x00" in value):
        raise ValueError
    return value


def next_cursor(kind: str, rows: Sequence[Any], limit: int, key: Any) -> str | None:
    """A cursor after the last row of a full page; a short page is the last one."""
    return encode_cursor(kind, key(rows[-1])) if rows and len(rows) == limit else None


# --- values ----------------------------------------------------------------------------------------------


def _utc(value: datetime) -> datetime:
    """Naive times are taken as UTC (operators paste them from logs); out-of-range ones are invalid."""
    try:
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
    except OverflowError:
        raise ValueError("out of range") from None


def _no_nul(value: str | None) -> str | None:
    if value is not None and "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


UtcDatetime = Annotated[datetime, AfterValidator(_utc)]
Text = Annotated[str, AfterValidator(_no_nul)]
TOPIC_PATTERN = r"^[A-Za-z0-9._-]{1,249}$"


def now() -> datetime:
    return datetime.now(timezone.utc)


def json_response(model: type[BaseModel], data: dict[str, Any]) -> Response:
    """Serialise plain data the route built for ``model`` (its ``response_model``), in pydantic-core.

    Not validated again: the data comes from typed columns, and validating a 100-item page cost as much
    CPU as serialising it (issue 18 item 5). The suite checks every endpoint's bodies against the OpenAPI
    schema instead (tests/api/test_openapi.py). Building models in Python cost more than the query, and
    returning one makes FastAPI validate it again in another thread hop. ``model`` documents the shape.
    """
    del model
    return Response(pydantic_core.to_json(data, inf_nan_mode="null"), media_type="application/json")
