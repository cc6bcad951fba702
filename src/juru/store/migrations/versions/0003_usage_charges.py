"""Usage ledger: one row per charged model call; exact run totals.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "usage_charges",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("source", sa.String(length=20), nullable=False),
        sa.Column("run_id", sa.String(length=40), nullable=True),
        sa.Column("step", sa.Integer(), nullable=True),
        sa.Column("model_id", sa.String(length=200), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_rupiah", sa.Numeric(precision=30, scale=10), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name=op.f("fk_usage_charges_account_id_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_charges")),
    )
    op.create_index(
        "ix_usage_charges_account_created",
        "usage_charges",
        ["account_id", "created_at"],
        unique=False,
    )
    op.create_index(op.f("ix_usage_charges_run_id"), "usage_charges", ["run_id"], unique=False)
    # A run's running total adds up per-call costs that have up to ten decimal places.
    with op.batch_alter_table("runs") as batch:
        batch.alter_column(
            "cost_rupiah",
            existing_type=sa.Numeric(precision=20, scale=4),
            type_=sa.Numeric(precision=30, scale=10),
            existing_nullable=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.alter_column(
            "cost_rupiah",
            existing_type=sa.Numeric(precision=30, scale=10),
            type_=sa.Numeric(precision=20, scale=4),
            existing_nullable=False,
        )
    op.drop_index(op.f("ix_usage_charges_run_id"), table_name="usage_charges")
    op.drop_index("ix_usage_charges_account_created", table_name="usage_charges")
    op.drop_table("usage_charges")
