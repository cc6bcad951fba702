"""A followed run's step: the notice of its write carries the events it appended, and the
stream sends them without reading the log; events that do not follow what the stream sent
(a notice missed or late) are read from the log instead, so nothing is lost or sent twice."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from juru.engine.events import log_grew
from juru.store.run_log import RunEventRecord, events_after
from tests.support.hosted import HostedHarness
from tests.support.statements import statements_sent


def log_reads() -> contextlib.AbstractContextManager[list[str]]:
    return statements_sent(
        lambda statement: (
            statement.lstrip().upper().startswith("SELECT") and "FROM run_events" in statement
        )
    )


@contextlib.asynccontextmanager
async def following(
    hosted: HostedHarness, run_id: str, after: int
) -> AsyncIterator[asyncio.Task[list[Any]]]:
    """The durable events of the run's stream after id `after`, collected to its end; yielded
    once it follows the run."""
    events: Any = hosted.context.machine.events
    followed = asyncio.Event()
    follow = events.follow

    @contextlib.asynccontextmanager
    async def follow_and_tell(followed_id: str) -> AsyncIterator[Any]:
        async with follow(followed_id) as follower:
            followed.set()
            yield follower

    async def collect() -> list[Any]:
        items = await hosted.context.hosted.run_events(hosted.account_id, run_id, after)
        assert items is not None
        return [item async for item in items if isinstance(item, RunEventRecord)]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(events, "follow", follow_and_tell)
        task = asyncio.create_task(collect())
        await asyncio.wait_for(followed.wait(), 10)
        yield task


async def answered_run(hosted: HostedHarness) -> tuple[dict[str, Any], int]:
    """A run whose tool outputs are in, and the id of the last event in its log."""
    run = await hosted.new_run()
    await hosted.work()
    paused = await hosted.get_run(run["id"])
    assert (await hosted.answer(paused)).status_code == 200
    logged = await events_after(hosted.context.engine, run["id"], 0)
    return run, logged[-1].seq


async def test_a_followed_steps_events_reach_the_stream_without_a_read_of_the_log(
    hosted: HostedHarness,
) -> None:
    run, last = await answered_run(hosted)
    with log_reads() as reads:
        async with following(hosted, run["id"], last) as stream:
            await hosted.work()
            items = await asyncio.wait_for(stream, 10)
    assert len(reads) == 1  # the stream's first look at the log, before the step
    logged = await events_after(hosted.context.engine, run["id"], last)
    assert [(e.seq, e.type, e.data) for e in items] == [(e.seq, e.type, e.data) for e in logged]
    assert [e.type for e in items] == [
        "message.completed",
        "message.completed",
        "step.completed",
        "run.status",
    ]
    assert items[-1].data["status"] == "succeeded"


def carried(run_id: str, seq: int) -> str:
    fake = RunEventRecord(
        run_id, seq, "step.completed", {"step_count": 99, "cost_rupiah": "0"}, datetime.now(UTC)
    )
    return log_grew(run_id, [fake])


@pytest.mark.parametrize("ahead", [pytest.param(2, id="after-a-gap"), pytest.param(0, id="seen")])
async def test_carried_events_that_do_not_follow_the_stream_are_read_from_the_log(
    hosted: HostedHarness, ahead: int
) -> None:
    run, last = await answered_run(hosted)
    events: Any = hosted.context.machine.events
    async with following(hosted, run["id"], last - 2) as stream:
        # Not the events that follow the stream's last id: a notice missed, or one seen.
        events.deliver(carried(run["id"], last + ahead))
        cancelled = await hosted.client.post(f"/v1/runs/{run['id']}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        items = await asyncio.wait_for(stream, 10)
    logged = await events_after(hosted.context.engine, run["id"], last - 2)
    assert [(e.seq, e.type, e.data) for e in items] == [(e.seq, e.type, e.data) for e in logged]
    assert items[-1].data["status"] == "cancelled"
    assert all(e.data.get("step_count") != 99 for e in items)
