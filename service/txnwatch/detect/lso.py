"""LSO stall episodes: a partition whose last stable offset stays put below its high watermark.

An open transaction pins the LSO at its first offset until its marker is written, so
read_committed consumers stop there.  A transaction that ends within the threshold
is normal (and right after a commit the LSO lags for milliseconds while markers are
written); an LSO that has not moved for ``lso_stall_ms`` while records wait behind it
is a stall.  An LSO below the high watermark implies a transaction open at the LSO, so
"LSO unchanged while the high watermark moves" and "open transaction at the LSO older
than the threshold" are one test; the blocker is the producer whose
``currentTxnStartOffset`` equals the LSO.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from txnwatch.core.findings import LsoStall
from txnwatch.core.model import ClusterSnapshot, PartitionSnapshot, TopicPartition
from txnwatch.detect.settings import DetectionSettings


@dataclass(frozen=True, slots=True)
class LsoTrack:
    """Per-partition memory between polls: where the LSO is and since when."""

    lso: int
    since_ms: int
    episode: LsoStall | None = None
    caught_up: bool = False


def _blocker(snapshot: ClusterSnapshot, partition: PartitionSnapshot,
             lso: int) -> tuple[int | None, int | None, str | None]:
    """The producer whose open transaction starts at the LSO: the one holding it there."""
    for producer in partition.producers or ():
        if producer.current_txn_start_offset == lso:
            ids = snapshot.transactional_ids_for_producer(producer.producer_id)
            return producer.producer_id, producer.producer_epoch, ids[0] if ids else None
    return None, None, None


def update_lso(previous: Mapping[TopicPartition, LsoTrack], snapshot: ClusterSnapshot, now_ms: int,
               settings: DetectionSettings) -> tuple[dict[TopicPartition, LsoTrack], list[LsoStall], list[LsoStall]]:
    """Returns (tracks, episodes active now, episodes that ended in this poll).

    The clock of a partition starts at the first poll that sees its LSO below the high
    watermark at a given offset, and restarts whenever the LSO moves or catches up.  So
    a transaction that was open for a moment when the poll ran (or the milliseconds of
    lag while commit markers are written) never reaches the threshold, and an episode's
    start is never earlier than what was observed: it may be up to one poll interval
    late, never early.
    """
    if not snapshot.partitions:  # nothing was learnt about partitions this poll
        kept = dict(previous)
        return kept, [t.episode for t in kept.values() if t.episode is not None], []
    tracks: dict[TopicPartition, LsoTrack] = {}
    active: list[LsoStall] = []
    ended: list[LsoStall] = []
    for tp, partition in snapshot.partitions.items():
        track = previous.get(tp)
        lso, hwm = partition.last_stable_offset, partition.high_watermark
        if lso is None or hwm is None:
            if track is not None:  # unknown this poll: neither opens nor closes an episode
                tracks[tp] = track
                if track.episode is not None:
                    active.append(track.episode)
            continue
        if track is None or lso != track.lso or lso >= hwm or track.caught_up:
            if track is not None and track.episode is not None:
                ended.append(replace(track.episode, ended_ms=now_ms, last_seen_ms=now_ms, gap=max(0, hwm - lso)))
            tracks[tp] = LsoTrack(lso=lso, since_ms=now_ms, caught_up=lso >= hwm)
            continue
        gap = hwm - lso
        episode = track.episode
        if episode is None and now_ms - track.since_ms >= settings.lso_stall_ms:
            pid, epoch, txn_id = _blocker(snapshot, partition, lso)
            episode = LsoStall(snapshot.cluster, tp, started_ms=track.since_ms, last_seen_ms=now_ms, stalled_lso=lso,
                               max_gap=gap, gap=gap, blocking_producer_id=pid, blocking_producer_epoch=epoch,
                               blocking_transactional_id=txn_id)
        elif episode is not None:
            pid, epoch, txn_id = _blocker(snapshot, partition, lso)
            episode = replace(episode, last_seen_ms=now_ms, gap=gap, max_gap=max(episode.max_gap, gap),
                              blocking_producer_id=pid if pid is not None else episode.blocking_producer_id,
                              blocking_producer_epoch=epoch if pid is not None else episode.blocking_producer_epoch,
                              blocking_transactional_id=txn_id or episode.blocking_transactional_id)
        tracks[tp] = replace(track, episode=episode)
        if episode is not None:
            active.append(episode)
    for tp, track in previous.items():
        if tp not in snapshot.partitions and track.episode is not None:
            ended.append(replace(track.episode, ended_ms=now_ms, last_seen_ms=now_ms))  # deleted or unwatched
    return tracks, active, ended


def resume(open_episodes: Iterable[LsoStall]) -> dict[TopicPartition, LsoTrack]:
    """Tracks that carry on the stall episodes an earlier leadership term left open.

    The next poll extends an episode whose LSO is still where it stalled and ends one
    whose LSO moved; starting from nothing instead would end every open stall and open it
    again ``lso_stall_ms`` later, one incident split in two and paged twice.
    """
    return {e.tp: LsoTrack(lso=e.stalled_lso, since_ms=e.started_ms, episode=e) for e in open_episodes}
