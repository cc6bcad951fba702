"""Pre-holds: a run that pauses for tool outputs remembers what its next call will send
(`next_prompt_bytes`, `next_model_id`), so that submitting the outputs can take that call's
hold in the same transaction (`hold_id`, `hold_rupiah`) instead of a write of its own.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("next_prompt_bytes", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("next_model_id", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("hold_id", sa.String(length=40), nullable=True))
        batch.add_column(sa.Column("hold_rupiah", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("hold_rupiah")
        batch.drop_column("hold_id")
        batch.drop_column("next_model_id")
        batch.drop_column("next_prompt_bytes")
