"""Idempotency keys remember their request: a run created with a key keeps the SHA-256 of the
request's body, so the key reused with another body can be refused.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-10
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("idempotency_body_hash", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("idempotency_body_hash")
