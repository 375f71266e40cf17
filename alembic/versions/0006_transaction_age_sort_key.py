"""transaction age sort key: a generated column and its index

The transaction list's default order (oldest open transaction first) sorted every row of
txn_states on each page; a column the database computes, indexed with id, serves it (and its
keyset cursor) from the index; the transactional_id order gets an index too.  PostgreSQL (12+) stores it; SQLite can only add a VIRTUAL
generated column to an existing table, which it computes on read and indexes all the same.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""
from collections.abc import Sequence

from alembic import op

revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OPEN = "(state = 'Ongoing' OR state = 'PrepareCommit' OR state = 'PrepareAbort' OR state = 'PrepareEpochFence')"
# The far-future key of transactions without an age, as each backend stores a timestamp.
_NO_AGE = {"postgresql": "'9999-12-31 00:00:00+00:00'", "sqlite": "'9999-12-31 00:00:00.000000'"}


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    kind = "VIRTUAL" if dialect == "sqlite" else "STORED"
    column_type = "DATETIME" if dialect == "sqlite" else "TIMESTAMP WITH TIME ZONE"
    op.execute(f"ALTER TABLE txn_states ADD COLUMN age_key {column_type} GENERATED ALWAYS AS "
               f"(CASE WHEN ({_OPEN} AND txn_started_at IS NOT NULL) THEN txn_started_at "
               f"ELSE {_NO_AGE[dialect]} END) {kind}")
    op.create_index('ix_txn_states_age', 'txn_states', ['age_key', 'id'], unique=False)
    # The list's transactional_id order compares bytes (COLLATE "C" on PostgreSQL, SQLite's default).
    collate = ' COLLATE "C"' if dialect == "postgresql" else ""
    op.execute(f"CREATE INDEX ix_txn_states_txn_id ON txn_states (transactional_id{collate}, id)")


def downgrade() -> None:
    op.drop_index('ix_txn_states_txn_id', table_name='txn_states')
    op.drop_index('ix_txn_states_age', table_name='txn_states')
    with op.batch_alter_table('txn_states', schema=None) as batch_op:
        batch_op.drop_column('age_key')
