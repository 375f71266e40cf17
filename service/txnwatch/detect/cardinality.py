"""Which consumer groups get series, lag rows and API rows: the operator's caps, the most lagging groups first.

A shared cluster holds as many groups as its tenants create: 2,000 offset-only groups added
~31,000 series and 0.32 MB of lag rows per poll (issue 23).  The include/exclude patterns
(``groups_include``/``groups_exclude``) choose groups by name before their offsets are even
fetched; these caps then bound what is left, per cluster and per poll:

* at most ``max_groups`` groups, and
* at most ``max_group_partitions`` group partitions over all of them,

taking groups in order of their lag (records behind the high watermark summed over the group's
partitions, then the largest time lag, then the group id so the order is total and stable).  The
kept groups are always a prefix of that ranking, so the groups that are behind are the ones shown;
a group is kept or left out whole, so its per-topic sums stay complete.  The most lagging group is
kept even if it alone passes the partition cap.  What is left out is counted (``omitted``), never
silently dropped: /metrics exports the counts, and the lag rows, /metrics and the API all read the
same capped findings.

Detection state (commit tracking, LSO history) still covers every group, so a group that climbs
into the kept set shows its last-commit time at once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from txnwatch.core.findings import ExporterLag, GroupLag

#: ``omitted`` keys: (kind, reason).
GROUPS_OVER_CAP = ("consumer_group", "cap")
GROUPS_FILTERED = ("consumer_group", "filter")
GROUP_PARTITIONS_OVER_CAP = ("group_partition", "cap")


@dataclass(frozen=True, slots=True)
class GroupRank:
    """Why a group ranks where it does (lag first); ``partitions`` is what it costs in rows and series."""

    group_id: str
    lag_hwm: int
    lag_seconds: float
    partitions: int

    def key(self) -> tuple[int, float, str]:
        return (-self.lag_hwm, -self.lag_seconds, self.group_id)


def rank_groups(lags: Sequence[GroupLag], exporter_lags: Sequence[ExporterLag]) -> list[GroupRank]:
    """Every group with rows, most lagging first."""
    lag: dict[str, int] = defaultdict(int)
    seconds: dict[str, float] = defaultdict(float)
    rows: dict[str, int] = defaultdict(int)
    exported: dict[str, int] = defaultdict(int)
    for g in lags:
        lag[g.group_id] += g.lag_hwm or 0
        seconds[g.group_id] = max(seconds[g.group_id], g.lag_seconds or 0.0)
        rows[g.group_id] += 1
    for e in exporter_lags:
        exported[e.group_id] += 1
    groups = set(rows) | set(exported)
    ranked = [GroupRank(g, lag[g], seconds[g], max(rows[g], exported[g])) for g in groups]
    return sorted(ranked, key=GroupRank.key)


def kept_groups(ranked: Sequence[GroupRank], max_groups: int, max_group_partitions: int) -> set[str]:
    """The longest prefix of ``ranked`` within both caps (the first group always, if max_groups allows one)."""
    kept: set[str] = set()
    partitions = 0
    for rank in ranked:
        if len(kept) >= max_groups or (kept and partitions + rank.partitions > max_group_partitions):
            break
        kept.add(rank.group_id)
        partitions += rank.partitions
    return kept


def cap_groups(lags: Sequence[GroupLag], exporter_lags: Sequence[ExporterLag], max_groups: int,
               max_group_partitions: int,
               ) -> tuple[tuple[GroupLag, ...], tuple[ExporterLag, ...], dict[tuple[str, str], int]]:
    """The rows of the kept groups, and how many groups and group partitions were left out."""
    ranked = rank_groups(lags, exporter_lags)
    kept = kept_groups(ranked, max_groups, max_group_partitions)
    left_out = [r for r in ranked if r.group_id not in kept]
    omitted = {GROUPS_OVER_CAP: len(left_out), GROUP_PARTITIONS_OVER_CAP: sum(r.partitions for r in left_out)}
    if not left_out:
        return tuple(lags), tuple(exporter_lags), omitted
    return (tuple(g for g in lags if g.group_id in kept), tuple(e for e in exporter_lags if e.group_id in kept),
            omitted)
