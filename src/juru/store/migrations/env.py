"""Alembic environment: runs on the connection handed over by `upgrade_to_head`."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from juru.store.tables import in_metadata, metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=True,
        include_name=in_metadata,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    engine = create_engine(context.config.get_main_option("sqlalchemy.url") or "")
    with engine.begin() as own_connection:
        _run(own_connection)
    engine.dispose()
