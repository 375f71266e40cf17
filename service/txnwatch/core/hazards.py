"""Which known Kafka transaction bugs a cluster runs into, and how near its ids are to epoch exhaustion.

Pure: each broker's release line and finalized ``transaction.version`` (read from ApiVersions every poll,
txnwatch.kafka.release) in, hazards out (:func:`hazards`, table-tested in tests/unit/test_hazards.py); the
coordinators' descriptions in, the few ids nearest epoch 32,767 out (:func:`epoch_headroom`).  The API's cluster
view, the console and ``txnwatch_known_hazard`` / ``txnwatch_producer_epoch_headroom`` all read these, so they
say the same.  What each hazard is and which releases it affects (with the evidence) is the vocabulary's
(txnwatch.core.vocabulary.HAZARDS).

A cluster is exposed when any broker is: every broker can become an id's coordinator after a failover.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from txnwatch.core.model import BrokerRelease, TransactionDescription
from txnwatch.core.vocabulary import KnownHazard

#: A producer epoch is a signed 16-bit number: 32,767 is the last; under transaction.version 2 every commit and
#: abort bumps it once, and the coordinator rotates the producer id when it is exhausted.
EPOCH_MAX = 32_767
#: The ids nearest exhaustion shown per cluster (API, console, metric): bounded, lowest headroom first.
HEADROOM_SHOWN = 5


def hazards(release: tuple[int, int] | None, transaction_version: int | None) -> tuple[KnownHazard, ...]:
    """The known hazards of one broker of ``release`` (its line) with ``transaction_version`` finalized."""
    if release is None or transaction_version is None or transaction_version < 2:
        return ()  # both bugs are transaction version 2's
    found = []
    if (4, 0) <= release <= (4, 2):
        found.append(KnownHazard.KAFKA_20310)
    if release < (4, 4):
        found.append(KnownHazard.KAFKA_20090)
    return tuple(found)


def cluster_hazards(releases: Iterable[BrokerRelease]) -> tuple[KnownHazard, ...]:
    """Every hazard any broker has, in the vocabulary's order."""
    found = {h for r in releases for h in hazards(r.release, r.transaction_version)}
    return tuple(h for h in KnownHazard if h in found)


@dataclass(frozen=True, slots=True)
class EpochHeadroom:
    transactional_id: str
    producer_id: int
    producer_epoch: int

    @property
    def headroom(self) -> int:
        """Epoch bumps left before the producer id must rotate (under TV2: transactions left)."""
        return EPOCH_MAX - self.producer_epoch


def epoch_headroom(described: Iterable[TransactionDescription], limit: int = HEADROOM_SHOWN
                   ) -> tuple[EpochHeadroom, ...]:
    """The ``limit`` ids with the least epoch headroom (ties by id), from the coordinators' descriptions."""
    rows = (EpochHeadroom(d.transactional_id, d.producer_id, d.producer_epoch)
            for d in described if d.producer_id >= 0 and d.producer_epoch >= 0)
    return tuple(heapq.nsmallest(max(0, limit), rows, key=lambda r: (r.headroom, r.transactional_id)))
