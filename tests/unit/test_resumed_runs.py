"""`ResumedRuns`: a run is kept only when its watch saw nothing but the resume's own change;
each is given out once, only to the run's account; the oldest are forgotten first, and every
watch it lets go of is closed."""

from __future__ import annotations

import contextlib
from dataclasses import replace

from juru.engine.events import LocalRunEvents
from juru.hosted.resumed_runs import Resumed, ResumedRuns
from tests.unit.test_paused_runs import run


async def resumed(events: LocalRunEvents, run_id: str, changes: int = 1) -> Resumed:
    """A run resumed while its watch was open, with `changes` changes heard meanwhile."""
    watching = contextlib.AsyncExitStack()
    changed = await watching.enter_async_context(events.watch(run_id))
    for _ in range(changes):
        events.deliver(run_id)
    return Resumed(replace(run(run_id), status="running"), changed, watching)


def watched(events: LocalRunEvents, run_id: str) -> bool:
    return run_id in events._watchers


async def test_a_run_is_kept_with_its_watch_cleared_and_given_once_to_its_account() -> None:
    events, runs = LocalRunEvents(), ResumedRuns()
    await runs.keep(await resumed(events, "run_1"))
    assert "run_1" in runs and watched(events, "run_1")
    assert runs.take("run_1", "acct_b") is None
    taken = runs.take("run_1", "acct_a")
    assert taken is not None and taken.run.status == "running"
    assert not taken.changed.is_set() and taken.changed.state is None  # the resume's own
    assert runs.take("run_1", "acct_a") is None
    events.deliver("run_1")
    assert taken.changed.is_set()  # still watching: the caller closes it
    await taken.close()
    assert not watched(events, "run_1")


async def test_a_run_that_changed_during_its_resume_is_not_kept() -> None:
    events, runs = LocalRunEvents(), ResumedRuns()
    await runs.keep(await resumed(events, "run_1", changes=2))
    assert "run_1" not in runs and not watched(events, "run_1")


async def test_the_oldest_are_forgotten_and_their_watches_closed() -> None:
    events, runs = LocalRunEvents(), ResumedRuns(limit=2)
    for run_id in ("run_1", "run_2", "run_3"):
        await runs.keep(await resumed(events, run_id))
    assert len(runs) == 2 and "run_1" not in runs
    assert [watched(events, r) for r in ("run_1", "run_2", "run_3")] == [False, True, True]


async def test_a_run_resumed_again_replaces_the_earlier_watch() -> None:
    events, runs = LocalRunEvents(), ResumedRuns()
    first = await resumed(events, "run_1")
    await runs.keep(first)
    await runs.keep(await resumed(events, "run_1"))
    assert len(runs) == 1
    assert len(events._watchers["run_1"]) == 1  # the first watch was closed
