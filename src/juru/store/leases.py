"""Leases held under a stable worker name: taken back at once by that name's next process."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, update

from juru.core.states import RunStatus
from juru.store.database import Database
from juru.store.tables import runs
from juru.store.transactions import write


async def release_leases_of(engine: Database, owner_prefix: str, now: datetime) -> list[str]:
    """Free the running runs whose lease owner starts with `owner_prefix`; their ids.

    Only for a prefix that no live process uses: the caller knows the owners are gone.
    """
    statement = (
        update(runs)
        .where(
            runs.c.status == RunStatus.RUNNING.value,
            runs.c.lease_owner.startswith(owner_prefix, autoescape=True),
        )
        .values(lease_owner=None, lease_expires_at=None, updated_at=now)
        .returning(runs.c.id)
    )

    def release(connection: Connection) -> list[str]:
        return [str(run_id) for run_id in connection.execute(statement).scalars()]

    return await write(engine, release)
