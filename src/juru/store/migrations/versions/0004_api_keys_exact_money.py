"""API keys (hashes only); money as integer micro-rupiah; list prices on charges.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# (table, column, numeric type before this revision)
MONEY_COLUMNS = (
    ("accounts", "balance_rupiah", sa.Numeric(precision=20, scale=4)),
    ("runs", "cost_rupiah", sa.Numeric(precision=30, scale=10)),
    ("usage_charges", "cost_rupiah", sa.Numeric(precision=30, scale=10)),
)


def _to_micros(table: str, column: str, old_type: sa.types.TypeEngine[Any]) -> None:
    op.execute(f"UPDATE {table} SET {column} = ROUND({column} * 1000000)")
    with op.batch_alter_table(table) as batch:
        batch.alter_column(
            column,
            existing_type=old_type,
            type_=sa.BigInteger(),
            existing_nullable=False,
            postgresql_using=f"{column}::bigint",
        )


def _from_micros(table: str, column: str, old_type: sa.types.TypeEngine[Any]) -> None:
    with op.batch_alter_table(table) as batch:
        batch.alter_column(
            column, existing_type=sa.BigInteger(), type_=old_type, existing_nullable=False
        )
    op.execute(f"UPDATE {table} SET {column} = {column} / 1000000.0")


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("prefix", sa.String(length=40), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name=op.f("fk_api_keys_account_id_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
        sa.UniqueConstraint("prefix", name=op.f("uq_api_keys_prefix")),
    )
    op.create_index(op.f("ix_api_keys_account_id"), "api_keys", ["account_id"], unique=False)
    for table, column, old_type in MONEY_COLUMNS:
        _to_micros(table, column, old_type)
    with op.batch_alter_table("usage_charges") as batch:
        batch.add_column(sa.Column("list_cost_rupiah", sa.BigInteger(), nullable=True))
    op.execute("UPDATE usage_charges SET list_cost_rupiah = cost_rupiah")
    with op.batch_alter_table("usage_charges") as batch:
        batch.alter_column("list_cost_rupiah", existing_type=sa.BigInteger(), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("usage_charges") as batch:
        batch.drop_column("list_cost_rupiah")
    for table, column, old_type in MONEY_COLUMNS:
        _from_micros(table, column, old_type)
    op.drop_index(op.f("ix_api_keys_account_id"), table_name="api_keys")
    op.drop_table("api_keys")
