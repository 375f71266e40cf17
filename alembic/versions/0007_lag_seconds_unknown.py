"""lag samples: why a time lag is unknown

A group partition whose first unconsumed record cannot be read within the decompression budget
(a compression bomb or its neighbours, a damaged batch) has no time lag, and the API says why:
``lag_samples.lag_seconds_unknown`` holds that reason, NULL everywhere else.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""
from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('lag_samples', schema=None) as batch_op:
        batch_op.add_column(sa.Column('lag_seconds_unknown', sa.String(length=500), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('lag_samples', schema=None) as batch_op:
        batch_op.drop_column('lag_seconds_unknown')
