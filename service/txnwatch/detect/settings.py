"""Detection thresholds, in milliseconds, decoupled from the config layer so detection stays pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from txnwatch.core.config import ClusterConfig, DetectionConfig


@dataclass(frozen=True, slots=True)
class DetectionSettings:
    """Every threshold trades a false alarm against a late one; defaults favour no false alarm."""

    #: Added to transaction.max.timeout.ms before an open transaction on a partition is a hanging
    #: candidate.  Kafka's find-hanging uses 0; kafka-python's helper uses 5 minutes.
    hanging_margin_ms: int = 0
    #: How far past its own transaction.timeout.ms an Ongoing transaction may go before it is overdue.
    timeout_grace_ms: int = 30_000
    #: PrepareCommit/PrepareAbort lasting longer than this is stuck.  Right after commit the
    #: coordinator legitimately shows Prepare* for milliseconds while markers are written.
    prepare_stuck_ms: int = 30_000
    #: An LSO below the high watermark that has not moved for this long is a stall.
    lso_stall_ms: int = 30_000
    #: How long a partition may show an open transaction its coordinator does not list.
    verification_grace_ms: int = 10_000
    #: Samples of the LSO kept per partition for time-lag estimates.
    lso_history: int = 64
    #: Consumer groups given series, lag rows and API rows per cluster, most lagging first (detect.cardinality).
    max_groups: int = 500
    #: Group partitions over all those groups; a group is kept or left out whole.  20,000 serves the issue 25
    #: lab (300 groups, 12,015 group partitions) whole with a 1.66x margin; 5,000 (issue 23) left 176 groups out.
    max_group_partitions: int = 20_000

    def __post_init__(self) -> None:
        for name in ("hanging_margin_ms", "timeout_grace_ms", "prepare_stuck_ms", "lso_stall_ms",
                     "verification_grace_ms", "max_groups", "max_group_partitions"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        if self.lso_history < 2:
            raise ValueError("lso_history must keep at least 2 samples")

    @classmethod
    def from_config(cls, config: DetectionConfig, cluster: ClusterConfig | None = None) -> DetectionSettings:
        """The thresholds, and the group caps of ``cluster`` (defaults without one)."""
        caps = {} if cluster is None else {"max_groups": cluster.max_groups,
                                            "max_group_partitions": cluster.max_group_partitions}
        return cls(
            **caps,
            hanging_margin_ms=int(config.hanging_margin_seconds * 1000),
            timeout_grace_ms=int(config.timeout_grace_seconds * 1000),
            prepare_stuck_ms=int(config.prepare_stuck_seconds * 1000),
            lso_stall_ms=int(config.lso_stall_seconds * 1000),
            verification_grace_ms=int(config.verification_grace_seconds * 1000),
        )
