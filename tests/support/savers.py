"""The checkpointer of the store's process, and another process's, on one test database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from juru.store.checkpointer import open_checkpointer
from juru.store.database import Database
from juru.store.urls import DatabaseUrl


@pytest.fixture
async def savers(database_url: str, store_database: Database) -> AsyncIterator[tuple[Any, Any]]:
    """The saver of the store's process, and another process's saver that reads behind it."""
    url = DatabaseUrl.parse(database_url)
    async with (
        open_checkpointer(url, engine=store_database) as ours,
        open_checkpointer(url) as theirs,
    ):
        yield ours, theirs
