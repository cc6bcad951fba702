"""Hosted agents: accounts, agents, threads, runs and thread transcripts.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("tier", sa.String(length=40), nullable=False),
        sa.Column("balance_rupiah", sa.Numeric(precision=20, scale=4), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_accounts")),
        sa.UniqueConstraint("name", name=op.f("uq_accounts_name")),
    )
    op.create_table(
        "agents",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("model_id", sa.String(length=200), nullable=False),
        sa.Column("system_prompt", sa.Text(), nullable=False),
        sa.Column("tools", sa.JSON(), nullable=False),
        sa.Column("builtin_tools", sa.JSON(), nullable=False),
        sa.Column("max_steps", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name=op.f("fk_agents_account_id_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agents")),
    )
    op.create_index(op.f("ix_agents_account_id"), "agents", ["account_id"], unique=False)
    op.create_table(
        "threads",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("agent_id", sa.String(length=40), nullable=False),
        sa.Column("title", sa.String(length=500), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name=op.f("fk_threads_account_id_accounts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_threads_agent_id_agents"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_threads")),
    )
    op.create_index(op.f("ix_threads_account_id"), "threads", ["account_id"], unique=False)
    op.create_index(op.f("ix_threads_agent_id"), "threads", ["agent_id"], unique=False)
    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("thread_id", sa.String(length=40), nullable=False),
        sa.Column("agent_id", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("step_count", sa.Integer(), nullable=False),
        sa.Column("max_steps", sa.Integer(), nullable=False),
        sa.Column("cost_rupiah", sa.Numeric(precision=20, scale=4), nullable=False),
        sa.Column("input", sa.JSON(), nullable=False),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("pending_tool_calls", sa.JSON(), nullable=True),
        sa.Column("pause_count", sa.Integer(), nullable=False),
        sa.Column("tool_outputs", sa.JSON(), nullable=True),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.Column("lease_owner", sa.String(length=100), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("active_seconds", sa.Float(), nullable=False),
        sa.Column("active_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("deadline_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("waiting_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'requires_action', "
            "'succeeded', 'failed', 'expired', 'cancelled')",
            name=op.f("ck_runs_status"),
        ),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name=op.f("fk_runs_account_id_accounts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["thread_id"],
            ["threads.id"],
            name=op.f("fk_runs_thread_id_threads"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint("thread_id", "idempotency_key", name="uq_runs_thread_idempotency_key"),
    )
    op.create_index(op.f("ix_runs_account_id"), "runs", ["account_id"], unique=False)
    op.create_index("ix_runs_status_lease", "runs", ["status", "lease_expires_at"], unique=False)
    op.create_index("ix_runs_status_deadline", "runs", ["status", "deadline_at"], unique=False)
    op.create_index("ix_runs_status_waiting", "runs", ["status", "waiting_since"], unique=False)
    op.create_index(op.f("ix_runs_thread_id"), "runs", ["thread_id"], unique=False)
    op.create_index(
        "ux_runs_one_active_per_thread",
        "runs",
        ["thread_id"],
        unique=True,
        sqlite_where=sa.text("status IN ('queued', 'running', 'requires_action')"),
        postgresql_where=sa.text("status IN ('queued', 'running', 'requires_action')"),
    )
    op.create_table(
        "thread_messages",
        sa.Column("thread_id", sa.String(length=40), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("message_id", sa.String(length=200), nullable=False),
        sa.Column("run_id", sa.String(length=40), nullable=True),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("tool_calls", sa.JSON(), nullable=True),
        sa.Column("tool_call_id", sa.String(length=200), nullable=True),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["thread_id"],
            ["threads.id"],
            name=op.f("fk_thread_messages_thread_id_threads"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("thread_id", "position", name=op.f("pk_thread_messages")),
        sa.UniqueConstraint("thread_id", "message_id", name="uq_thread_messages_thread_message"),
    )


def downgrade() -> None:
    op.drop_table("thread_messages")
    op.drop_index(
        "ux_runs_one_active_per_thread",
        table_name="runs",
        sqlite_where=sa.text("status IN ('queued', 'running', 'requires_action')"),
        postgresql_where=sa.text("status IN ('queued', 'running', 'requires_action')"),
    )
    op.drop_index(op.f("ix_runs_thread_id"), table_name="runs")
    op.drop_index("ix_runs_status_lease", table_name="runs")
    op.drop_index("ix_runs_status_deadline", table_name="runs")
    op.drop_index("ix_runs_status_waiting", table_name="runs")
    op.drop_index(op.f("ix_runs_account_id"), table_name="runs")
    op.drop_table("runs")
    op.drop_index(op.f("ix_threads_agent_id"), table_name="threads")
    op.drop_index(op.f("ix_threads_account_id"), table_name="threads")
    op.drop_table("threads")
    op.drop_index(op.f("ix_agents_account_id"), table_name="agents")
    op.drop_table("agents")
    op.drop_table("accounts")
