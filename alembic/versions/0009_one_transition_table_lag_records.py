"""one transition table (transitions, with a source column); lag_samples.lag_records

Issue 24 item 1, second half: an id's transitions lived in three tables sharing ten columns:
``txn_transitions`` (what polling inferred), ``txnlog_stream`` (the transaction log's staged stream) and
``txnlog_anomalies`` (the log's anomalies).  Their rows move into one table, ``transitions``, each row saying
its ``source`` (``poll`` or ``transaction_log``, as ``txn_ids`` does since 0008); an anomaly is its transition's
row with ``anomaly`` set to its kind.  The columns are the stream's plain ones (epoch milliseconds, comma-joined
lists): the tail writes tens of thousands of rows a second by COPY.

Ids: the polled rows keep theirs (the Parquet archive's rows carry them, and the timeline matches archived
polled rows to the database's by id); the stream's rows move to their id + 2**40 (``MOVED_LOG_ID_SHIFT`` in
store/archive.py, which converts a version-1 archive manifest's stream high-water id with it); on PostgreSQL
the new sequence continues past both.  Anomalies take new ids (they are never archived).

Also, one schema change for the release: ``lag_samples.lag_records`` (nullable BIGINT), the read_committed
record lag the collector counts (model.GroupLag.lag_records).

Downgrade moves the rows back to the three tables (stream ids back down by 2**40) and drops the column; an
archive manifest written since (version 2) is refused by the older release.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""
import json
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa

from alembic import op

revision: str = '0009'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')
_PREFIX = "substr({}, 1, 200)"
#: store/archive.MOVED_LOG_ID_SHIFT (a migration does not import the application).
_SHIFT = 1 << 40
#: The rows retention.days deletes; the stream's leave with the archive export.
_KEPT = "source = 'poll' OR anomaly IS NOT NULL"
_TRANSITION = ("cluster_id", "transactional_id", "from_state", "to_state", "producer_id", "producer_epoch",
               "prev_producer_id", "prev_producer_epoch", "timeout_ms", "duration_ms")
_STREAM = ("cluster_id", "transactional_id", "from_state", "to_state", "producer_id", "producer_epoch",
           "prev_producer_id", "prev_producer_epoch", "timeout_ms", "duration_ms", "log_partition", "log_offset",
           "at_ms", "staged_at_ms", "start_ms", "partitions", "events", "client_transaction_version", "detail")


# -- SQLite: the conversions PostgreSQL writes in SQL, as Python functions of the connection ----------------


def _sqlite_time(value: str | None) -> datetime | None:
    if value is None:
        return None
    at = datetime.fromisoformat(value)
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at


def _epoch_ms(value: str | None) -> int | None:
    at = _sqlite_time(value)
    return None if at is None else (int(at.timestamp()) * 1000 + at.microsecond // 1000)


def _from_epoch_ms(value: int | None) -> str | None:
    if value is None:
        return None
    return datetime.fromtimestamp(value / 1000, UTC).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")


def _joined(value: str | None) -> str:
    return ",".join(json.loads(value)) if value else ""


def _json_list(value: str | None) -> str:
    return json.dumps(value.split(",") if value else [])


def _sql(dialect: str) -> dict[str, str]:
    """SQL templates per backend: epoch ms of a timestamp, and back; a JSON list as comma-joined text, and back."""
    if dialect == "sqlite":
        conn = op.get_bind().connection.driver_connection
        for name, fn in (("tw_epoch_ms", _epoch_ms), ("tw_from_epoch_ms", _from_epoch_ms), ("tw_joined", _joined),
                         ("tw_json_list", _json_list)):
            conn.create_function(name, 1, fn, deterministic=True)
        return {"ms": "tw_epoch_ms({})", "at": "tw_from_epoch_ms({})", "joined": "tw_joined({})",
                "json": "tw_json_list({})"}
    return {"ms": "CAST(floor(extract(epoch FROM {}) * 1000) AS BIGINT)",
            "at": "to_timestamp({} / 1000.0)",
            "joined": "array_to_string(ARRAY(SELECT json_array_elements_text({})), ',')",
            "json": "to_json(string_to_array({}, ','))"}


def _setval(table: str, floor: str = "0") -> None:
    """PostgreSQL: the table's id sequence continues after the ids inserted explicitly (and after ``floor``)."""
    op.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
               f"GREATEST((SELECT COALESCE(MAX(id), 0) FROM {table}), {floor}, 1))")


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    sql = _sql(dialect)
    op.create_table('transitions',
    sa.Column('id', _ID, nullable=False),
    sa.Column('cluster_id', _ID, nullable=False),
    sa.Column('source', sa.String(length=16), nullable=False),
    sa.Column('anomaly', sa.String(length=32), nullable=True),
    sa.Column('transactional_id', sa.Text(), nullable=False),
    sa.Column('at_ms', sa.BigInteger(), nullable=False),
    sa.Column('staged_at_ms', sa.BigInteger(), nullable=False),
    sa.Column('from_state', sa.String(length=32), nullable=True),
    sa.Column('to_state', sa.String(length=32), nullable=False),
    sa.Column('producer_id', sa.BigInteger(), nullable=False),
    sa.Column('producer_epoch', sa.Integer(), nullable=False),
    sa.Column('prev_producer_id', sa.BigInteger(), nullable=True),
    sa.Column('prev_producer_epoch', sa.Integer(), nullable=True),
    sa.Column('timeout_ms', sa.BigInteger(), nullable=False),
    sa.Column('start_ms', sa.BigInteger(), nullable=True),
    sa.Column('partitions', sa.Text(), nullable=False),
    sa.Column('events', sa.Text(), nullable=False),
    sa.Column('duration_ms', sa.BigInteger(), nullable=True),
    sa.Column('log_partition', sa.Integer(), nullable=True),
    sa.Column('log_offset', sa.BigInteger(), nullable=True),
    sa.Column('client_transaction_version', sa.Integer(), nullable=True),
    sa.Column('detail', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['cluster_id'], ['clusters.id'], name=op.f('fk_transitions_cluster_id_clusters'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_transitions'))
    )
    op.create_index('ix_transitions_txn', 'transitions',
                    ['cluster_id', sa.text(_PREFIX.format("transactional_id")), 'at_ms'], unique=False)
    op.create_index('ix_transitions_staged', 'transitions', ['staged_at_ms'], unique=False)
    # Partial, so the stream's rows (COPY, tens of thousands a second) maintain no more btrees than before.
    op.create_index('ix_transitions_anomaly', 'transitions', ['cluster_id', 'anomaly', 'at_ms'], unique=False,
                    postgresql_where=sa.text("anomaly IS NOT NULL"), sqlite_where=sa.text("anomaly IS NOT NULL"))
    op.create_index('ix_transitions_retention', 'transitions', ['source', 'at_ms'], unique=False,
                    postgresql_where=sa.text(_KEPT), sqlite_where=sa.text(_KEPT))

    common = ", ".join(_TRANSITION)
    observed = sql["ms"].format("observed_at")
    op.execute(
        f"INSERT INTO transitions (id, {common}, source, at_ms, staged_at_ms, start_ms, partitions, events) "
        f"SELECT id, {common}, 'poll', {observed}, {observed}, {sql['ms'].format('txn_started_at')}, "
        f"{sql['joined'].format('partitions')}, {sql['joined'].format('events')} FROM txn_transitions ORDER BY id")
    stream = ", ".join(_STREAM)
    op.execute(f"INSERT INTO transitions (id, {stream}, source) "
               f"SELECT id + {_SHIFT}, {stream}, 'transaction_log' FROM txnlog_stream ORDER BY id")
    if dialect == "postgresql":
        # Past the stream's own sequence too: a version-1 manifest's stream high-water id + the shift must stay
        # below every id handed out from now on, even if the stream was empty.
        _setval("transitions", f"(SELECT last_value FROM txnlog_stream_id_seq) + {_SHIFT}")
    at = sql["ms"].format("at")
    op.execute(
        f"INSERT INTO transitions ({common}, source, anomaly, at_ms, staged_at_ms, start_ms, partitions, events, "
        f"log_partition, log_offset, detail) "
        f"SELECT {common}, 'transaction_log', kind, {at}, {at}, {sql['ms'].format('txn_started_at')}, '', "
        f"{sql['joined'].format('events')}, log_partition, log_offset, detail FROM txnlog_anomalies ORDER BY id")

    op.drop_index('ix_txn_transitions_lookup', table_name='txn_transitions')
    op.drop_index('ix_txn_transitions_observed', table_name='txn_transitions')
    op.drop_table('txn_transitions')
    op.drop_index('ix_txnlog_stream_txn', table_name='txnlog_stream')
    op.drop_index('ix_txnlog_stream_staged', table_name='txnlog_stream')
    op.drop_table('txnlog_stream')
    op.drop_index('ix_txnlog_anomalies_at', table_name='txnlog_anomalies')
    op.drop_index('ix_txnlog_anomalies_txn', table_name='txnlog_anomalies')
    op.drop_table('txnlog_anomalies')

    op.add_column('lag_samples', sa.Column('lag_records', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    sql = _sql(dialect)
    # SQLite rebuilds the table for the drop and cannot carry the expression index over: drop and remake it.
    op.drop_index('ix_lag_samples_lookup', table_name='lag_samples')
    with op.batch_alter_table('lag_samples', schema=None) as batch_op:
        batch_op.drop_column('lag_records')
    op.create_index('ix_lag_samples_lookup', 'lag_samples',
                    ['cluster_id', sa.text(_PREFIX.format("group_id")), 'sampled_at'], unique=False)

    op.create_table('txn_transitions',
    sa.Column('id', _ID, nullable=False),
    sa.Column('cluster_id', _ID, nullable=False),
    sa.Column('transactional_id', sa.Text(), nullable=False),
    sa.Column('observed_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('from_state', sa.String(length=32), nullable=True),
    sa.Column('to_state', sa.String(length=32), nullable=False),
    sa.Column('producer_id', sa.BigInteger(), nullable=False),
    sa.Column('producer_epoch', sa.Integer(), nullable=False),
    sa.Column('prev_producer_id', sa.BigInteger(), nullable=True),
    sa.Column('prev_producer_epoch', sa.Integer(), nullable=True),
    sa.Column('timeout_ms', sa.BigInteger(), nullable=False),
    sa.Column('txn_started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('partitions', sa.JSON(), nullable=False),
    sa.Column('events', sa.JSON(), nullable=False),
    sa.Column('duration_ms', sa.BigInteger(), nullable=True),
    sa.ForeignKeyConstraint(['cluster_id'], ['clusters.id'], name=op.f('fk_txn_transitions_cluster_id_clusters'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_txn_transitions'))
    )
    op.create_index('ix_txn_transitions_lookup', 'txn_transitions',
                    ['cluster_id', sa.text(_PREFIX.format("transactional_id")), 'observed_at'], unique=False)
    op.create_index('ix_txn_transitions_observed', 'txn_transitions', ['observed_at'], unique=False)
    op.create_table('txnlog_stream',
    sa.Column('id', _ID, nullable=False),
    sa.Column('cluster_id', _ID, nullable=False),
    sa.Column('log_partition', sa.Integer(), nullable=False),
    sa.Column('log_offset', sa.BigInteger(), nullable=False),
    sa.Column('at_ms', sa.BigInteger(), nullable=False),
    sa.Column('staged_at_ms', sa.BigInteger(), nullable=False),
    sa.Column('transactional_id', sa.Text(), nullable=False),
    sa.Column('from_state', sa.String(length=32), nullable=True),
    sa.Column('to_state', sa.String(length=32), nullable=False),
    sa.Column('producer_id', sa.BigInteger(), nullable=False),
    sa.Column('producer_epoch', sa.Integer(), nullable=False),
    sa.Column('prev_producer_id', sa.BigInteger(), nullable=True),
    sa.Column('prev_producer_epoch', sa.Integer(), nullable=True),
    sa.Column('timeout_ms', sa.BigInteger(), nullable=False),
    sa.Column('start_ms', sa.BigInteger(), nullable=True),
    sa.Column('partitions', sa.Text(), nullable=False),
    sa.Column('events', sa.Text(), nullable=False),
    sa.Column('duration_ms', sa.BigInteger(), nullable=True),
    sa.Column('client_transaction_version', sa.Integer(), nullable=False),
    sa.Column('detail', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['cluster_id'], ['clusters.id'], name=op.f('fk_txnlog_stream_cluster_id_clusters'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_txnlog_stream'))
    )
    op.create_index('ix_txnlog_stream_staged', 'txnlog_stream', ['staged_at_ms'], unique=False)
    op.create_index('ix_txnlog_stream_txn', 'txnlog_stream',
                    ['cluster_id', sa.text(_PREFIX.format("transactional_id")), 'at_ms'], unique=False)
    op.create_table('txnlog_anomalies',
    sa.Column('id', _ID, nullable=False),
    sa.Column('cluster_id', _ID, nullable=False),
    sa.Column('transactional_id', sa.Text(), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('events', sa.JSON(), nullable=False),
    sa.Column('from_state', sa.String(length=32), nullable=True),
    sa.Column('to_state', sa.String(length=32), nullable=False),
    sa.Column('producer_id', sa.BigInteger(), nullable=False),
    sa.Column('producer_epoch', sa.Integer(), nullable=False),
    sa.Column('prev_producer_id', sa.BigInteger(), nullable=True),
    sa.Column('prev_producer_epoch', sa.Integer(), nullable=True),
    sa.Column('timeout_ms', sa.BigInteger(), nullable=False),
    sa.Column('txn_started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('duration_ms', sa.BigInteger(), nullable=True),
    sa.Column('log_partition', sa.Integer(), nullable=False),
    sa.Column('log_offset', sa.BigInteger(), nullable=False),
    sa.Column('detail', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['cluster_id'], ['clusters.id'], name=op.f('fk_txnlog_anomalies_cluster_id_clusters'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_txnlog_anomalies'))
    )
    op.create_index('ix_txnlog_anomalies_at', 'txnlog_anomalies', ['cluster_id', 'at'], unique=False)
    op.create_index('ix_txnlog_anomalies_txn', 'txnlog_anomalies',
                    ['cluster_id', sa.text(_PREFIX.format("transactional_id")), 'at'], unique=False)

    common = ", ".join(_TRANSITION)
    op.execute(
        f"INSERT INTO txn_transitions (id, {common}, observed_at, txn_started_at, partitions, events) "
        f"SELECT id, {common}, {sql['at'].format('at_ms')}, {sql['at'].format('start_ms')}, "
        f"{sql['json'].format('partitions')}, {sql['json'].format('events')} FROM transitions "
        f"WHERE source = 'poll' ORDER BY id")
    stream = ", ".join(_STREAM)
    stream_values = stream.replace("client_transaction_version", "COALESCE(client_transaction_version, 0)")
    op.execute(
        f"INSERT INTO txnlog_stream (id, {stream}) "
        f"SELECT CASE WHEN id > {_SHIFT} THEN id - {_SHIFT} ELSE id END, {stream_values} FROM transitions "
        f"WHERE source = 'transaction_log' AND anomaly IS NULL ORDER BY id")
    op.execute(
        f"INSERT INTO txnlog_anomalies ({common}, kind, at, txn_started_at, events, log_partition, log_offset, "
        f"detail) SELECT {common}, anomaly, {sql['at'].format('at_ms')}, {sql['at'].format('start_ms')}, "
        f"{sql['json'].format('events')}, COALESCE(log_partition, 0), COALESCE(log_offset, 0), detail "
        f"FROM transitions WHERE anomaly IS NOT NULL ORDER BY id")
    if dialect == "postgresql":
        _setval("txn_transitions")
        _setval("txnlog_stream")
    op.drop_index('ix_transitions_retention', table_name='transitions')
    op.drop_index('ix_transitions_anomaly', table_name='transitions')
    op.drop_index('ix_transitions_staged', table_name='transitions')
    op.drop_index('ix_transitions_txn', table_name='transitions')
    op.drop_table('transitions')
