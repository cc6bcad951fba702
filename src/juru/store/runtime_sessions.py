"""Queries on `runtime_sessions` (Agent Runtime sessions), and the agent the runtime serves.

Every read of a session names its app and its user: another user's session is not found.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from juru.store.database import Database
from juru.store.records import AgentRecord, _Record
from juru.store.tables import agents, runtime_sessions
from juru.store.transactions import write


@dataclass(frozen=True)
class RuntimeSessionRecord(_Record):
    id: str
    app_name: str
    user_id: str
    state: dict[str, Any]
    created_at: datetime
    updated_at: datetime


def _owned(app_name: str, user_id: str, session_id: str) -> ColumnElement[bool]:
    return and_(
        runtime_sessions.c.id == session_id,
        runtime_sessions.c.app_name == app_name,
        runtime_sessions.c.user_id == user_id,
    )


async def insert_session(engine: Database, values: dict[str, Any]) -> bool:
    """Insert a session; False when its id is already taken."""
    try:
        await write(engine, lambda connection: connection.execute(insert(runtime_sessions), values))
    except IntegrityError:
        return False
    return True


async def get_session(
    engine: Database, app_name: str, user_id: str, session_id: str
) -> RuntimeSessionRecord | None:
    row = await engine.first_row(
        select(runtime_sessions).where(_owned(app_name, user_id, session_id))
    )
    return None if row is None else RuntimeSessionRecord.from_row(row)


async def list_sessions(
    engine: Database, app_name: str, user_id: str
) -> list[RuntimeSessionRecord]:
    """The user's sessions of the app, oldest first (ids sort by creation time)."""
    query = (
        select(runtime_sessions)
        .where(runtime_sessions.c.app_name == app_name, runtime_sessions.c.user_id == user_id)
        .order_by(runtime_sessions.c.created_at, runtime_sessions.c.id)
    )
    return [RuntimeSessionRecord.from_row(row) for row in await engine.rows(query)]


async def touch_session(engine: Database, session_id: str, now: datetime) -> None:
    statement = (
        update(runtime_sessions).where(runtime_sessions.c.id == session_id).values(updated_at=now)
    )
    await write(engine, lambda connection: connection.execute(statement))


async def delete_session(engine: Database, app_name: str, user_id: str, session_id: str) -> bool:
    """Delete the user's session; False when there was none."""
    statement = delete(runtime_sessions).where(_owned(app_name, user_id, session_id))
    result = await write(engine, lambda connection: connection.execute(statement))
    return bool(result.rowcount)


async def get_agent_by_id(engine: Database, agent_id: str) -> AgentRecord | None:
    """A hosted agent by id, whatever its account (the runtime serves one the operator names)."""
    row = await engine.first_row(select(agents).where(agents.c.id == agent_id))
    return None if row is None else AgentRecord.from_row(row)
