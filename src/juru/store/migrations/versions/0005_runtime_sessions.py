"""Agent Runtime sessions: a Juru thread owned by a user of the served agent.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runtime_sessions",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("app_name", sa.String(length=200), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runtime_sessions")),
    )
    op.create_index(
        "ix_runtime_sessions_owner",
        "runtime_sessions",
        ["app_name", "user_id", "id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_runtime_sessions_owner", table_name="runtime_sessions")
    op.drop_table("runtime_sessions")
