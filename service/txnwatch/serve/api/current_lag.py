"""Consumer groups as the collector's latest poll sees them, for the API and the console.

/metrics exports the lag of the latest poll; the stored lag samples are written once per
``lag_sample_interval_seconds`` (300 s by default) and serve history.  So the current answer comes from the
poll (the cluster's :class:`~txnwatch.core.views.ClusterView`, in an API worker as the collector last published
it), and from the stored samples only where those are newer: a replica that does not poll the cluster (fleet
mode), a restart before the first poll.  The freshest source wins, per cluster; ``sampled_at`` says when.

A poll's groups are those /metrics exports (``max_groups`` / ``max_group_partitions`` bound both); the stored
sample holds the same rows (store/findings.py writes ``findings.lags``).
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from txnwatch.core.epoch import from_ms, to_ms
from txnwatch.core.findings import GroupLag
from txnwatch.core.views import LatestState
from txnwatch.store import queries
from txnwatch.store.models import ConsumerLagSample


@dataclass(frozen=True, slots=True)
class PolledGroup:
    """One group of one poll: its partitions in (topic, partition) order."""

    cluster_id: int
    cluster: str
    group_id: str
    sampled_at: datetime
    lags: tuple[GroupLag, ...]

    def summary(self) -> queries.GroupSummaryRow:
        """The row :func:`queries.list_groups` makes of a stored sample, made of the poll's."""
        lso = [g.lag_lso for g in self.lags if g.lag_lso is not None]
        hwm = [g.lag_hwm for g in self.lags if g.lag_hwm is not None]
        return queries.GroupSummaryRow(
            self.cluster_id, self.cluster, self.group_id, self.sampled_at, len(self.lags),
            sum(lso) if lso else None, sum(hwm) if hwm else None,
            max((g.lag_seconds for g in self.lags if g.lag_seconds is not None), default=None),
            topics=tuple(sorted({g.tp.topic for g in self.lags})),
            lag_seconds_unknown=sum(1 for g in self.lags if g.lag_seconds_unknown is not None))

    @property
    def lag_records(self) -> int | None:
        """Summed over the partitions; None unless every one was counted."""
        counted = [g.lag_records for g in self.lags]
        return None if None in counted else sum(n for n in counted if n is not None)


def order_key(cluster_id: int, group_id: str) -> tuple[int, bytes]:
    """The stored list's order (cluster id, group id by its bytes: store.queries._bytewise)."""
    return cluster_id, group_id.encode("utf-8", "surrogatepass")


def polled_groups(state: LatestState, cluster: str, cluster_id: int | None,
                  stored_at: datetime | None) -> dict[str, PolledGroup] | None:
    """The cluster's groups at its latest poll, by group id; None when there is no poll or the stored sample is
    newer (then that answers)."""
    view = state.get(cluster)
    if view is None or view.findings is None or cluster_id is None:
        return None
    findings = view.findings
    at_ms = view.snapshot.taken_at_ms if view.snapshot is not None else findings.now_ms
    if stored_at is not None and to_ms(stored_at) > at_ms:
        return None
    with _memo_lock:
        memo = _memo.get(cluster)
    if memo is not None and memo[0] is findings and memo[1] == cluster_id:
        return memo[2]
    at = from_ms(at_ms)
    by_group: dict[str, list[GroupLag]] = {}
    for g in findings.lags:
        by_group.setdefault(g.group_id, []).append(g)
    groups = {gid: PolledGroup(cluster_id, cluster, gid, at, tuple(sorted(lags, key=lambda g: (g.tp.topic,
                                                                                                g.tp.partition))))
              for gid, lags in by_group.items()}
    with _memo_lock:
        _memo[cluster] = (findings, cluster_id, groups)
    return groups


#: cluster -> (the findings, the cluster id, their groups): one poll's grouping serves every request until the next
#: poll (the findings are replaced whole, never changed), one entry per configured cluster.
_memo: dict[str, tuple[Any, int, dict[str, PolledGroup]]] = {}
_memo_lock = threading.Lock()


def list_groups(session: Session, state: LatestState, clusters: Collection[str], *,
                after: tuple[int, str] | None, limit: int) -> list[tuple[queries.GroupSummaryRow, PolledGroup | None]]:
    """Each group of the clusters, in the stored list's order, from the latest poll where it is the freshest
    source, else from the latest stored sample (the poll's own group, beside its summary; None for a stored one)."""
    ids = queries.cluster_ids(session, clusters)
    stored_at = queries.latest_sampled_at(session, ConsumerLagSample, clusters)
    polled: list[PolledGroup] = []
    from_store: list[str] = []
    for name in clusters:
        cid = ids.get(name)
        groups = polled_groups(state, name, cid, stored_at.get(cid) if cid is not None else None)
        if groups is None:
            from_store.append(name)
        else:
            polled.extend(groups.values())
    if after is not None:
        start = order_key(*after)
        polled = [g for g in polled if order_key(g.cluster_id, g.group_id) > start]
    polled.sort(key=lambda g: order_key(g.cluster_id, g.group_id))
    rows: list[tuple[queries.GroupSummaryRow, PolledGroup | None]] = [(g.summary(), g) for g in polled[:limit]]
    if from_store:
        rows += [(g, None) for g in queries.list_groups(session, from_store, after=after, limit=limit)]
        rows.sort(key=lambda r: order_key(r[0].cluster_id, r[0].group_id))
    return rows[:limit]


def polled_group(session: Session, state: LatestState, cluster: str, cluster_id: int | None,
                 group_id: str) -> PolledGroup | None:
    """The group at the cluster's latest poll, when that poll is the freshest source (as for the list); None
    otherwise, and for a group no longer in the poll (its last stored sample answers)."""
    if cluster_id is None:
        return None
    stored_at = queries.latest_sampled_at(session, ConsumerLagSample, [cluster]).get(cluster_id)
    groups = polled_groups(state, cluster, cluster_id, stored_at)
    return None if groups is None else groups.get(group_id)
