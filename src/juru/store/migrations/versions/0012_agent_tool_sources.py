"""Tool sources beyond client and built-in tools: an agent's MCP servers (`mcp_servers`) and the
agents it may call as tools (`agent_tools`), and a run's parent (`parent_run_id`) when another
run started it as a tool call. An agent's `revision` counts its edits, so a worker that knows an
agent can tell from a run's claim that it has not changed.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("mcp_servers", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("agent_tools", sa.JSON(), nullable=True))
        batch.add_column(
            sa.Column("revision", sa.Integer(), nullable=False, server_default=sa.text("1"))
        )
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("parent_run_id", sa.String(length=40), nullable=True))
        batch.create_index("ix_runs_parent_run_id", ["parent_run_id"])


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_parent_run_id")
        batch.drop_column("parent_run_id")
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("revision")
        batch.drop_column("agent_tools")
        batch.drop_column("mcp_servers")
