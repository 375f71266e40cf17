"""Response models of the REST API: the public contract, so every field says what it means to a Kafka operator."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from txnwatch.core.lso_position import LsoPosition
from txnwatch.core.vocabulary import (
    OPEN_STATES,
    Framework,
    HangingReason,
    KnownHazard,
    LingeringReason,
    Severity,
    TransitionSource,
    TxnEvent,
    TxnState,
)

T = TypeVar("T")


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class Page(_Out, Generic[T]):
    items: list[T]
    next_cursor: str | None = Field(
        description="Pass as `cursor` to get the next page; null on the last page. Opaque: only valid with "
                    "the same filters and sort.")


# --- clusters ----------------------------------------------------------------------------------------------


class HistoryGapOut(_Out):
    log_partition: int = Field(description="The __transaction_state partition (a coordinator's).")
    first_offset: int = Field(description="First offset the tail expected and did not get.")
    last_offset: int = Field(description="Last missing offset: the next record read is just past it.")
    records: int = Field(description="Records removed (the topic's offsets are dense as written).")
    after: datetime | None = Field(description="Coordinator time of the last record read before the gap; null "
                                               "when unknown.")
    before: datetime | None = Field(description="Coordinator time of the first record read after the gap.")


class ClusterSummary(_Out):
    name: str
    bootstrap_servers: list[str]
    up: bool = Field(description="The latest poll reached the cluster and got its transactions and offsets.")
    last_poll_at: datetime | None = Field(description="When the latest poll attempt started.")
    last_success_at: datetime | None = Field(description="When the latest successful poll started.")
    last_error: str | None = Field(description="Why the latest poll failed; null when it succeeded.")
    polls: int = Field(description="Polls recorded in the history (every replica).")
    failed_polls: int = Field(description="Recorded polls that failed, e.g. no broker reachable.")
    history_mode: str = Field(default="polling", description="Where coordinator history (commits, aborts, "
                              "fences, epoch bumps, timelines) comes from: `exact` = this replica reads "
                              "__transaction_state record by record; `polling` = sampled by polls (fallback).")
    history_mode_reason: str = Field(default="", description="Why the cluster is in that mode, e.g. the ACL "
                                     "that denies reading __transaction_state.")
    txnlog_lag_records: int | None = Field(default=None, description="Transaction log records not yet applied "
                                           "(exact mode).")
    history_gaps: list[HistoryGapOut] = Field(default_factory=list, description=(
        "Runs of __transaction_state offsets compacted away before this replica's tail read them (the newest 20 "
        "since it started): their transitions are lost, so the log-derived counters are lower bounds between "
        "`after` and `before`. Empty when none."))


class RequestErrorOut(_Out):
    api: str = Field(description="The Kafka API that failed, e.g. DescribeProducers.")
    target: str = Field(description="What was asked: a broker, topic-partition, transactional id or group.")
    name: str = Field(description="Kafka's error name (or the transport failure).")
    error_class: str = Field(description="KIP-1050 class: retriable, refresh-retriable, abortable, "
                                         "application-recoverable, invalid-configuration or unknown.")
    advice: str = Field(description="What to do about it; empty where the message says it all.")
    message: str


class OmittedOut(_Out):
    kind: str = Field(description="consumer_group or group_partition.")
    reason: str = Field(description="filter (groups_include/groups_exclude) or cap (max_groups, "
                                    "max_group_partitions).")
    count: int


class BrokerReleaseOut(_Out):
    broker: int
    release: str = Field(description="The broker's Kafka release line as its ApiVersions answer shows it "
                                     "(`4.4+`: that line or newer).")
    transaction_version: int | None = Field(description="The finalized transaction.version it reports (None: none).")


class KnownHazardOut(_Out):
    hazard: KnownHazard
    title: str
    explanation: str
    affected: str = Field(description="Which releases carry it, and the evidence for that.")
    fix: str


class EpochHeadroomOut(_Out):
    transactional_id: str
    producer_id: int
    producer_epoch: int
    headroom: int = Field(description="Epoch bumps left before the producer id must rotate (32767 - epoch).")


class CanaryAttemptOut(_Out):
    partition: int | None = Field(description="The canary topic's partition; null for a failure before any "
                                              "partition was tried (the topic, the coordinator, InitProducerId).")
    leader: int | None = Field(description="The broker leading that partition when the round began.")
    ok: bool
    commit_ms: int | None = Field(description="Begin to the commit acknowledged (txnwatch_canary_commit_latency_"
                                              "seconds).")
    visible_ms: int | None = Field(description="The commit acknowledged to a read_committed reader handed the "
                                               "record: the LSO passed it (txnwatch_canary_visibility_latency_"
                                               "seconds).")
    stage: str | None = Field(default=None, description="Where it failed: topic, coordinator, init, begin, "
                                                        "produce, end_txn or visibility.")
    error: str | None = Field(default=None, description="Kafka's error name (or NOT_VISIBLE, a client timeout).")
    error_class: str | None = Field(default=None, description="Its KIP-1050 class.")
    message: str | None = None


class CanaryFailingOut(_Out):
    since: datetime = Field(description="The first failed round of the streak.")
    last_failure_at: datetime
    failed_rounds: int
    blame: str = Field(description="coordinator, transaction_state_partition, partition_leader or unknown.")
    broker_id: int | None = Field(description="The broker to blame, where one is.")
    transaction_state_partition: int | None
    blame_text: str = Field(description="The sentence the alert and the console say.")
    error: str
    error_class: str
    failing_partitions: list[int]


class CanaryOut(_Out):
    """The transactional canary of the cluster (docs/canary.md), as this replica's latest round saw it."""

    transactional_id: str
    topic: str
    interval_seconds: float
    ok: bool | None = Field(description="Whether the latest round committed everywhere and every commit was seen; "
                                        "null before the first round.")
    last_round_at: datetime | None
    coordinator: int | None = Field(description="The broker that coordinated the canary's id (FindCoordinator).")
    transaction_state_partition: int | None = Field(description="The id's __transaction_state partition.")
    transaction_state_leader: int | None = Field(description="That partition's leader; null while it has none.")
    attempts: list[CanaryAttemptOut] = Field(description="The latest round's transactions, one per partition.")
    failing: CanaryFailingOut | None = Field(description="The open finding \"transactions cannot commit\" "
                                                         "(alert transactions_cannot_commit); null when none.")
    last_error: str | None = Field(description="A round that failed outside Kafka's answers (a client that could "
                                               "not be built), until a round succeeds.")


class ClusterDetail(ClusterSummary):
    open_transactions: int = Field(description="Transactional ids the coordinators report in an open state "
                                               "(Ongoing, Prepare*): each pins the LSO of its partitions.")
    hanging_open: int = Field(description="Open hanging-transaction episodes.")
    lso_stalls_open: int = Field(description="Partitions whose LSO is stalled right now.")
    alerts_firing: int
    request_errors: list[RequestErrorOut] = Field(default_factory=list, description=(
        "Requests of this replica's latest poll that failed (at most 50): what they cover is unknown, never "
        "taken as evidence, until a poll answers them."))
    omitted: list[OmittedOut] = Field(default_factory=list, description=(
        "What the cluster's group filters and caps left out of the consumer-group lists, lag rows and series "
        "at this replica's latest poll (the groups' counts of txnwatch_cardinality_omitted); empty when none."))
    brokers_release: list[BrokerReleaseOut] = Field(default_factory=list, description=(
        "Each broker's release line and finalized transaction.version at this replica's latest poll."))
    known_hazards: list[KnownHazardOut] = Field(default_factory=list, description=(
        "Known Kafka transaction bugs the brokers' releases and transaction.version expose the cluster to "
        "(txnwatch_known_hazard); empty when none or when no broker answered ApiVersions."))
    epoch_headroom: list[EpochHeadroomOut] = Field(default_factory=list, description=(
        "The 5 transactional ids nearest epoch exhaustion (txnwatch_producer_epoch_headroom), lowest first."))
    canary: CanaryOut | None = Field(default=None, description=(
        "The transactional canary's latest round and finding where it is enabled and this replica runs it "
        "(the one that polls the cluster); null otherwise."))


# --- frameworks --------------------------------------------------------------------------------------------


class FrameworkOut(_Out):
    """What a transactional id's name says about the application behind it (txnwatch.core.frameworks)."""

    framework: Framework = Field(description="kafka_streams_eos_v2 (`<application.id>-<process UUID>-<thread>`), "
                                             "kafka_streams_eos_v1 (`<application.id>-<topicGroupId>_<partition>`) "
                                             "or flink_kafka_sink (`<transactionalIdPrefix>-<subtask>-<checkpoint>`).")
    application: str = Field(description="The Kafka Streams application.id, or the Flink sink's transactional id "
                                         "prefix (one per sink, usually named after its job).")
    process: str | None = Field(default=None, description="Kafka Streams EOS v2: the instance's process UUID.")
    thread: int | None = Field(default=None, description="Kafka Streams EOS v2: the stream thread's index (1 for "
                                                         "StreamThread-1).")
    task: str | None = Field(default=None, description="Kafka Streams EOS v1: the task, `<topicGroupId>_<partition>`.")
    subtask: int | None = Field(default=None, description="Flink: the sink's subtask index (0-based).")
    checkpoint: int | None = Field(default=None, description="Flink: the checkpoint id (INCREMENTING naming, the "
                                                             "default) or the pool slot (POOLING naming, connector "
                                                             "4.x+): the name cannot tell which.")


_FRAMEWORK = ("The framework, application or job, subtask and checkpoint the transactional id's name says; null "
              "when no framework's naming rule reads it.")


class LingeringOut(_Out):
    cluster: str
    transactional_id: str
    framework: FrameworkOut
    prefix: str = Field(description="The Flink sink's transactional id prefix (its job's sink).")
    subtask: int
    checkpoint: int = Field(description="Checkpoint id (INCREMENTING naming) or pool slot (POOLING).")
    reason: LingeringReason = Field(description="superseded: a transaction of the same prefix and subtask that "
                                                "started later has committed, so Flink will never commit this one; "
                                                "job_gone: past its transaction.timeout.ms and nothing of the "
                                                "prefix started within a timeout.")
    reason_explanation: str
    fix: str
    superseded_by: str | None = Field(description="The newer committed transactional id that proves it "
                                                  "(superseded); null for job_gone.")
    superseded_checkpoint: int | None
    producer_id: int
    producer_epoch: int
    txn_started_at: datetime
    age_seconds: float
    timeout_ms: int
    partitions: list[str] = Field(description="Partitions whose LSO it pins, as topic-partition.")
    abort_by_id_command: str | None = Field(description=(
        "The `txnwatch abort --transactional-id … --execute` line that ends it (its coordinator aborts it on "
        "every partition and fences its producer, Kafka 4.1+); null on clusters whose oldest broker is older "
        "than 4.1, where the partition abort at the start offset of each LSO stall it causes is the way (GET "
        "/api/v1/lso-stalls: `abort_command`)."))
    detected_at: datetime = Field(description="The poll that found it.")


class LingeringReport(_Out):
    items: list[LingeringOut] = Field(description="Every cluster's lingering Flink transactions at its latest "
                                                  "poll, oldest first.")


# --- transactions ------------------------------------------------------------------------------------------


_OPEN = ", ".join(OPEN_STATES)


class TransactionSummary(_Out):
    cluster: str
    transactional_id: str
    state: TxnState = Field(description="Coordinator state as DescribeTransactions names it; the open ones: "
                                        f"{_OPEN}.")
    producer_id: int
    producer_epoch: int
    coordinator_id: int | None = Field(description="Broker id of the transaction coordinator.")
    timeout_ms: int = Field(description="The producer's transaction.timeout.ms.")
    txn_started_at: datetime | None = Field(description="Start of the current (or last) transaction.")
    age_seconds: float | None = Field(description="How long the open transaction has been running; null unless "
                                                  f"the state is open ({_OPEN}).")
    partitions: list[str] = Field(description="Partitions in the transaction, as topic-partition.")
    hanging: bool = Field(description="An open hanging-transaction episode names this transactional id.")
    first_seen_at: datetime
    last_seen_at: datetime
    gone_at: datetime | None = Field(description="When the coordinators stopped listing this id (expired); "
                                                 "null while listed.")
    source: Literal["transaction_log", "poll"] = Field(
        description="Where the state comes from: the coordinators' own log (exact mode: it wins wherever it "
                    "speaks) or polling (the log is not read, or has not spoken of this id).")
    framework: FrameworkOut | None = Field(default=None, description=_FRAMEWORK)


class TransactionPage(Page[TransactionSummary]):
    pass


class TransitionOut(_Out):
    """One transition of an id (core.findings.Transition, whichever source saw it), as convert.transition_view
    builds it."""

    observed_at: datetime
    from_state: str | None
    to_state: str
    producer_id: int
    producer_epoch: int
    prev_producer_id: int | None
    prev_producer_epoch: int | None
    timeout_ms: int
    txn_started_at: datetime | None
    partitions: list[str]
    events: list[TxnEvent] = Field(description="What the change means, e.g. epoch_bump, fenced, timeout_abort.")
    duration_ms: int | None = Field(description="Duration of the transaction that this change completed.")
    log_partition: int | None = Field(default=None, description="__transaction_state partition of the record "
                                      "this transition was read from; null for a change inferred between polls.")
    log_offset: int | None = Field(default=None, description="Offset of that record; null when inferred.")
    client_transaction_version: int | None = Field(default=None, description="ClientTransactionVersion the "
                                                   "coordinator wrote with the record (2 = KIP-890 part 2).")
    detail: str | None = Field(default=None, description="What the record said beyond these fields: the producer id "
                                                          "a Prepare* announces the id moves to (NextProducerId, "
                                                          "Kafka 4.3+), or what txnwatch does not know (raw).")
    source: TransitionSource = Field(description="Who saw the change: the coordinators' own log (exact) or a poll "
                                                 "(inferred between two answers).")


class TxnPartition(_Out):
    topic: str
    partition: int
    sampled_at: datetime | None = Field(description="Latest offsets sample of the partition; null if none yet.")
    high_watermark: int | None
    last_stable_offset: int | None
    hwm_minus_lso: int | None = Field(description="Records read_committed consumers cannot see yet.")
    open_transactions: int | None


class BlockedGroup(_Out):
    group_id: str
    committed_offset: int
    lag_lso: int | None = Field(description="Records a read_committed consumer of the group can still read.")
    lag_hwm: int | None
    position: LsoPosition | None = Field(description="The committed offset against the LSO: past_lso (only a "
                                                     "read_uncommitted group gets there; the open transaction does "
                                                     "not hold it up), at_lso (with records beyond the LSO: a "
                                                     "read_committed group receives nothing until the transaction "
                                                     "ends), before_lso (records left to read); null when the LSO "
                                                     "is unknown.")
    isolation_level: Literal["read_uncommitted"] | None = Field(
        description="read_uncommitted when the position proves it (past the LSO); null otherwise: Kafka does not "
                    "report a group's isolation level.")
    waiting_at_lso: bool = Field(description="position is at_lso: the group's read_committed consumers receive "
                                             "nothing from this partition until the transaction ends. A group "
                                             "past the LSO (read_uncommitted) is never waiting.")


class IncidentContext(_Out):
    """What on-call needs to act on a pinned partition, shared by hanging transactions and LSO stalls."""

    abort_command: str | None = Field(description="The `txnwatch abort --bootstrap-server … --start-offset … "
                                                  "--execute` line that writes the ABORT marker at the "
                                                  "transaction's start offset (the partition leader names the "
                                                  "producer, as Kafka's tool does); it runs as printed wherever "
                                                  "txnwatch is installed, and is a dry run without --execute. "
                                                  "Null without a start offset.")
    kafka_abort_command: str | None = Field(description="The same abort with Kafka's own tool "
                                                        "(`kafka-transactions.sh abort`), for hosts that have it.")
    high_watermark: int | None = Field(description="Latest high watermark of the partition.")
    last_stable_offset: int | None = Field(description="Latest LSO of the partition.")
    invisible_records: int | None = Field(description="HWM − LSO now: records read_committed consumers cannot see.")
    blocked_groups: list[BlockedGroup] = Field(description="Consumer groups with committed offsets on the "
                                                           "partition, from the latest poll.")
    runbook: str = Field(description="Runbook section (docs/runbooks.md anchor, or the configured runbook URL).")


class HangingEpisodeOut(IncidentContext):
    id: int
    cluster: str
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    transactional_id: str | None = Field(description="Null when no coordinator knows the producer: the classic "
                                                     "hanging case that only an admin abort can end.")
    coordinator_id: int | None
    reason: HangingReason = Field(description="Why it counts as hanging; see `reason_explanation`.")
    reason_explanation: str = Field(description="The reason in plain words.")
    fix: str = Field(description="What ends it.")
    txn_start_offset: int | None = Field(description="First offset of the open transaction: where the LSO is pinned.")
    first_write_at: datetime | None = Field(description="The transaction's first write, to within a poll interval: "
                                                        "the first poll that saw the LSO pinned at its start offset.")
    last_write_at: datetime | None = Field(description="The producer's last write to the partition "
                                                       "(DescribeProducers lastTimestamp).")
    first_seen_at: datetime = Field(description="When txnwatch first called it hanging (Kafka's rule needs the "
                                                "last write to be older than transaction.max.timeout.ms).")
    last_seen_at: datetime
    resolved_at: datetime | None
    open_seconds: float = Field(description="Age of the transaction: since its first write (or, if that is not "
                                            "known, its last write) until now or the episode's end; never less "
                                            "than `last_write_age_seconds`.")
    last_write_age_seconds: float | None = Field(description="Since the producer's last write to the partition.")
    hanging_seconds: float = Field(description="How long txnwatch has called it hanging (since `first_seen_at`).")
    framework: FrameworkOut | None = Field(default=None, description=_FRAMEWORK)


class HangingPage(Page[HangingEpisodeOut]):
    pass


class TxnLogHistory(_Out):
    """What the coordinator's own log says about the id (exact history mode)."""

    source: str = Field(description="Always transaction_log: counted from __transaction_state records.")
    state: TxnState
    producer_id: int
    producer_epoch: int
    last_update_at: datetime = Field(description="When the coordinator wrote the id's latest state.")
    client_transaction_version: int
    commits: int = Field(description="CompleteCommit transitions of this id since txnwatch first read its log.")
    aborts: int = Field(description="CompleteAbort transitions (own aborts, fences and timeouts).")
    epoch_bumps: int = Field(description="Epoch increases within a producer id, summed.")
    fences: int = Field(description="Open transactions ended by a new instance's InitProducerId.")
    timeout_aborts: int = Field(description="Transactions the coordinator aborted after their timeout.")


class TransactionDetail(TransactionSummary):
    history: TxnLogHistory | None = Field(default=None, description="The coordinator log's view and per-id "
                                          "counts; null when the cluster's history comes from polling.")
    partition_offsets: list[TxnPartition] = Field(description="The transaction's partitions with their latest "
                                                              "offsets: an LSO at the transaction's first offset "
                                                              "blocks read_committed consumers.")
    hanging_episodes: list[HangingEpisodeOut] = Field(description="Open hanging episodes of this transactional id.")
    timeline: list[TransitionOut] = Field(description="Observed state changes, newest first.")
    timeline_truncated: bool = Field(description="More transitions exist than `timeline_limit` returned.")


# --- LSO stalls ------------------------------------------------------------------------------------------


class LsoStallOut(IncidentContext):
    id: int
    cluster: str
    topic: str
    partition: int
    started_at: datetime = Field(description="When the LSO stopped: the blocking transaction's first write, to "
                                             "within a poll interval.")
    ended_at: datetime | None = Field(description="Null while the stall lasts.")
    last_seen_at: datetime
    stalled_lso: int = Field(description="The offset the LSO is stuck at: the blocking transaction's start offset.")
    max_gap: int = Field(description="Largest HWM − LSO seen during the episode.")
    blocking_producer_id: int | None
    blocking_producer_epoch: int | None
    blocking_transactional_id: str | None
    blocking_last_write_at: datetime | None = Field(description="The blocking producer's last write, when it is "
                                                                "also a hanging transaction.")
    hanging_reason: HangingReason | None = Field(description="Set when the blocking transaction is hanging: only "
                                                             "an abort ends it.")
    duration_seconds: float = Field(description="How long the stall lasted, or has lasted so far: the age of the "
                                                "blocking transaction since its first write.")
    last_write_age_seconds: float | None = Field(description="Since the blocking producer's last write, when known.")
    abort_by_id_command: str | None = Field(default=None, description=(
        "While the stall lasts and its blocking transaction is one its coordinator holds open (not hanging): the "
        "`txnwatch abort --transactional-id … --execute` line that ends it on every partition it spans and fences "
        "its producer, as Kafka 4.1's `kafka-transactions.sh forceTerminateTransaction` does. Null on clusters "
        "whose oldest broker is older than 4.1 (`abort_command`, the partition abort, is the way there)."))
    blocking_framework: FrameworkOut | None = Field(default=None, description=(
        "What the blocking transactional id's name says: framework, application or job, subtask, checkpoint; null "
        "when no framework's naming rule reads it."))


class LsoStallPage(Page[LsoStallOut]):
    pass


# --- partitions ------------------------------------------------------------------------------------------


class PartitionOut(_Out):
    cluster: str
    topic: str
    partition: int
    sampled_at: datetime
    leader: int | None
    high_watermark: int | None = Field(description="End of the log (read_uncommitted ListOffsets).")
    last_stable_offset: int | None = Field(description="What read_committed consumers can reach "
                                                       "(read_committed ListOffsets).")
    hwm_minus_lso: int | None = Field(description="Records invisible to read_committed consumers; grows "
                                                  "while an open transaction pins the LSO.")
    log_start_offset: int | None = Field(description="Earliest offset still in the log.")
    open_transactions: int = Field(description="Producers with an open transaction on the partition "
                                               "(DescribeProducers).")


class PartitionPage(Page[PartitionOut]):
    pass


# --- consumer groups ---------------------------------------------------------------------------------


class ConsumerGroupSummary(_Out):
    cluster: str
    group_id: str
    sampled_at: datetime = Field(description="When the lag was measured: the collector's latest poll, or the "
                                             "stored lag sample where that is newer (a cluster this replica does "
                                             "not poll; a group the poll no longer finds).")
    partitions: int = Field(description="Partitions with a committed offset.")
    topics: list[str]
    lag_lso: int | None = Field(description="Total lag against the LSO: what a read_committed consumer can "
                                            "still read. Null when no partition's LSO is known.")
    lag_hwm: int | None = Field(description="Total lag against the high watermark, as classic lag exporters "
                                            "report it (overstates read_committed lag by HWM − LSO).")
    max_lag_seconds: float | None = Field(description="Largest estimated time lag of any partition.")
    lag_seconds_unknown: int = Field(default=0, description="Partitions whose time lag is unknown because their "
                                                            "first unconsumed record cannot be read (see "
                                                            "partition_lags[].lag_seconds_unknown in the group's "
                                                            "detail); max_lag_seconds leaves them out.")


class ConsumerGroupPage(Page[ConsumerGroupSummary]):
    pass


class GroupPartitionLag(_Out):
    topic: str
    partition: int
    committed_offset: int
    lag_lso: int | None
    lag_hwm: int | None
    lag_seconds: float | None = Field(description="Age of the first record the group has not consumed; null when "
                                                  "unknown (see lag_seconds_unknown) or not yet estimable.")
    lag_seconds_unknown: str | None = Field(
        default=None, description="Why lag_seconds is unknown: record_over_budget (the first unconsumed record lies "
                                  "past the decompression budget of its batch, e.g. a compression bomb) or "
                                  "record_unreadable (a damaged batch), then which record and batch.")
    lag_records: int | None = Field(
        default=None, description="Records a read_committed consumer still reads before the LSO: lag_lso without "
                                  "control markers and aborted transactions' records, as the poll counted it "
                                  "(a stored sample's own count, else the latest poll's at the same committed "
                                  "offset); null until counted.")


class ConsumerGroupDetail(ConsumerGroupSummary):
    lag_records: int | None = Field(default=None, description="Sum of partition_lags[].lag_records; null unless "
                                                              "every partition's is known.")
    partition_lags: list[GroupPartitionLag]


# --- verification --------------------------------------------------------------------------------------


class BrokerVerificationOut(_Out):
    """One broker's own KIP-890 figures, from its JMX exporter at the latest poll (not windowed: the broker's
    counts since it started, and its recent percentiles)."""

    broker: str = Field(description="The configured label or the broker id.")
    url: str
    up: bool = Field(description="The exporter answered with the AddPartitionsToTxnManager MBeans.")
    error: str | None = Field(default=None, description="Why the figures are missing.")
    verifications: int | None = Field(default=None, description="Count of VerificationTimeMs: verifications "
                                                                "this broker performed since it started.")
    failures: int | None = Field(default=None, description="Count of VerificationFailureRate: transactional "
                                                           "writes this broker refused since it started.")
    failures_per_second_1m: float | None = Field(default=None, description="VerificationFailureRate, the "
                                                                           "broker's one-minute rate.")
    time_ms_p50: float | None = Field(default=None, description="VerificationTimeMs 50th percentile as the "
                                                                "broker reports it.")
    time_ms_p99: float | None = None
    time_ms_max: float | None = None
    time_ms_mean: float | None = None


class BrokerVerificationSummary(_Out):
    """The brokers' own figures for one cluster, as of the latest poll."""

    configured: bool = Field(description="False when the cluster has no broker_metrics_urls / "
                                         "broker_metrics_url_template: then only txnwatch's own figures exist.")
    as_of: datetime | None = Field(default=None, description="Time of the poll that read them.")
    brokers_up: int = 0
    verifications: int | None = Field(default=None, description="Sum over the brokers that answered.")
    failures: int | None = Field(default=None, description="Sum over the brokers that answered.")
    failure_ratio: float | None = Field(default=None, description="failures / verifications since the brokers "
                                                                  "started (their VerificationFailureRate as a "
                                                                  "ratio); null without verifications.")
    time_ms_p99_max: float | None = Field(default=None, description="Worst broker's VerificationTimeMs p99.")
    brokers: list[BrokerVerificationOut] = Field(default_factory=list)


class VerificationStats(_Out):
    cluster: str
    window_seconds: int
    window_start: datetime
    window_end: datetime
    samples: int = Field(description="Coordinator listing checks (partition-side, polled) in the window.")
    timed: int = Field(description="Checks with a measured listing delay.")
    verification_ms_p50: int | None = Field(description="Coordinator listing delay, polled from outside: time "
                                                        "from a partition showing the producer's open "
                                                        "transaction until the coordinator lists the partition "
                                                        "(nearest rank). Not KIP-890's VerificationTimeMs: see "
                                                        "`brokers`.")
    verification_ms_p95: int | None
    verification_ms_p99: int | None
    verification_ms_max: int | None
    failed: int = Field(description="Listing misses: checks where a partition held an open transaction the "
                                    "coordinator did not list after the grace period.")
    failure_rate: float | None = Field(description="Listing miss ratio: failed / samples; null without samples. "
                                                   "Not KIP-890's VerificationFailureRate (a poller cannot see a "
                                                   "write the broker refused): see `brokers`.")
    brokers: BrokerVerificationSummary = Field(default_factory=lambda: BrokerVerificationSummary(configured=False),
                                               description="The brokers' own VerificationTimeMs / "
                                                           "VerificationFailureRate, from their JMX exporters.")


class VerificationReport(_Out):
    clusters: list[VerificationStats]


# --- alerts --------------------------------------------------------------------------------------------


class AlertOut(_Out):
    id: int
    cluster: str | None
    rule: str = Field(description="The rule that opened the incident and keeps its key (and PagerDuty dedup key) "
                                  "while it is open; see `root_cause` for what the incident is about.")
    root_cause: str = Field(description="The rule the incident is about: its most telling finding. An incident "
                                        "opened as an LSO stall becomes `hanging_transaction` once Kafka calls "
                                        "the blocking transaction hanging; its key does not change.")
    title: str = Field(description="The root cause's title in words (e.g. \"Hanging transaction\").")
    incident_key: str = Field(description="Stable per incident; the PagerDuty dedup_key derives from it.")
    state: str = Field(description="pending (condition true, `for:` not elapsed), firing, or resolved.")
    severity: Severity
    summary: str = Field(description="The root cause's summary, with the related findings by title.")
    since: datetime = Field(description="The incident's one clock: when its earliest finding began (the LSO's "
                                        "first poll at the pinned offset), else `started_at`. The console's "
                                        "\"since\" is this moment too.")
    labels: dict[str, Any]
    details: dict[str, Any]
    started_at: datetime
    fired_at: datetime | None
    resolved_at: datetime | None
    last_seen_at: datetime


class AlertPage(Page[AlertOut]):
    pass


class ErrorOut(BaseModel):
    detail: str

