"""The cluster rows: registered once, at start, for every configured cluster together.

Every other table points at a cluster row, so the rows must exist before the first
poll is written or the first alert is evaluated.  One upsert in one transaction
registers them all (a restart with a changed bootstrap list updates it); nothing
else creates cluster rows, so two writers never race to create the same one.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from txnwatch.store import models as m
from txnwatch.store.upsert import insert_for


def register_clusters(session: Session, clusters: Mapping[str, str], now: datetime) -> dict[str, int]:
    """Upserts ``name → bootstrap servers`` in the caller's transaction; returns every registered name's id."""
    if clusters:
        dialect = session.get_bind().dialect.name
        insert = insert_for(dialect, m.Cluster)
        rows = [dict(name=name, bootstrap_servers=bootstrap, up=False, created_at=now)
                for name, bootstrap in sorted(clusters.items())]
        session.execute(insert.on_conflict_do_update(
            index_elements=["name"], set_={"bootstrap_servers": insert.excluded.bootstrap_servers}), rows)
    return {row.name: row.id for row in session.execute(select(m.Cluster.name, m.Cluster.id))}
