"""Idempotency keys of runs: a key lives on the run it created, and is forgotten once expired."""

from __future__ import annotations

from sqlalchemy import Connection, update

from juru.store.database import Database
from juru.store.tables import runs
from juru.store.transactions import write


async def forget_key(engine: Database, run_id: str) -> None:
    """Free the run's idempotency key (it expired): the same key may then create a new run."""

    def clear(connection: Connection) -> None:
        connection.execute(
            update(runs)
            .where(runs.c.id == run_id)
            .values(idempotency_key=None, idempotency_body_hash=None)
        )

    await write(engine, clear)
