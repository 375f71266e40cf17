"""admin audit written ahead: admin_audit.client, admin_audit.finished_at, outcome nullable

Issue 38 item 4: an admin action's row is committed as its intent before anything is sent to Kafka, and its
outcome is written on the same row afterwards (txnwatch.remedy.audit).  So ``outcome`` may be NULL (the
outcome is not known: the process or the database failed between the two writes), ``finished_at`` says when
the outcome was written, and ``client`` where the request came from (the API's client address, behind a
trusted proxy the X-Forwarded-For client; the CLI's user@host).  The rows written before this revision were
written after the call: their ``finished_at`` is their ``at``.

Downgrade: a row without an outcome keeps one that says so; ``client`` and ``finished_at`` are dropped.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""
from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = '0010'
down_revision: str | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: What a downgraded row without an outcome says (the older release's column is NOT NULL).
UNKNOWN = "unknown: the outcome was never recorded (the intent only)"


def upgrade() -> None:
    with op.batch_alter_table('admin_audit', schema=None) as batch_op:
        batch_op.add_column(sa.Column('client', sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.alter_column('outcome', existing_type=sa.Text(), nullable=True)
    op.execute("UPDATE admin_audit SET finished_at = at")


def downgrade() -> None:
    op.execute(sa.text("UPDATE admin_audit SET outcome = :unknown WHERE outcome IS NULL").bindparams(unknown=UNKNOWN))
    with op.batch_alter_table('admin_audit', schema=None) as batch_op:
        batch_op.alter_column('outcome', existing_type=sa.Text(), nullable=False)
        batch_op.drop_column('finished_at')
        batch_op.drop_column('client')
