"""A compression bomb on a real broker does not blind or kill the daemon (issue 23 item 2).

One gzip and one zstd batch, each a 200 MB record of zeros (204 KB and 6 KB on the wire, under
the default ``max.message.bytes``) followed in the same batch by a small record, and groups
committed at them; beside them ordinary lagging groups.  ``txnwatch run`` (a real process,
SQLite) polls the cluster; the test reads its peak resident memory (VmHWM) and what it
reports.  Before the budget, the time-lag fetch decompressed the gzip batch whole: 100 ->
702 MB, past the chart's 512Mi limit, on every start.

Expected values come from what the test wrote: each record's timestamp is set by the test,
offsets are the producer's acknowledgements.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.structs import OffsetAndMetadata
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.test_process import start
from tests.fixtures.daemon import free_port, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.timeout(600)]

BOMB_BYTES = 200 * 1000 * 1000
CHART_LIMIT_BYTES = 512 * 1024 * 1024
AGE_S = {"bomb": 900, "after": 600, "plain": 300}


def produce_one_batch(bootstrap: str, topic: str, partition: int, compression: str | None,
             records: list[tuple[bytes, int]]) -> list[int]:
    """Sends ``records`` (value, timestamp ms) as ONE batch; their offsets."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=compression, linger_ms=2_000,
                             batch_size=BOMB_BYTES + 1_000_000, max_request_size=BOMB_BYTES + 1_000_000, acks=1)
    try:
        futures = [producer.send(topic, value=value, partition=partition, timestamp_ms=ts) for value, ts in records]
        producer.flush(timeout=120)
        return [f.get(timeout=60).offset for f in futures]
    finally:
        producer.close(timeout=10)


def commit_offset(bootstrap: str, group: str, topic: str, partition: int, offset: int) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({KafkaTopicPartition(topic, partition): OffsetAndMetadata(offset, "", -1)})
    finally:
        consumer.close()


def vm_hwm_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


FETCH_ERRORS = ("txnwatch_request_errors_total", frozenset({("cluster", "lab"), ("api", "Fetch")}))


def _samples(base: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = httpx.get(base + "/metrics", timeout=10).text
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def _group_row(base: str, group: str, topic: str) -> dict[str, Any] | None:
    answer = httpx.get(f"{base}/api/v1/consumer-groups/lab/{group}", timeout=10)
    if answer.status_code != 200:
        return None
    rows = [p for p in answer.json()["partition_lags"] if p["topic"] == topic]
    return rows[0] if rows else None


def test_a_compression_bomb_leaves_memory_under_the_chart_limit_and_only_its_time_lag_unknown(
        lab_cluster: Any, new_topic: Callable[..., str], tmp_path: Path) -> None:
    bootstrap = lab_cluster.bootstrap_servers
    bombs, plain = new_topic(partitions=2, replication=1), new_topic(partitions=3, replication=1)
    now_ms = int(time.time() * 1000)
    ts = {k: now_ms - s * 1000 for k, s in AGE_S.items()}
    zeros = bytes(BOMB_BYTES)
    offsets = {"gzip": produce_one_batch(bootstrap, bombs, 0, "gzip", [(zeros, ts["bomb"]), (b"after", ts["after"])]),
               "zstd": produce_one_batch(bootstrap, bombs, 1, "zstd", [(zeros, ts["bomb"]), (b"after", ts["after"])])}
    del zeros
    assert offsets == {"gzip": [0, 1], "zstd": [0, 1]}
    for p in range(3):
        produce_one_batch(bootstrap, plain, p, None, [(b"x" * 100, ts["plain"] + i) for i in range(10 + p)])
    groups: dict[str, tuple[str, int, int]] = {  # group -> (topic, partition, committed offset)
        "bomb-gzip-at": (bombs, 0, 0), "bomb-gzip-after": (bombs, 0, 1),
        "bomb-zstd-at": (bombs, 1, 0), "bomb-zstd-after": (bombs, 1, 1)}
    groups.update({f"plain-{p}": (plain, p, p) for p in range(3)})
    for group, (topic, partition, offset) in groups.items():
        commit_offset(bootstrap, f"{group}-{bombs}", topic, partition, offset)

    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "database_url": f"sqlite:///{tmp_path / 'db.sqlite'}", "poll_interval_seconds": 1,
        "lag_sample_interval_seconds": 0,  # lag rows of every poll: the API shows the latest
        "api": {"host": "127.0.0.1", "port": port},
        "clusters": [{"name": "lab", "bootstrap_servers": bootstrap, "topics_include": [bombs, plain]}]}))
    proc = start(config, tmp_path / "txnwatch.log")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: all(_group_row(base, f"{g}-{bombs}", t) for g, (t, _, _) in groups.items()), 180,
                 what="every group's lag in the API")
        # Each bomb's unreadable record is reported as a Fetch error by two reads: the time lag's (first record
        # of the group after the bomb) and the record count's (read_committed, from that group's offset inside the
        # bomb's batch; the group at the bomb is counted from batch headers and costs no decompression). The
        # reads can land a poll or two after the groups' rows, so wait for them before watching that they stay.
        wait_for(lambda: _samples(base).get(FETCH_ERRORS, 0) >= 4, 300, what="the bombs' Fetch errors")
        first = _samples(base)
        polls = ("txnwatch_polls_total", frozenset({("cluster", "lab")}))
        wait_for(lambda: _samples(base)[polls] >= first[polls] + 3, 60, what="three more polls")
        rows = {g: _group_row(base, f"{g}-{bombs}", t) for g, (t, _, _) in groups.items()}
        samples = _samples(base)
        peak = vm_hwm_bytes(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"daemon peak RSS (VmHWM) {peak / 2**20:.0f} MiB with two {BOMB_BYTES / 1e6:.0f} MB bombs")
    assert peak < CHART_LIMIT_BYTES, f"peak RSS {peak / 2**20:.0f} MiB"

    # The bombs themselves are dated from their record headers; the records after them are past the budget.
    for codec in ("gzip", "zstd"):
        at, after = rows[f"bomb-{codec}-at"], rows[f"bomb-{codec}-after"]
        assert at is not None and after is not None
        assert at["lag_seconds_unknown"] is None
        assert AGE_S["bomb"] <= at["lag_seconds"] < AGE_S["bomb"] + 120
        assert after["lag_seconds"] is None and (after["lag_hwm"], after["lag_lso"]) == (1, 1)
        assert after["lag_seconds_unknown"].startswith(f"record_over_budget: record 1: it lies past the first 8 MiB "
                                                       f"that its {codec} batch")
        labels = {("cluster", "lab"), ("consumergroup", f"bomb-{codec}-after-{bombs}"), ("topic", bombs),
                  ("partition", "0" if codec == "gzip" else "1"), ("reason", "record_over_budget")}
        assert samples[("txnwatch_consumergroup_lag_seconds_unknown", frozenset(labels))] == 1
    # Every other group: offsets and time lag as written.
    for p in range(3):
        row = rows[f"plain-{p}"]
        assert row is not None and row["lag_seconds_unknown"] is None
        assert (row["committed_offset"], row["lag_hwm"]) == (p, 10)
        assert AGE_S["plain"] <= row["lag_seconds"] + p / 1000 < AGE_S["plain"] + 120
    # Reported once each, then answered from the cache: not fetched again poll after poll.
    assert first[FETCH_ERRORS] == samples[FETCH_ERRORS] == 4
    warnings = [line for line in (tmp_path / "txnwatch.log").read_text().splitlines() if "time lag is unknown" in line]
    assert len(warnings) == 2 and all("record_over_budget: record 1" in line for line in warnings)


TAIL_READER = textwrap.dedent("""
    import sys
    from txnwatch.kafka import ClusterConnectionSettings, TransactionLogTail
    from txnwatch.kafka.decompress import OverBudget
    settings = ClusterConnectionSettings(name="lab", bootstrap_servers=sys.argv[1])
    with TransactionLogTail(settings, topic=sys.argv[2], from_beginning=True) as tail:
        try:
            for _ in range(20):
                tail.read(1_000)
        except OverBudget as exc:
            print("refused:", exc)
    print("VmHWM", [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1])
""")


def test_the_transaction_log_reader_refuses_a_bomb_within_its_budget(lab_cluster: Any,
                                                                     new_topic: Callable[..., str]) -> None:
    """Tenants cannot write to __transaction_state; the tail's reader is pointed at a topic that holds a bomb."""
    topic = new_topic(partitions=1, replication=1)
    produce_one_batch(lab_cluster.bootstrap_servers, topic, 0, "gzip", [(bytes(BOMB_BYTES), int(time.time() * 1000))])
    out = subprocess.run([sys.executable, "-c", TAIL_READER, lab_cluster.bootstrap_servers, topic],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert "refused: gzip batch decompresses to more than 32 MiB" in out
    peak_kib = int(out.split("VmHWM")[1].split()[0].strip("[]'"))
    assert peak_kib * 1024 < 256 * 1024 * 1024, out
