"""The recorder's tuple INSERTs on SQLite write exactly what Core's executemany of dicts wrote (issue 25, CPU)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, select
from sqlalchemy.exc import DBAPIError

from tests.fixtures.migrated import migrate
from txnwatch.core.model import ClusterSnapshot, PartitionSnapshot, TopicPartition
from txnwatch.store import models as m
from txnwatch.store.clusters import register_clusters
from txnwatch.store.db import make_engine, make_sessionmaker
from txnwatch.store.isolation import refused_data
from txnwatch.store.recorder import Recorder
from txnwatch.store.row_inserts import insert_dicts, insert_tuples, writes_tuples

AT = datetime(2023, 11, 14, 22, 15, 0, 123456, tzinfo=timezone.utc)
T0 = 1_700_000_100_000


def _lag_rows(n: int) -> list[dict[str, Any]]:
    """Lag rows as findings_rows builds them: one timestamp object shared by all but the last, which has its own
    (equal in UTC, given in another zone), and values of every column type the table has, None among them."""
    other = AT.astimezone(timezone(timedelta(hours=2)))
    return [dict(group_id=f"g{i}", topic="orders", partition=i, sampled_at=AT if i < n - 1 else other,
                 committed_offset=i * 10, lag_hwm=None if i % 3 else i, lag_lso=i, lag_seconds=i / 7 if i % 2 else None,
                 lag_seconds_unknown="gone" if i == 4 else None, lag_records=i) for i in range(n)]


def _raw(engine: Engine, table: str) -> list[tuple[Any, ...]]:
    """Every row as SQLite holds it: each value with its storage class (text, integer, real, null)."""
    with engine.connect() as conn:
        names = [r[1] for r in conn.exec_driver_sql(f"PRAGMA table_info({table})")]
        select_list = ", ".join(f'typeof("{c}"), "{c}"' for c in names)
        return [tuple(r) for r in conn.exec_driver_sql(f"SELECT {select_list} FROM {table} ORDER BY id")]


def _sqlite(tmp_path: Path, name: str) -> tuple[Engine, int]:
    url = f"sqlite:///{tmp_path / name}"
    migrate(url)
    engine = make_engine(url)
    with make_sessionmaker(engine).begin() as session:
        cluster_id = register_clusters(session, {"c": "h:9092"}, AT)["c"]
    return engine, cluster_id


def test_tuples_write_the_same_bytes_as_core_executemany(tmp_path: Path) -> None:
    """150 lag rows (statements of 64, 64, 16, 4 and 2 rows) hold byte for byte, storage class for storage class,
    what Core's executemany of the same dicts wrote, ids in the same order."""
    rows = _lag_rows(150)
    table = m.table(m.ConsumerLagSample)
    core, core_cluster = _sqlite(tmp_path, "core.db")
    with core.begin() as conn:
        conn.execute(table.insert(), [dict(r, cluster_id=core_cluster) for r in rows])
    mine, my_cluster = _sqlite(tmp_path, "tuples.db")
    sizes: list[int] = []

    def count(conn: object, cursor: object, statement: str, parameters: Any, context: object, many: bool) -> None:
        if statement.startswith("INSERT INTO lag_samples"):
            sizes.append(statement.count("(?"))

    event.listen(mine, "before_cursor_execute", count)
    with mine.begin() as conn:
        assert writes_tuples(conn, table, rows, {"cluster_id": my_cluster})
        insert_dicts(conn, table, rows, {"cluster_id": my_cluster})
    assert sizes == [64, 64, 16, 4, 2]
    written = _raw(mine, "lag_samples")
    assert written == _raw(core, "lag_samples")
    assert written[0][:8] == ("integer", 1, "integer", my_cluster, "text", "g0", "text", "orders")
    assert ("text", "2023-11-14 22:15:00.123456") in zip(written[-1][::2], written[-1][1::2], strict=True)


def test_core_keeps_rows_it_alone_writes_exactly(tmp_path: Path) -> None:
    """Rows whose keys differ, a column given twice, an absent column with a Python default, an unknown column,
    and every other dialect: Core's executemany, which fills defaults and complains as it always did."""
    engine, cluster_id = _sqlite(tmp_path, "t.db")
    lag, offsets = m.table(m.ConsumerLagSample), m.table(m.PartitionOffsetSample)
    rows = _lag_rows(3)
    with engine.connect() as conn:
        assert writes_tuples(conn, lag, rows, {"cluster_id": cluster_id})
        assert not writes_tuples(conn, lag, [rows[0], {k: v for k, v in rows[1].items() if k != "lag_records"}],
                                 {"cluster_id": cluster_id})
        assert not writes_tuples(conn, lag, [dict(rows[0], cluster_id=cluster_id)], {"cluster_id": cluster_id})
        assert not writes_tuples(conn, lag, [dict(rows[0], nonsense=1)], {"cluster_id": cluster_id})
        picture = dict(topic="t", partition=0, sampled_at=AT, leader=1, high_watermark=1, last_stable_offset=1,
                       log_start_offset=0)
        assert not writes_tuples(conn, offsets, [picture], {"cluster_id": cluster_id})  # open_transactions=0
        assert writes_tuples(conn, offsets, [dict(picture, open_transactions=0)], {"cluster_id": cluster_id})
        assert not writes_tuples(conn, lag, [], {"cluster_id": cluster_id})
    engine.dispose()


def test_a_refused_row_raises_what_the_recorder_isolates(tmp_path: Path) -> None:
    """A multi-row statement with a row SQLite refuses (NOT NULL) raises a DBAPIError that refused_data
    recognises, so the recorder halves the record as it did with the executemany."""
    engine, cluster_id = _sqlite(tmp_path, "t.db")
    table = m.table(m.PartitionOffsetSample)
    columns = ("cluster_id", "sampled_at", "topic", "partition", "leader", "high_watermark", "last_stable_offset",
               "log_start_offset", "open_transactions")
    rows = [(cluster_id, AT, "t", p, 1, 5, 5, 0, 0) for p in range(5)] + [(cluster_id, AT, None, 9, 1, 5, 5, 0, 0)]
    with pytest.raises(DBAPIError) as raised, engine.begin() as conn:
        insert_tuples(conn, table, columns, rows)
    assert refused_data(raised.value)
    engine.dispose()


def test_the_recorders_picture_rows_are_the_polls_values_at_its_one_time(engine: Engine) -> None:
    """Both backends: the 2 x 70 rows of two pictures (SQLite: statements of 64, 4 and 2 rows), each with the
    poll's own sampled_at, its partitions' values, and ids in (topic, partition) order."""
    sessions = make_sessionmaker(engine)
    recorder = Recorder(sessions, {"c": "h:9092"})
    recorder.start()
    for k, at_ms in enumerate((T0, T0 + 15_000)):
        partitions = {TopicPartition("orders", p): PartitionSnapshot(
            TopicPartition("orders", p), leader=p % 3, high_watermark=100 * p + k, last_stable_offset=100 * p,
            log_start_offset=None if p == 7 else 0, producers=()) for p in range(70)}
        recorder.on_poll("c", ClusterSnapshot(cluster="c", taken_at_ms=at_ms, duration_ms=5, partitions=partitions),
                         None, None, at_ms)
    with sessions() as session:
        got = session.execute(select(
            m.PartitionOffsetSample.sampled_at, m.PartitionOffsetSample.topic, m.PartitionOffsetSample.partition,
            m.PartitionOffsetSample.leader, m.PartitionOffsetSample.high_watermark,
            m.PartitionOffsetSample.last_stable_offset, m.PartitionOffsetSample.log_start_offset,
            m.PartitionOffsetSample.open_transactions).order_by(m.PartitionOffsetSample.id)).all()
    first = datetime(2023, 11, 14, 22, 15, tzinfo=timezone.utc)
    expected = [(first + timedelta(seconds=15 * k), "orders", p, p % 3, 100 * p + k, 100 * p,
                 None if p == 7 else 0, 0) for k in (0, 1) for p in range(70)]
    assert [tuple(r) for r in got] == expected
