"""Playground threads.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "playground_threads",
        sa.Column("thread_id", sa.String(200), nullable=False),
        sa.Column("feature", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("thread_id", name=op.f("pk_playground_threads")),
    )


def downgrade() -> None:
    op.drop_table("playground_threads")
