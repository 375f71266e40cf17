"""one id-state table (txn_ids, with a source column), tenant ids unbounded

Issue 24 item 1: ``txn_states`` (polls) and ``txnlog_ids`` (the transaction log) both held "the
current state of a transactional id"; their rows move into one table, ``txn_ids``, each row saying
its ``source`` (``poll`` or ``transaction_log``).  Issue 23 item 1: Kafka allows ids of 32,767
bytes, so every column holding a tenant's id (transactional ids, group ids) becomes TEXT; indexes
hold only the id's first 200 characters (a PostgreSQL btree entry holds ~2.7 KB) and uniqueness is
on ``id_hash``, the hex MD5 of the id's UTF-8 (PostgreSQL's ``md5()``; SQLite gets the same function
from Python for the copy).

The pipeline's rollup tables follow the same rule: ``rollup_transactions.txn_prefix``,
``rollup_lag.group_id`` and ``rollup_offenders.subject`` become TEXT, and the two unique keys that held
an id hold its hash instead (``txn_prefix_hash``, ``group_id_hash``).

Downgrade moves the rows back; it fails on PostgreSQL if an id longer than the old column
(512 characters, 255 for group ids, 700 for offender subjects) was stored since.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""
import hashlib
from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = '0008'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')
_OPEN = "(state = 'Ongoing' OR state = 'PrepareCommit' OR state = 'PrepareAbort' OR state = 'PrepareEpochFence')"
_NO_AGE = {"postgresql": "'9999-12-31 00:00:00+00:00'", "sqlite": "'9999-12-31 00:00:00.000000'"}
_PREFIX = "substr({}, 1, 200)"
#: (table, id column, old length, index on the id: (name, columns with the id's place as None))
_TENANT_COLUMNS = (
    ("txn_transitions", "transactional_id", 512, ("ix_txn_transitions_lookup", ["cluster_id", None, "observed_at"])),
    ("lag_samples", "group_id", 255, ("ix_lag_samples_lookup", ["cluster_id", None, "sampled_at"])),
    ("txnlog_anomalies", "transactional_id", 512, ("ix_txnlog_anomalies_txn", ["cluster_id", None, "at"])),
    ("txnlog_stream", "transactional_id", 512, ("ix_txnlog_stream_txn", ["cluster_id", None, "at_ms"])),
    ("hanging_txns", "transactional_id", 512, None),
    ("lso_stalls", "blocking_transactional_id", 512, None),
    ("verification_samples", "transactional_id", 512, None),
)
#: (table, tenant column, old length, hash column of the unique key or None, unique key name, key columns)
_ROLLUP_COLUMNS = (
    ("rollup_transactions", "txn_prefix", 512, "txn_prefix_hash", "uq_rollup_transactions_key",
     ["cluster", "period", "period_start", None, "topic"]),
    ("rollup_lag", "group_id", 255, "group_id_hash", "uq_rollup_lag_key",
     ["cluster", "period", "period_start", None, "topic"]),
    ("rollup_offenders", "subject", 700, None, None, None),
)
_COMMON = ("cluster_id", "transactional_id", "state", "producer_id", "producer_epoch", "timeout_ms", "txn_started_at",
           "partitions")
_LOG = ("client_transaction_version", "client_tv", "abort_origin", "log_partition", "log_offset", "commits", "aborts",
        "epoch_bumps", "fences", "timeout_aborts")


def _md5(value: str | None) -> str | None:
    return None if value is None else hashlib.md5(value.encode("utf-8", "surrogatepass"),
                                                  usedforsecurity=False).hexdigest()


def upgrade() -> None:
    bind = op.get_bind()
    dialect = bind.dialect.name
    if dialect == "sqlite":
        bind.connection.driver_connection.create_function("md5", 1, _md5, deterministic=True)
    age = (f"CASE WHEN ({_OPEN} AND txn_started_at IS NOT NULL) THEN txn_started_at ELSE {_NO_AGE[dialect]} END")
    op.create_table('txn_ids',
    sa.Column('id', _ID, nullable=False),
    sa.Column('cluster_id', _ID, nullable=False),
    sa.Column('source', sa.String(length=16), nullable=False),
    sa.Column('transactional_id', sa.Text(), nullable=False),
    sa.Column('id_hash', sa.String(length=32), nullable=False),
    sa.Column('id_sort', sa.Text(), sa.Computed(_PREFIX.format("transactional_id"), persisted=True), nullable=False),
    sa.Column('coordinator_id', sa.Integer(), nullable=True),
    sa.Column('state', sa.String(length=32), nullable=False),
    sa.Column('producer_id', sa.BigInteger(), nullable=False),
    sa.Column('producer_epoch', sa.Integer(), nullable=False),
    sa.Column('timeout_ms', sa.BigInteger(), nullable=False),
    sa.Column('txn_started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('partitions', sa.JSON(), nullable=False),
    sa.Column('first_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('gone_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('superseded', sa.Boolean(), nullable=False),
    sa.Column('last_update_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('client_transaction_version', sa.Integer(), nullable=False),
    sa.Column('client_tv', sa.Integer(), nullable=True),
    sa.Column('abort_origin', sa.String(length=16), nullable=True),
    sa.Column('log_partition', sa.Integer(), nullable=True),
    sa.Column('log_offset', sa.BigInteger(), nullable=True),
    sa.Column('commits', sa.BigInteger(), nullable=False),
    sa.Column('aborts', sa.BigInteger(), nullable=False),
    sa.Column('epoch_bumps', sa.BigInteger(), nullable=False),
    sa.Column('fences', sa.BigInteger(), nullable=False),
    sa.Column('timeout_aborts', sa.BigInteger(), nullable=False),
    sa.Column('age_key', sa.DateTime(timezone=True), sa.Computed(age, persisted=True), nullable=False),
    sa.ForeignKeyConstraint(['cluster_id'], ['clusters.id'], name=op.f('fk_txn_ids_cluster_id_clusters'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_txn_ids')),
    sa.UniqueConstraint('cluster_id', 'id_hash', 'source', name='uq_txn_ids_key')
    )
    op.create_index('ix_txn_ids_cluster_state', 'txn_ids', ['cluster_id', 'source', 'state'], unique=False)
    op.create_index('ix_txn_ids_age', 'txn_ids', ['age_key', 'id'], unique=False)
    # The list's transactional_id order compares bytes (COLLATE "C" on PostgreSQL, SQLite's default).
    collate = ' COLLATE "C"' if dialect == "postgresql" else ""
    op.execute(f"CREATE INDEX ix_txn_ids_sort ON txn_ids (id_sort{collate}, id)")

    common = ", ".join(_COMMON)
    op.execute(
        f"INSERT INTO txn_ids ({common}, source, id_hash, coordinator_id, first_seen_at, last_seen_at, gone_at, "
        f"superseded, client_transaction_version, commits, aborts, epoch_bumps, fences, timeout_aborts) "
        f"SELECT {common}, 'poll', md5(transactional_id), coordinator_id, first_seen_at, last_seen_at, gone_at, "
        f"false, 0, 0, 0, 0, 0, 0 FROM txn_states ORDER BY id")
    log = ", ".join(_LOG)
    op.execute(
        f"INSERT INTO txn_ids ({common}, {log}, source, id_hash, first_seen_at, last_seen_at, last_update_at, "
        f"superseded) SELECT {common}, {log}, 'transaction_log', md5(transactional_id), last_update_at, "
        f"last_update_at, last_update_at, false FROM txnlog_ids ORDER BY id")
    op.drop_index('ix_txn_states_txn_id', table_name='txn_states')
    op.drop_index('ix_txn_states_age', table_name='txn_states')
    op.drop_index('ix_txn_states_cluster_state', table_name='txn_states')
    op.drop_table('txn_states')
    op.drop_index('ix_txnlog_ids_cluster_state', table_name='txnlog_ids')
    op.drop_table('txnlog_ids')

    for table, column, length, index in _TENANT_COLUMNS:
        if index is not None:
            op.drop_index(index[0], table_name=table)
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.alter_column(column, existing_type=sa.String(length=length), type_=sa.Text(),
                                  existing_nullable=index is None)
        if index is not None:
            name, columns = index
            op.create_index(name, table, [c if c is not None else sa.text(_PREFIX.format(column)) for c in columns],
                            unique=False)
    _upgrade_rollups()


def _upgrade_rollups() -> None:
    for table, column, length, hash_column, key, key_columns in _ROLLUP_COLUMNS:
        if hash_column is not None:
            op.add_column(table, sa.Column(hash_column, sa.String(length=32), nullable=True))
            op.execute(f"UPDATE {table} SET {hash_column} = md5({column})")
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.alter_column(column, existing_type=sa.String(length=length), type_=sa.Text(),
                                  existing_nullable=False)
            if hash_column is not None and key is not None and key_columns is not None:
                batch_op.alter_column(hash_column, existing_type=sa.String(length=32), nullable=False)
                batch_op.drop_constraint(key, type_='unique')
                batch_op.create_unique_constraint(key, [c if c is not None else hash_column for c in key_columns])


def _downgrade_rollups() -> None:
    for table, column, length, hash_column, key, key_columns in _ROLLUP_COLUMNS:
        with op.batch_alter_table(table, schema=None) as batch_op:
            if hash_column is not None and key is not None and key_columns is not None:
                batch_op.drop_constraint(key, type_='unique')
                batch_op.drop_column(hash_column)
            batch_op.alter_column(column, existing_type=sa.Text(), type_=sa.String(length=length),
                                  existing_nullable=False)
            if hash_column is not None and key is not None and key_columns is not None:
                batch_op.create_unique_constraint(key, [c if c is not None else column for c in key_columns])


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    _downgrade_rollups()
    for table, column, length, index in _TENANT_COLUMNS:
        if index is not None:
            op.drop_index(index[0], table_name=table)
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.alter_column(column, existing_type=sa.Text(), type_=sa.String(length=length))
        if index is not None:
            name, columns = index
            op.create_index(name, table, [c if c is not None else column for c in columns], unique=False)

    op.create_table('txnlog_ids',
    sa.Column('id', _ID, nullable=False),
    sa.Column('cluster_id', _ID, nullable=False),
    sa.Column('transactional_id', sa.String(length=512), nullable=False),
    sa.Column('state', sa.String(length=32), nullable=False),
    sa.Column('producer_id', sa.BigInteger(), nullable=False),
    sa.Column('producer_epoch', sa.Integer(), nullable=False),
    sa.Column('timeout_ms', sa.BigInteger(), nullable=False),
    sa.Column('txn_started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_update_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('partitions', sa.JSON(), nullable=False),
    sa.Column('client_transaction_version', sa.Integer(), nullable=False),
    sa.Column('client_tv', sa.Integer(), nullable=True),
    sa.Column('abort_origin', sa.String(length=16), nullable=True),
    sa.Column('log_partition', sa.Integer(), nullable=False),
    sa.Column('log_offset', sa.BigInteger(), nullable=False),
    sa.Column('commits', sa.BigInteger(), nullable=False),
    sa.Column('aborts', sa.BigInteger(), nullable=False),
    sa.Column('epoch_bumps', sa.BigInteger(), nullable=False),
    sa.Column('fences', sa.BigInteger(), nullable=False),
    sa.Column('timeout_aborts', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['cluster_id'], ['clusters.id'], name=op.f('fk_txnlog_ids_cluster_id_clusters'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_txnlog_ids')),
    sa.UniqueConstraint('cluster_id', 'transactional_id', name='uq_txnlog_ids_txn')
    )
    op.create_index('ix_txnlog_ids_cluster_state', 'txnlog_ids', ['cluster_id', 'state'], unique=False)
    op.create_table('txn_states',
    sa.Column('id', _ID, nullable=False),
    sa.Column('cluster_id', _ID, nullable=False),
    sa.Column('transactional_id', sa.String(length=512), nullable=False),
    sa.Column('coordinator_id', sa.Integer(), nullable=True),
    sa.Column('state', sa.String(length=32), nullable=False),
    sa.Column('producer_id', sa.BigInteger(), nullable=False),
    sa.Column('producer_epoch', sa.Integer(), nullable=False),
    sa.Column('timeout_ms', sa.BigInteger(), nullable=False),
    sa.Column('txn_started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('partitions', sa.JSON(), nullable=False),
    sa.Column('first_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('gone_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('age_key', sa.DateTime(timezone=True), sa.Computed(
        f"CASE WHEN ({_OPEN} AND txn_started_at IS NOT NULL) THEN txn_started_at ELSE {_NO_AGE[dialect]} END",
        persisted=True), nullable=False),
    sa.ForeignKeyConstraint(['cluster_id'], ['clusters.id'], name=op.f('fk_txn_states_cluster_id_clusters'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_txn_states')),
    sa.UniqueConstraint('cluster_id', 'transactional_id', name='uq_txn_states_cluster_txn')
    )
    op.create_index('ix_txn_states_cluster_state', 'txn_states', ['cluster_id', 'state'], unique=False)
    op.create_index('ix_txn_states_age', 'txn_states', ['age_key', 'id'], unique=False)
    collate = ' COLLATE "C"' if dialect == "postgresql" else ""
    op.execute(f"CREATE INDEX ix_txn_states_txn_id ON txn_states (transactional_id{collate}, id)")
    common = ", ".join(_COMMON)
    op.execute(f"INSERT INTO txn_states ({common}, coordinator_id, first_seen_at, last_seen_at, gone_at) "
               f"SELECT {common}, coordinator_id, first_seen_at, last_seen_at, gone_at FROM txn_ids "
               f"WHERE source = 'poll' ORDER BY id")
    log = ", ".join(_LOG)
    op.execute(f"INSERT INTO txnlog_ids ({common}, {log}, last_update_at) "
               f"SELECT {common}, {log}, COALESCE(last_update_at, last_seen_at) FROM txn_ids "
               f"WHERE source = 'transaction_log' ORDER BY id")
    op.drop_index('ix_txn_ids_sort', table_name='txn_ids')
    op.drop_index('ix_txn_ids_age', table_name='txn_ids')
    op.drop_index('ix_txn_ids_cluster_state', table_name='txn_ids')
    op.drop_table('txn_ids')
