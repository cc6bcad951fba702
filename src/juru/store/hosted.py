"""Queries on agents and threads. Every read is scoped to an account."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    Table,
    and_,
    bindparam,
    delete,
    insert,
    select,
    update,
)

from juru.core.errors import InvalidRequestError
from juru.store.database import Database
from juru.store.pages import Page, PageRequest
from juru.store.records import AgentRecord, ThreadRecord
from juru.store.tables import accounts, agents, threads
from juru.store.transactions import write

# Ids are `prefix_` and 24 hex digits (juru.core.ids): anything else is no cursor.
CURSOR_RE = re.compile(r"[a-z]{1,16}_[0-9a-f]{24}")


def page_of(
    connection: Connection,
    table: Table,
    query: Select[Any],
    page: PageRequest,
) -> Page[Any]:
    """Rows of `query` in id order (ids sort by creation time), one page after `page.after`,
    which must be the id of a row of `query` (else InvalidRequestError `invalid_cursor`)."""
    id_column = table.c.id
    if page.after is not None:
        _check_cursor(connection, query.with_only_columns(id_column), id_column, page.after)
        cursor: ColumnElement[bool] = (
            id_column < page.after if page.descending else id_column > page.after
        )
        query = query.where(cursor)
    order = id_column.desc() if page.descending else id_column.asc()
    rows = connection.execute(query.order_by(order).limit(page.limit + 1)).all()
    return Page(items=[row._mapping for row in rows[: page.limit]], has_more=len(rows) > page.limit)


def _check_cursor(connection: Connection, ids: Select[Any], id_column: Any, cursor: str) -> None:
    known = CURSOR_RE.fullmatch(cursor) is not None and (
        connection.execute(ids.where(id_column == cursor).limit(1)).first() is not None
    )
    if not known:
        raise invalid_cursor(cursor)


def invalid_cursor(cursor: str) -> InvalidRequestError:
    shown = cursor if len(cursor) <= 60 else cursor[:60] + "..."
    return InvalidRequestError(
        f"after: {shown!r} is not a cursor of this list (pass the next_cursor of a page, or "
        "the id of an item the list holds)",
        "invalid_cursor",
    )


async def insert_agent(engine: Database, values: dict[str, Any]) -> AgentRecord:
    def insert_and_read(connection: Connection) -> AgentRecord | None:
        connection.execute(insert(agents).values(values))
        return _agent_read(connection, agents.c.id == values["id"])

    agent = await write(engine, insert_and_read)
    assert agent is not None
    return agent


def _owned_agent(account_id: str, agent_id: str) -> ColumnElement[bool]:
    return and_(agents.c.id == agent_id, agents.c.account_id == account_id)


def _agent_read(connection: Connection, condition: ColumnElement[bool]) -> AgentRecord | None:
    row = connection.execute(select(agents).where(condition)).first()
    return None if row is None else AgentRecord.from_row(row._mapping)


# Read at every run's creation: built once (building a statement and its cache key costs more
# than running it).
_OWNED_AGENT = select(agents).where(
    agents.c.id == bindparam("agent_id"), agents.c.account_id == bindparam("account_id")
)


async def get_agent(engine: Database, account_id: str, agent_id: str) -> AgentRecord | None:
    row = await engine.first_row(_OWNED_AGENT, {"agent_id": agent_id, "account_id": account_id})
    return None if row is None else AgentRecord.from_row(row)


# Every claimed run reads its agent: built once.
_AGENT_AND_TIER = (
    select(agents, accounts.c.tier.label("account_tier"))
    .join(accounts, accounts.c.id == agents.c.account_id)
    .where(agents.c.id == bindparam("agent_id"), agents.c.account_id == bindparam("account_id"))
)


async def agent_and_tier(
    engine: Database, account_id: str, agent_id: str
) -> tuple[AgentRecord, str] | None:
    """The agent a run executes, with its account's tier (what its charges are priced by)."""

    row = await engine.first_row(_AGENT_AND_TIER, {"account_id": account_id, "agent_id": agent_id})
    return None if row is None else (AgentRecord.from_row(row), str(row["account_tier"]))


async def agent_calls(engine: Database, account_id: str) -> dict[str, list[str]]:
    """Every agent of the account, with the ids of the agents it calls as tools."""
    query = select(agents.c.id, agents.c.agent_tools).where(agents.c.account_id == account_id)
    return {
        str(row["id"]): [str(tool["agent_id"]) for tool in row["agent_tools"] or []]
        for row in await engine.rows(query)
    }


async def list_agents(engine: Database, account_id: str, page: PageRequest) -> Page[AgentRecord]:
    query = select(agents).where(agents.c.account_id == account_id)
    rows = await engine.read(lambda connection: page_of(connection, agents, query, page))
    return Page([AgentRecord.from_row(row) for row in rows.items], rows.has_more)


async def update_agent(
    engine: Database, account_id: str, agent_id: str, values: dict[str, Any]
) -> AgentRecord | None:
    condition = _owned_agent(account_id, agent_id)

    def update_and_read(connection: Connection) -> AgentRecord | None:
        edit = {**values, "revision": agents.c.revision + 1}
        connection.execute(update(agents).where(condition).values(edit))
        return _agent_read(connection, condition)

    return await write(engine, update_and_read)


async def delete_agent(engine: Database, account_id: str, agent_id: str) -> list[str]:
    """Delete the agent with its threads, runs and transcripts; return the thread ids."""

    def delete_with_threads(connection: Connection) -> list[str]:
        thread_ids = list(
            connection.execute(
                select(threads.c.id).where(
                    threads.c.agent_id == agent_id, threads.c.account_id == account_id
                )
            ).scalars()
        )
        connection.execute(delete(agents).where(_owned_agent(account_id, agent_id)))
        return thread_ids

    return await write(engine, delete_with_threads)


async def insert_thread(engine: Database, values: dict[str, Any]) -> ThreadRecord:
    def insert_and_read(connection: Connection) -> Any:
        connection.execute(insert(threads).values(values))
        return connection.execute(select(threads).where(threads.c.id == values["id"])).one()

    row = await write(engine, insert_and_read)
    return ThreadRecord.from_row(row._mapping)


# Read at every run's creation: built once.
_OWNED_THREAD = select(threads).where(
    threads.c.id == bindparam("thread_id"), threads.c.account_id == bindparam("account_id")
)


async def get_thread(engine: Database, account_id: str, thread_id: str) -> ThreadRecord | None:
    row = await engine.first_row(_OWNED_THREAD, {"thread_id": thread_id, "account_id": account_id})
    return None if row is None else ThreadRecord.from_row(row)


async def list_threads(
    engine: Database, account_id: str, agent_id: str, page: PageRequest
) -> Page[ThreadRecord]:
    query = select(threads).where(
        threads.c.account_id == account_id, threads.c.agent_id == agent_id
    )
    rows = await engine.read(lambda connection: page_of(connection, threads, query, page))
    return Page([ThreadRecord.from_row(row) for row in rows.items], rows.has_more)
