"""What the routers share: pagination cursors, cluster scope, time bounds, the read session, rendering.

Every rejection is a 422 in FastAPI's own shape (``detail[].loc`` names the
parameter), including the checks FastAPI cannot express, so clients parse one format.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import AfterValidator, BaseModel
from sqlalchemy.orm import Session

from txnwatch.runtime import Runtime
from txnwatch.store import queries

MAX_LIMIT = 1000


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
        return tuple(_typed(value, type_) for value, type_ in zip(values, types))
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


# --- request context --------------------------------------------------------------------------------
# Own dependencies rather than deps.py's: those are sync, and each sync dependency costs a threadpool hop
# per request; at hundreds of requests/s the hops were a measurable share of the CPU per request.


async def current_runtime(request: Request) -> Runtime:
    return request.app.state.runtime  # type: ignore[no-any-return]


def read_session(request: Request) -> Iterator[Session]:
    """A session that only reads, in autocommit: no BEGIN/ROLLBACK round trips around each request.
    Each statement still sees committed data; the API never needs a snapshot across its statements."""
    with request.app.state.runtime.sessions() as session:
        session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
        yield session


RuntimeNow = Annotated[Runtime, Depends(current_runtime)]
ReadSession = Annotated[Session, Depends(read_session)]


def json_response(model: type[BaseModel], data: dict[str, Any]) -> Response:
    """Validate plain data against the response model and serialise it, both inside pydantic-core.

    Building a model per item in Python cost more CPU than the query on 100-item pages, and returning
    a model makes FastAPI validate it again in another thread hop. The route's ``response_model``
    still documents the body.
    """
    return Response(model.model_validate(data).model_dump_json(), media_type="application/json")


# --- cluster scope ---------------------------------------------------------------------------------------


def _unknown_cluster(name: str, configured: Sequence[str]) -> HTTPException:
    known = ", ".join(configured) or "none"
    return HTTPException(status.HTTP_404_NOT_FOUND, f"unknown cluster {name!r}; known: {known}")


@dataclass(frozen=True)
class ClusterScope:
    """Which clusters a request covers; ``ids`` holds those already in the database."""

    names: tuple[str, ...]
    ids: dict[str, int]
    explicit: bool

    @property
    def id_list(self) -> tuple[int, ...]:
        return tuple(self.ids.values())


@dataclass(frozen=True)
class ClusterSelection:
    """Configured clusters a request asked for (validated, 404 otherwise), before the database is asked."""

    names: tuple[str, ...]
    explicit: bool

    def resolve(self, session: Session) -> ClusterScope:
        return ClusterScope(self.names, queries.cluster_ids(session, self.names), self.explicit)


async def cluster_selection(runtime: RuntimeNow,
                            cluster: Annotated[str | None, Query(max_length=63, description="Only this cluster "
                                                                 "(its configured name); default: all clusters.")]
                            = None) -> ClusterSelection:
    configured = [c.name for c in runtime.settings.clusters]
    if cluster is not None and cluster not in configured:
        raise _unknown_cluster(cluster, configured)
    return ClusterSelection((cluster,) if cluster is not None else tuple(configured), explicit=cluster is not None)


ClusterFilter = Annotated[ClusterSelection, Depends(cluster_selection)]


@dataclass(frozen=True)
class ClusterRef:
    """A cluster named in the path; ``id`` is None until its first poll is recorded."""

    name: str
    id: int | None


async def path_cluster_name(runtime: RuntimeNow, cluster: str) -> str:
    configured = [c.name for c in runtime.settings.clusters]
    if cluster not in configured:
        raise _unknown_cluster(cluster, configured)
    return cluster


PathCluster = Annotated[str, Depends(path_cluster_name)]


def cluster_ref(session: Session, name: str) -> ClusterRef:
    return ClusterRef(name, queries.cluster_ids(session, [name]).get(name))


def not_found(message: str) -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, message)
