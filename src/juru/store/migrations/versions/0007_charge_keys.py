"""Charge keys: a charge that may be written again after a crash (a run's model step, a
built-in call) carries a key, and a second row with the same key is refused.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("usage_charges") as batch:
        batch.add_column(sa.Column("charge_key", sa.String(length=300), nullable=True))
        batch.create_unique_constraint("uq_usage_charges_charge_key", ["charge_key"])


def downgrade() -> None:
    with op.batch_alter_table("usage_charges") as batch:
        batch.drop_constraint("uq_usage_charges_charge_key", type_="unique")
        batch.drop_column("charge_key")
