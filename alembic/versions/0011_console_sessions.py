"""console sessions on the server: console_sessions

Issue 38 item 5: a console session could only be ended by rotating the read token (which also breaks every
scraper).  Each sign-in now has a row (txnwatch.store.console_sessions); the read guard accepts a signed session
cookie only while its row is neither ended (logout, `txnwatch sessions end`, POST
/api/v1/admin/console-sessions/end) nor expired.  Cookies signed before this revision have no row: their holders
sign in again.

Downgrade: the table is dropped (the older release accepts any cookie it signed until it expires).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""
from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = '0011'
down_revision: str | None = '0010'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('console_sessions',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_console_sessions'))
    )
    with op.batch_alter_table('console_sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_console_sessions_expires_at'), ['expires_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('console_sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_console_sessions_expires_at'))
    op.drop_table('console_sessions')
