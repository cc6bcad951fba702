"""Run events: in one process, and between processes over PostgreSQL LISTEN/NOTIFY."""

from __future__ import annotations

import asyncio

import pytest

from juru.engine.events import LocalRunEvents, PostgresRunEvents
from juru.store.urls import DatabaseUrl


async def test_local_events_wake_the_watchers_of_that_run_only() -> None:
    events = LocalRunEvents()
    async with events.watch("run_a") as a, events.watch("run_b") as b:
        await events.publish("run_a")
        assert a.is_set() and not b.is_set()
    await events.announce_work()
    await asyncio.wait_for(events.wait_for_work(30), timeout=5)


@pytest.mark.postgresql
async def test_an_event_published_by_one_process_wakes_a_watcher_in_another(
    fresh_postgres_url: str,
) -> None:
    dsn = DatabaseUrl.parse(fresh_postgres_url).libpq_dsn()
    api_process, worker_process = PostgresRunEvents(dsn), PostgresRunEvents(dsn)
    await api_process.start()
    await worker_process.start()
    try:
        async with api_process.watch("run_x") as changed:
            await worker_process.publish("run_x")
            await asyncio.wait_for(changed.wait(), timeout=10)
        waiting = asyncio.create_task(api_process.wait_for_work(30))
        await worker_process.announce_work()
        await asyncio.wait_for(waiting, timeout=10)
    finally:
        await api_process.stop()
        await worker_process.stop()
