"""Balance holds: before a paid call the most it can cost is set aside (`accounts.held_rupiah`,
one `balance_holds` row per hold), and settled to the real cost when the call returns.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.add_column(
            sa.Column("held_rupiah", sa.BigInteger(), nullable=False, server_default="0")
        )
    op.create_table(
        "balance_holds",
        sa.Column("id", sa.String(length=40), primary_key=True),
        sa.Column(
            "account_id",
            sa.String(length=40),
            sa.ForeignKey(
                "accounts.id",
                ondelete="CASCADE",
                name="fk_balance_holds_account_id_accounts",
            ),
            nullable=False,
        ),
        sa.Column("amount_rupiah", sa.BigInteger(), nullable=False),
        sa.Column("what", sa.String(length=200), nullable=False),
        sa.Column("run_id", sa.String(length=40), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_balance_holds"),
    )
    op.create_index("ix_balance_holds_expires_at", "balance_holds", ["expires_at"])
    op.create_index("ix_balance_holds_account_id", "balance_holds", ["account_id"])


def downgrade() -> None:
    op.drop_index("ix_balance_holds_account_id", table_name="balance_holds")
    op.drop_index("ix_balance_holds_expires_at", table_name="balance_holds")
    op.drop_table("balance_holds")
    with op.batch_alter_table("accounts") as batch:
        batch.drop_column("held_rupiah")
