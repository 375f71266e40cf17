"""Administrative abort of one open transaction on one partition (``kafka-transactions.sh abort``).

As Kafka's TransactionsCommand does, the partition leader is asked first
(DescribeProducers) whether the producer really holds an open transaction there, and
only then is an ABORT marker written (WriteTxnMarkers) to that leader.  The coordinator
is not involved: this is the tool for transactions the coordinator has forgotten.
A dry run stops after the check and reports what would be written.

The transaction is named either by producer id and epoch, or, like ``kafka-transactions.sh
abort --start-offset``, by the offset where it started: the leader's DescribeProducers then
supplies the producer id and epoch (the only form on-call can copy from a hanging partition,
whose producer may be long gone).
"""

from __future__ import annotations

from dataclasses import replace

from txnwatch.core.model import AbortOutcome, RequestError, TopicPartition
from txnwatch.kafka import batches, errors, parse
from txnwatch.kafka.errors import ClusterUnreachable
from txnwatch.kafka.wire import Wire

NO_PRODUCER = -1  # Kafka's NO_PRODUCER_ID / NO_PRODUCER_EPOCH: not known yet


async def abort_transaction(wire: Wire, cluster: str, tp: TopicPartition, producer_id: int | None,
                            producer_epoch: int | None, coordinator_epoch: int | None, dry_run: bool,
                            start_offset: int | None = None) -> AbortOutcome:
    """``producer_id``/``producer_epoch``, or ``start_offset`` alone (both ids None), name the transaction."""
    if producer_id is None and start_offset is None:
        raise ValueError("name the transaction by producer id and epoch, or by its start offset")
    asked = AbortOutcome(tp=tp, producer_id=NO_PRODUCER if producer_id is None else producer_id,
                         producer_epoch=NO_PRODUCER if producer_epoch is None else producer_epoch,
                         coordinator_epoch=coordinator_epoch, leader_id=None, txn_start_offset=None,
                         dry_run=dry_run, aborted=False)

    leader, error = await _leader(wire, cluster, tp)
    if leader is None:
        return replace(asked, error=error)

    (reply,) = await wire.exchange([batches.describe_producers({tp: leader})[0]])
    if reply.failure is not None:
        failed = errors.from_exception("DescribeProducers", str(tp), reply.failure)
        return replace(asked, leader_id=leader, error=failed)
    described = parse.parse_describe_producers(reply.response, leader)
    if tp not in described.value:
        return replace(asked, leader_id=leader, error=described.errors[0] if described.errors else
                       errors.corrupt("DescribeProducers", str(tp), "answer does not mention the partition"))
    open_states = [p for p in described.value[tp] if p.has_open_txn]
    if producer_id is None:
        starting = [p for p in open_states if p.current_txn_start_offset == start_offset]
        if len(starting) != 1:
            why = (f"no open transaction starts at offset {start_offset} on {tp}" if not starting else
                   f"{len(starting)} open transactions start at offset {start_offset} on {tp}; give --producer-id")
            return replace(asked, leader_id=leader, error=RequestError(
                "DescribeProducers", str(tp), None, "NO_SUCH_OPEN_TRANSACTION", why))
        state = starting[0]
        asked = replace(asked, producer_id=state.producer_id, producer_epoch=state.producer_epoch)
        producer_id, producer_epoch = state.producer_id, state.producer_epoch
    else:
        found_state = next((p for p in open_states if p.producer_id == producer_id), None)
        if found_state is None or found_state.producer_epoch != producer_epoch:
            found = "" if found_state is None else f" (it has epoch {found_state.producer_epoch})"
            return replace(asked, leader_id=leader, error=RequestError(
                "DescribeProducers", str(tp), None, "NO_SUCH_OPEN_TRANSACTION",
                f"producer {producer_id} epoch {producer_epoch} holds no open transaction on {tp}{found}"))
        state = found_state
    assert producer_epoch is not None  # set by either branch above

    # Java's tool: a transaction that hung before its first marker reports coordinator
    # epoch -1; 0 is no greater than any real coordinator epoch, so the leader accepts it.
    epoch = state.coordinator_epoch if coordinator_epoch is None else coordinator_epoch
    epoch = max(epoch, 0)
    checked = replace(asked, leader_id=leader, coordinator_epoch=epoch, txn_start_offset=state.current_txn_start_offset)
    if dry_run:
        return checked

    (reply,) = await wire.exchange([batches.abort_marker(leader, tp, producer_id, producer_epoch, epoch)])
    if reply.failure is not None:
        return replace(checked, error=errors.from_exception("WriteTxnMarkers", str(tp), reply.failure))
    written = parse.parse_write_txn_markers(reply.response, tp, producer_id)
    return replace(checked, aborted=written.value, error=written.errors[0] if written.errors else None)


async def _leader(wire: Wire, cluster: str, tp: TopicPartition) -> tuple[int | None, RequestError | None]:
    for node in wire.candidate_nodes()[:2]:
        (reply,) = await wire.exchange([batches.metadata(node, topics=[tp.topic])])
        layout = parse.parse_metadata(reply.response) if reply.failure is None else None
        if layout is None or layout.value is None:
            continue
        leader = layout.value.leaders.get(tp)
        if leader is not None:
            return leader, None
        problem = next((e for e in layout.errors if e.target in (tp.topic, str(tp))), None)
        return None, problem or RequestError("Metadata", str(tp), None, "UNKNOWN_PARTITION",
                                             f"{tp} has no leader or does not exist")
    raise ClusterUnreachable(cluster, "no broker answered Metadata")
