"""Run event logs: every run's durable, ordered events (`run_events`), and an index on
`runs.finished_at` for pruning the events of runs finished long ago.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_events",
        sa.Column("run_id", sa.String(length=40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(length=40), nullable=False),
        sa.Column("key", sa.String(length=300), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_run_events_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "seq", name="pk_run_events"),
        sa.UniqueConstraint("run_id", "key", name="uq_run_events_run_key"),
    )
    op.create_index("ix_runs_finished_at", "runs", ["finished_at"])


def downgrade() -> None:
    op.drop_index("ix_runs_finished_at", table_name="runs")
    op.drop_table("run_events")
