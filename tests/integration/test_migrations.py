"""Alembic's head and the table metadata agree on both databases; `juru db upgrade` works;
LangGraph's saver is set up once however many processes start at once."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import uuid
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from juru.store.checkpointer import open_checkpointer
from juru.store.migrations import upgrade_to_head
from juru.store.tables import in_metadata, metadata
from juru.store.urls import DatabaseUrl
from tests.conftest import _admin_execute, _database_url


def _differences(url: str) -> list[Any]:
    engine = create_engine(DatabaseUrl.parse(url).sync_url())
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection,
                opts={"include_name": in_metadata, "compare_type": True},
            )
            return list(compare_metadata(context, metadata))
    finally:
        engine.dispose()


def _tables(url: str) -> set[str]:
    engine = create_engine(DatabaseUrl.parse(url).sync_url())
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_migration_head_matches_the_table_metadata(database_url: str) -> None:
    assert set(metadata.tables) <= _tables(database_url)
    assert _differences(database_url) == []


def test_upgrading_twice_changes_nothing(database_url: str) -> None:
    before = _tables(database_url)
    upgrade_to_head(DatabaseUrl.parse(database_url))
    assert _tables(database_url) == before
    assert _differences(database_url) == []


def test_a_table_missing_from_the_migrations_would_be_caught(database_url: str) -> None:
    from sqlalchemy import Column, Integer, Table

    extra = Table("not_migrated", metadata, Column("id", Integer, primary_key=True))
    try:
        assert [diff[0] for diff in _differences(database_url)] == ["add_table"]
    finally:
        metadata.remove(extra)


def test_juru_db_upgrade_creates_the_schema(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/fresh/juru.db"
    done = subprocess.run(
        [sys.executable, "-m", "juru", "db", "upgrade"],
        env={"JURU_DATABASE_URL": url, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert set(metadata.tables) <= _tables(url)


@pytest.mark.postgresql
async def test_processes_starting_at_once_set_the_checkpointer_up_once() -> None:
    """Replicas of `juru serve` open a new PostgreSQL database at the same moment: each sets
    LangGraph's saver up, and none may fail on a migration another just applied."""
    name = f"juru_test_{uuid.uuid4().hex[:12]}"
    _admin_execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    url = DatabaseUrl.parse(_database_url(name))
    try:
        async with contextlib.AsyncExitStack() as stack:
            savers = await asyncio.gather(
                *(stack.enter_async_context(open_checkpointer(url)) for _ in range(3))
            )
            assert len(savers) == 3
        # Every index the migrations built is whole (a failed concurrent build leaves an
        # invalid one that later starts would skip).
        engine = create_engine(url.sync_url())
        try:
            with engine.connect() as connection:
                invalid = connection.scalars(
                    text("SELECT indexrelid::regclass::text FROM pg_index WHERE NOT indisvalid")
                ).all()
                indexes = connection.scalar(
                    text("SELECT count(*) FROM pg_indexes WHERE tablename LIKE 'checkpoint%'")
                )
        finally:
            engine.dispose()
        assert invalid == [] and indexes
    finally:
        _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
