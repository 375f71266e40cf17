"""The API's one dependency module: the runtime, database sessions, the published state and the cluster scope.

Routes declare what they need by type (``RuntimeDep``, ``ReadSession``, ``PathCluster``...)
and tests override these.  Dependencies are ``async`` where they only read memory, since
each sync dependency costs a threadpool hop per request (a measurable share of the CPU
per request at hundreds of requests per second).

One shape for "not found": ``404 {"detail": "unknown cluster 'x'; known: a, b"}`` from
:func:`unknown_cluster` (and :func:`not_found` for other objects); 422s are FastAPI's own
shape, including the checks FastAPI cannot express (:func:`txnwatch.serve.api.params.invalid`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Query, Request, status
from sqlalchemy.orm import Session

from txnwatch.core.views import LatestState
from txnwatch.runtime.lifecycle import Runtime
from txnwatch.store import queries

# --- runtime, sessions, state ------------------------------------------------------------------------


def runtime_of(request: Request) -> Runtime:
    """The app's runtime, refreshed: in an API worker process that reloads what the collector last published."""
    runtime: Runtime = request.app.state.runtime
    runtime.refresh()
    return runtime


async def get_runtime(request: Request) -> Runtime:
    return runtime_of(request)


def get_session(request: Request) -> Iterator[Session]:
    """A session for the routes that write (the admin audit); the caller commits."""
    with request.app.state.runtime.sessions() as session:
        yield session


async def read_session(request: Request) -> AsyncIterator[Session]:
    """A session that only reads, in autocommit (txnwatch.store.db.make_read_sessionmaker).

    ``async``: opening a session does no I/O (the route's thread checks a connection out on its first
    statement), and closing one in autocommit returns the connection to the pool without a round trip, so
    neither needs a threadpool hop of its own; a sync generator cost two per request."""
    with request.app.state.runtime.read_sessions() as session:
        yield session


async def get_state(runtime: Annotated[Runtime, Depends(get_runtime)]) -> LatestState:
    return runtime.state


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
SessionDep = Annotated[Session, Depends(get_session)]
ReadSession = Annotated[Session, Depends(read_session)]
StateDep = Annotated[LatestState, Depends(get_state)]


# --- errors ---------------------------------------------------------------------------------------------


def unknown_cluster(name: str, configured: Sequence[str]) -> HTTPException:
    known = ", ".join(configured) or "none"
    return HTTPException(status.HTTP_404_NOT_FOUND, f"unknown cluster {name!r}; known: {known}")


def not_found(message: str) -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, message)


def configured_cluster(runtime: Runtime, name: str) -> str:
    """``name`` if it is a configured cluster, else the one 404."""
    configured = [c.name for c in runtime.settings.clusters]
    if name not in configured:
        raise unknown_cluster(name, configured)
    return name


# --- cluster scope --------------------------------------------------------------------------------------


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


async def cluster_selection(runtime: RuntimeDep,
                            cluster: Annotated[str | None, Query(max_length=63, description="Only this cluster "
                                                                 "(its configured name); default: all clusters.")]
                            = None) -> ClusterSelection:
    if cluster is not None:
        return ClusterSelection((configured_cluster(runtime, cluster),), explicit=True)
    return ClusterSelection(tuple(c.name for c in runtime.settings.clusters), explicit=False)


ClusterFilter = Annotated[ClusterSelection, Depends(cluster_selection)]


@dataclass(frozen=True)
class ClusterRef:
    """A cluster named in the path; ``id`` is None until its first poll is recorded."""

    name: str
    id: int | None


async def path_cluster_name(runtime: RuntimeDep, cluster: str) -> str:
    return configured_cluster(runtime, cluster)


PathCluster = Annotated[str, Depends(path_cluster_name)]


def cluster_ref(session: Session, name: str) -> ClusterRef:
    return ClusterRef(name, queries.cluster_ids(session, [name]).get(name))
