"""Request dependencies: DB sessions, settings and the published cluster state."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from sqlalchemy.orm import Session

from txnwatch.config import Settings
from txnwatch.runtime import Runtime
from txnwatch.state import LatestState


async def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime


def get_settings(runtime: Annotated[Runtime, Depends(get_runtime)]) -> Settings:
    return runtime.settings


def get_state(runtime: Annotated[Runtime, Depends(get_runtime)]) -> LatestState:
    return runtime.state


def get_session(runtime: Annotated[Runtime, Depends(get_runtime)]) -> Iterator[Session]:
    with runtime.sessions() as session:
        yield session


def cluster_names(runtime: Annotated[Runtime, Depends(get_runtime)]) -> list[str]:
    return [c.name for c in runtime.settings.clusters]


def known_cluster(cluster: str, names: Annotated[list[str], Depends(cluster_names)]) -> str:
    if cluster not in names:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"unknown cluster {cluster!r}; known: {', '.join(names) or 'none'}")
    return cluster


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
StateDep = Annotated[LatestState, Depends(get_state)]
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
