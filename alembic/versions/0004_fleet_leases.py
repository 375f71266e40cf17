"""fleet leases: replica heartbeats and per-cluster leases

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""
from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('fleet_replicas',
    sa.Column('replica_id', sa.String(length=128), nullable=False),
    sa.Column('host', sa.String(length=255), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('replica_id', name=op.f('pk_fleet_replicas'))
    )
    op.create_table('cluster_leases',
    sa.Column('cluster', sa.String(length=63), nullable=False),
    sa.Column('holder', sa.String(length=128), nullable=True),
    sa.Column('epoch', sa.BigInteger(), nullable=False),
    sa.Column('acquired_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('renewed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('deadline', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('cluster', name=op.f('pk_cluster_leases'))
    )


def downgrade() -> None:
    op.drop_table('cluster_leases')
    op.drop_table('fleet_replicas')
