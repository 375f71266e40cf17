"""The DumpLogSegments reference reader on real output, captured from one-broker labs (data/dumplog-*.txt):
a Java producer (ProducerPerformance) committing every 500 ms, a second instance with the same transactional
id that fences it, then a kafka-python producer committing, aborting and committing.  Kafka 3.9.1 prints the
Scala format, 4.1.1 and 4.4.0 the JSON one (dumplog-4.4.0.txt was read with 4.3.1's tool, before Maven
Central served kafka-tools 4.4.0; tests/e2e/test_kafka_versions_history.py reads a 4.4.0 lab with 4.4.0's own)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from txnwatch.lab.dumplog import CoordinatorRecord, Totals, histories, parse_dump
from txnwatch.lab.errors import LabError

DATA = Path(__file__).with_name("data")


def _raw(version: str) -> str:
    return (DATA / f"dumplog-{version}.txt").read_text()


def _raw_state_count(text: str, tid: str, state: str, number: int) -> int:
    """States counted straight from the text, as a cross-check that does not go through the parser."""
    scala = len(re.findall(rf"transactionalId={re.escape(tid)} payload: [^\n]*state={state},", text))
    json_ = len(re.findall(rf'"transactionalId":"{re.escape(tid)}"}}}} payload: [^\n]*"transactionStatus":{number},',
                           text))
    return scala + json_


@pytest.mark.parametrize(("version", "java"), [
    pytest.param("3.9.1", dict(commits=14, aborts=1, epoch_bumps=2, fences=1), id="3.9.1-tv1"),
    pytest.param("4.1.1", dict(commits=20, aborts=1, epoch_bumps=22, fences=1), id="4.1.1-tv2"),
    pytest.param("4.4.0", dict(commits=16, aborts=1, epoch_bumps=18, fences=1), id="4.4.0-tv2"),
])
def test_counts_per_id(version, java):
    text = _raw(version)
    by_id = histories(parse_dump(text))
    assert set(by_id) == {"jid", "pyid"}
    jid, pyid = by_id["jid"], by_id["pyid"]
    assert {k: getattr(jid, k) for k in java} == java
    assert (jid.producer_id_changes, jid.timeout_aborts, jid.tombstones) == (0, 0, 0)
    # The kafka-python producer speaks transaction version 1 even on a TV2 cluster: no bump on commit/abort.
    assert (pyid.commits, pyid.aborts, pyid.epoch_bumps, pyid.fences) == (2, 1, 0, 0)
    for h in (jid, pyid):
        assert h.commits == _raw_state_count(text, h.transactional_id, "CompleteCommit", 4)
        assert h.aborts == _raw_state_count(text, h.transactional_id, "CompleteAbort", 5)
    assert Totals.of(by_id).commits == jid.commits + pyid.commits
    assert Totals.of(by_id, {"pyid"}).aborts == 1
    if version != "3.9.1":
        # Transaction version 2: one bump per commit and abort, plus the new instance's InitProducerId.
        assert jid.epoch_bumps == jid.commits + jid.aborts + 1
        assert {r.client_transaction_version for r in jid.records if r.state == "Ongoing"} == {2}


@pytest.mark.parametrize("version", ["3.9.1", "4.1.1", "4.4.0"])
def test_the_fence_as_the_coordinator_wrote_it(version):
    records = histories(parse_dump(_raw(version)))["jid"].records
    i = next(n for n, r in enumerate(records) if r.state == "PrepareAbort")
    ongoing, prepare, complete, empty = records[i - 1:i + 3]
    assert [r.state for r in (ongoing, prepare, complete, empty)] == ["Ongoing", "PrepareAbort", "CompleteAbort",
                                                                      "Empty"]
    e = ongoing.producer_epoch
    assert (prepare.producer_epoch, complete.producer_epoch, empty.producer_epoch) == (e + 1, e + 1, e + 2)
    assert ongoing.partitions == prepare.partitions == (("jt", 0),) and complete.partitions == ()
    assert prepare.last_update_ms - ongoing.last_update_ms < ongoing.timeout_ms


def test_fields_of_both_formats():
    scala = parse_dump(_raw("3.9.1"))[1]
    assert scala == CoordinatorRecord(log_partition=scala.log_partition, offset=1, create_time_ms=1795451751058,
                                      transactional_id="jid", state="Ongoing", producer_id=0, producer_epoch=0,
                                      timeout_ms=10000, partitions=(("jt", 0),), last_update_ms=1795451751057)
    first = parse_dump(_raw("4.1.1"))[0]
    assert (first.state, first.partitions, first.start_ms, first.client_transaction_version) == ("Empty", (), None, 0)
    assert all(r.log_partition >= 0 for r in parse_dump(_raw("4.1.1")))


SCALA = ("Dumping node-1/data/__transaction_state-7/00000000000000000000.log\n"
         "| offset: {o} CreateTime: {t} keySize: 7 valueSize: 49 sequence: -1 headerKeys: [] "
         "key: transaction_metadata::transactionalId={tid} payload: {payload}\n")


def _line(o: int, t: int, state: str, epoch: int, pid: int = 5, parts: str = "my-topic-0,b-2", tid: str = "t1",
          timeout: int = 10_000) -> str:
    payload = (f"producerId:{pid},producerEpoch:{epoch},state={state},partitions=[{parts}],"
               f"txnLastUpdateTimestamp={t},txnTimeoutMs={timeout}")
    return SCALA.format(o=o, t=t, tid=tid, payload=payload)


def test_a_timeout_abort_is_not_a_fence_and_topic_names_keep_their_dashes():
    text = "".join([_line(0, 1000, "Empty", 0, parts=""), _line(1, 2000, "Ongoing", 0),
                    # the coordinator aborts after the 10 s timeout, bumping the epoch (KIP-588) ...
                    _line(2, 12_500, "PrepareAbort", 1), _line(3, 12_501, "CompleteAbort", 1, parts=""),
                    # ... and the fenced application starts a new producer.
                    _line(4, 14_000, "Empty", 2, parts="")])
    records = parse_dump(text)
    assert records[1].partitions == (("b", 2), ("my-topic", 0)) and records[1].log_partition == 7
    h = histories(records)["t1"]
    assert (h.aborts, h.fences, h.timeout_aborts, h.epoch_bumps) == (1, 0, 1, 2)


def test_a_timeout_abort_counts_though_no_producer_comes_back():
    """A producer that died with its transaction open is never heard of again: the coordinator's abort past the
    timeout is one all the same (txnwatch's tail counts it when the PrepareAbort is written)."""
    text = "".join([_line(0, 1000, "Empty", 0, parts=""), _line(1, 2000, "Ongoing", 0),
                    _line(2, 12_500, "PrepareAbort", 1), _line(3, 12_501, "CompleteAbort", 1, parts="")])
    h = histories(parse_dump(text))["t1"]
    assert (h.aborts, h.fences, h.timeout_aborts) == (1, 0, 1)
    early = "".join([_line(0, 1000, "Empty", 0, parts=""), _line(1, 2000, "Ongoing", 0),
                     _line(2, 5_000, "PrepareAbort", 1), _line(3, 5_001, "CompleteAbort", 1, parts="")])
    assert histories(parse_dump(early))["t1"].timeout_aborts == 0  # within its timeout: a client's TV2 abort


def test_producer_id_change_and_tombstone():
    text = "".join([_line(0, 1000, "CompleteCommit", 32766, parts=""),
                    _line(1, 1100, "Empty", 0, pid=6, parts=""),  # epoch exhausted: a new producer id
                    SCALA.format(o=2, t=9000, tid="t1", payload="<DELETE>")])
    h = histories(parse_dump(text))["t1"]
    assert (h.producer_id_changes, h.epoch_bumps, h.tombstones, h.commits) == (1, 0, 1, 1)
    assert h.records[-1].tombstone


def test_a_line_the_parser_cannot_read_is_an_error_not_a_guess():
    with pytest.raises(LabError, match="cannot read"):
        parse_dump(SCALA.format(o=0, t=1, tid="t1", payload='{"version":"9","data":{}}'))


#: Kafka 4.4.0's own DumpLogSegments (kafka-tools 4.4.0) names the state where 4.0-4.3 print its id: the first
#: record as it printed it on a lab, the next two in its format (an Ongoing with a partition, a name not known here).
V440_NAMED = (
    "Dumping node-1/data/__transaction_state-7/00000000000000000000.log\n"
    'offset: 0 CreateTime: 1796182520358 keySize: 20 valueSize: 45 sequence: -1 headerKeys: [] key: {"type":"0",'
    '"data":{"transactionalId":"python-k440-8edc"}} payload: {"version":"1","data":{"producerId":0,'
    '"previousProducerId":0,"producerEpoch":0,"transactionTimeoutMs":10000,"transactionStatus":"Empty",'
    '"transactionPartitions":null,"transactionLastUpdateTimestampMs":1796182520270,'
    '"transactionStartTimestampMs":-1}}\n'
    'offset: 1 CreateTime: 1796182520400 keySize: 20 valueSize: 60 sequence: -1 headerKeys: [] key: {"type":"0",'
    '"data":{"transactionalId":"python-k440-8edc"}} payload: {"version":"1","data":{"producerId":0,'
    '"previousProducerId":0,"producerEpoch":0,"transactionTimeoutMs":10000,"transactionStatus":"Ongoing",'
    '"transactionPartitions":[{"topic":"k-t","partitionIds":[0]}],"transactionLastUpdateTimestampMs":1796182520399,'
    '"transactionStartTimestampMs":1796182520399}}\n'
    'offset: 2 CreateTime: 1796182520500 keySize: 20 valueSize: 45 sequence: -1 headerKeys: [] key: {"type":"0",'
    '"data":{"transactionalId":"python-k440-8edc"}} payload: {"version":"1","data":{"producerId":0,'
    '"previousProducerId":0,"producerEpoch":0,"transactionTimeoutMs":10000,"transactionStatus":"Someday",'
    '"transactionPartitions":null,"transactionLastUpdateTimestampMs":1796182520499,'
    '"transactionStartTimestampMs":-1}}\n')


def test_kafka_4_4_names_the_state():
    records = parse_dump(V440_NAMED)
    assert [(r.offset, r.state, r.partitions) for r in records] == [
        (0, "Empty", ()), (1, "Ongoing", (("k-t", 0),)), (2, "Unknown(Someday)", ())]
    assert records[1].start_ms == 1796182520399
