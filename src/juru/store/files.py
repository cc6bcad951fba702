"""Queries of the `files` table (the bytes are in `juru.files` storage)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, insert, select

from juru.store.database import Database
from juru.store.hosted import page_of
from juru.store.pages import Page, PageRequest
from juru.store.records import FileRecord
from juru.store.tables import files
from juru.store.transactions import write


async def insert_file(engine: Database, values: dict[str, Any]) -> FileRecord:
    def add(connection: Connection) -> None:
        connection.execute(insert(files).values(values))

    await write(engine, add)
    found = await get_file(engine, values["account_id"], values["id"])
    assert found is not None
    return found


async def get_file(engine: Database, account_id: str, file_id: str) -> FileRecord | None:
    """The account's file, or None (another account's file is as absent as a missing one)."""
    query = select(files).where(files.c.id == file_id, files.c.account_id == account_id)
    row = await engine.first_row(query)
    return FileRecord.from_row(row) if row is not None else None


async def list_files(engine: Database, account_id: str, page: PageRequest) -> Page[FileRecord]:
    """The account's files, newest first by default, one page."""
    query = select(files).where(files.c.account_id == account_id)
    rows = await engine.read(lambda connection: page_of(connection, files, query, page))
    return Page([FileRecord.from_row(row) for row in rows.items], rows.has_more)
