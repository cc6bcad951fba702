"""A `?wait=` answered from the notice of the write that paused or ended the run: the run is
not read again after the wake-up, the answer is the one a read gives, and a notice that does
not show the server done with the run (or carries no state) still leads to a read."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import asdict, replace
from typing import Any

import pytest

from juru.app import stop_long_polls
from juru.core.errors import InvalidRequestError
from juru.core.run_events import RunEventType
from juru.engine.events import changed_to
from juru.store import run_log
from juru.store.run_log import RunEventRecord
from juru.store.run_state import run_from_state, run_state
from juru.store.runs import get_run
from tests.integration.test_paused_runs import (
    paused_run_of,
    resume_elsewhere,
    run_reads,
    weather_call,
)
from tests.support.fake_openai import FakeOpenAIServer
from tests.support.hosted import HostedHarness

MODEL = "openai/gpt-4o-mini"


@contextlib.asynccontextmanager
async def waiting(hosted: HostedHarness, run_id: str) -> AsyncIterator[asyncio.Task[Any]]:
    """A `GET ?wait=30` of the run, yielded once it watches the run."""
    events: Any = hosted.context.machine.events
    watching = asyncio.Event()
    watch = events.watch

    @contextlib.asynccontextmanager
    async def watch_and_tell(watched: str, leases: bool = False) -> AsyncIterator[Any]:
        async with watch(watched, leases) as changed:
            if watched == run_id and not leases:
                watching.set()
            yield changed

    if run_id in hosted.context.hosted.resumed:
        watching.set()  # its watch has been open since this process resumed it
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(events, "watch", watch_and_tell)
        task = asyncio.create_task(hosted.client.get(f"/v1/runs/{run_id}?wait=30"))
        await asyncio.wait_for(watching.wait(), 10)
        yield task


async def resumed_run(hosted: HostedHarness, model_id: str = "juru/demo") -> dict[str, Any]:
    """A run past its first pause, resumed by another process (this one never saw it resumed,
    so a wait reads it first): its tool outputs are in and it waits for a worker."""
    paused = await paused_run_of(hosted, model_id)
    await resume_elsewhere(hosted, paused["id"], '{"temp_c": 32}')
    running = await hosted.get_run(paused["id"])
    assert running["status"] == "running", running
    return running


async def resumed_here(hosted: HostedHarness, model_id: str = "juru/demo") -> dict[str, Any]:
    """A run past its first pause, resumed through this process's API."""
    paused = await paused_run_of(hosted, model_id)
    answered = await hosted.answer(paused, '{"temp_c": 32}')
    assert answered.status_code == 200, answered.text
    running: dict[str, Any] = answered.json()
    assert running["id"] in hosted.context.hosted.resumed
    return running


async def answer_without_a_read(hosted: HostedHarness, paused: dict[str, Any]) -> None:
    """Post the paused run's outputs, which must not read the run, and run it to its end
    (the fake model's last answer is "Done")."""
    with run_reads() as reads:
        answered = await hosted.answer(paused, "rainy")
    assert answered.status_code == 200, answered.text
    assert reads == []
    await hosted.work()
    assert (await hosted.get_run(paused["id"]))["output"] == "Done"


@pytest.mark.parametrize(
    ("resume", "reads_expected"),
    [
        # Resumed elsewhere: one read before the wait; the pause's notice carried the run.
        pytest.param("elsewhere", 1, id="resumed-elsewhere"),
        # Resumed here: the resume's write gave the run and its watch, the notice the answer.
        pytest.param("here", 0, id="resumed-here"),
    ],
)
async def test_a_wait_that_ends_at_a_pause_reads_the_run_at_most_once(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer, resume: str, reads_expected: int
) -> None:
    hosted = hosted_openai
    fake_openai.script([weather_call("call_1"), weather_call("call_2"), {"content": "Done"}])
    resumed = resumed_here if resume == "here" else resumed_run
    run = await resumed(hosted, MODEL)
    with run_reads() as reads:
        async with waiting(hosted, run["id"]) as waiter:
            await hosted.work()
            paused = (await asyncio.wait_for(waiter, 10)).json()
    assert len(reads) == reads_expected
    assert paused["status"] == "requires_action"
    assert [call["id"] for call in paused["pending_tool_calls"]] == ["call_2"]
    assert paused == await hosted.get_run(run["id"])
    # The outputs that follow need no read either: the answer came from a paused run.
    await answer_without_a_read(hosted, paused)


async def test_a_pause_shown_live_on_a_stream_needs_no_read_for_the_outputs(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    hosted = hosted_openai
    fake_openai.script([weather_call("call_1"), weather_call("call_2"), {"content": "Done"}])
    run = await resumed_run(hosted, MODEL)
    logged = len(await run_log.events_after(hosted.context.engine, run["id"], 0))
    items = await hosted.context.hosted.run_events(hosted.account_id, run["id"])
    # The replay shows the first pause again: the stream did not see it happen, so it is not
    # remembered (the outputs posted for it already resumed the run).
    replayed = [await anext(items) for _ in range(logged)]
    assert any(shows_a_pause(item) for item in replayed)
    assert len(hosted.context.hosted.paused) == 0
    await hosted.work()
    seen = await anext(items)
    while not shows_a_pause(seen):
        seen = await anext(items)
    await items.aclose()
    assert isinstance(seen, RunEventRecord)
    paused = seen.data
    assert [call["id"] for call in paused["pending_tool_calls"]] == ["call_2"]
    await answer_without_a_read(hosted, paused)


def shows_a_pause(item: object) -> bool:
    return (
        isinstance(item, RunEventRecord)
        and item.type == RunEventType.STATUS
        and item.data["status"] == "requires_action"
    )


async def test_a_wait_that_ends_with_the_run_reads_it_once(hosted: HostedHarness) -> None:
    run = await resumed_run(hosted)
    with run_reads() as reads:
        async with waiting(hosted, run["id"]) as waiter:
            await hosted.work()
            done = (await asyncio.wait_for(waiter, 10)).json()
    assert len(reads) == 1
    assert done["status"] == "succeeded" and "32" in done["output"]
    assert done == await hosted.get_run(run["id"])


async def test_a_run_too_large_for_a_notice_is_read(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    hosted = hosted_openai
    long_answer = "Cerah. " * 1000
    fake_openai.script([weather_call("call_1"), {"content": long_answer}])
    run = await resumed_run(hosted, MODEL)
    with run_reads() as reads:
        async with waiting(hosted, run["id"]) as waiter:
            await hosted.work()
            done = (await asyncio.wait_for(waiter, 10)).json()
    assert len(reads) == 2  # before the wait, and after it: the notice said only "changed"
    assert done["status"] == "succeeded" and done["output"] == long_answer


@pytest.mark.parametrize(
    "shown",
    [
        pytest.param({"status": "requires_action"}, id="the-pause-it-came-from"),
        pytest.param({"status": "succeeded", "account_id": "acct_other"}, id="another-account"),
        pytest.param({"status": "running", "pause_count": 1}, id="still-working"),
        pytest.param({"status": "succeeded", "cost_rupiah": "not money"}, id="not-a-run"),
    ],
)
async def test_a_notice_that_does_not_show_the_run_done_is_not_the_answer(
    hosted: HostedHarness, shown: dict[str, Any]
) -> None:
    run = await resumed_run(hosted)
    record = await get_run(hosted.context.engine, run["id"], hosted.account_id)
    assert record is not None
    events: Any = hosted.context.machine.events
    async with waiting(hosted, run["id"]) as waiter:
        state = {**run_state(asdict(record)), **shown}
        events.deliver(changed_to(run["id"], state))  # read again: still running, so it waits
        cancelled = await hosted.client.post(f"/v1/runs/{run['id']}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        answer = (await asyncio.wait_for(waiter, 10)).json()
    assert answer["status"] == "cancelled"
    assert answer == await hosted.get_run(run["id"])


async def test_a_run_state_comes_back_as_the_record_without_its_input(
    hosted: HostedHarness,
) -> None:
    run = await resumed_run(hosted)
    record = await get_run(hosted.context.engine, run["id"], hosted.account_id)
    assert record is not None and record.input and record.tool_outputs
    state = json.loads(json.dumps(run_state(asdict(record))))
    assert run_from_state(state) == replace(record, input=[])
    assert "input" not in state


async def test_a_wait_after_outputs_posted_here_sees_a_change_made_before_it(
    hosted: HostedHarness,
) -> None:
    run = await resumed_here(hosted)
    await hosted.work()  # the run ends before the client asks
    with run_reads() as reads:
        done = (await hosted.client.get(f"/v1/runs/{run['id']}?wait=30")).json()
    assert reads == []
    assert done["status"] == "succeeded" and "32" in done["output"]
    assert done == await hosted.get_run(run["id"])


async def test_a_wait_after_outputs_posted_here_that_runs_out_reads_the_run(
    hosted: HostedHarness,
) -> None:
    run = await resumed_here(hosted)
    with run_reads() as reads:
        answer = (await hosted.client.get(f"/v1/runs/{run['id']}?wait=0.05")).json()
    assert len(reads) == 1  # a working run's steps send no notice: the answer is read
    assert answer == await hosted.get_run(run["id"])
    assert run["id"] not in hosted.context.hosted.resumed  # given out once


async def test_a_resume_that_another_change_raced_is_not_remembered(
    hosted: HostedHarness,
) -> None:
    paused = await paused_run_of(hosted, "juru/demo")
    machine: Any = hosted.context.machine
    submit = machine.submit_tool_outputs

    async def raced(*args: Any, **kwargs: Any) -> Any:
        machine.events.deliver(paused["id"])  # a change heard while the write was under way
        return await submit(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(machine, "submit_tool_outputs", raced)
        assert (await hosted.answer(paused)).status_code == 200
    assert paused["id"] not in hosted.context.hosted.resumed
    with run_reads() as reads:
        async with waiting(hosted, paused["id"]) as waiter:
            await hosted.work()
            done = (await asyncio.wait_for(waiter, 10)).json()
    assert len(reads) == 1
    assert done["status"] == "succeeded"


async def test_outputs_posted_with_a_wait_answer_with_the_run_where_it_stops_next(
    hosted: HostedHarness,
) -> None:
    paused = await paused_run_of(hosted, "juru/demo")
    outputs = [
        {"tool_call_id": c["id"], "output": '{"temp_c": 32}'} for c in paused["pending_tool_calls"]
    ]
    path = f"/v1/runs/{paused['id']}/tool_outputs?wait=30"
    with run_reads() as reads:
        async with hosted.context.machine.events.watch(paused["id"]) as changed:
            posted = asyncio.create_task(hosted.client.post(path, json={"outputs": outputs}))
            await asyncio.wait_for(changed.wait(), 10)  # the resume's notice: it is running
            assert not posted.done()  # the request waits while the run is worked on
            await hosted.work()
            answer = await asyncio.wait_for(posted, 10)
    assert answer.status_code == 200, answer.text
    assert reads == []  # the resume's write and the end's notice gave the run
    done = answer.json()
    assert done["status"] == "succeeded" and "32" in done["output"]
    assert done == await hosted.get_run(paused["id"])


@pytest.mark.parametrize("wait", ["31", "-1", "soon"])
async def test_outputs_posted_with_a_wait_out_of_range_are_not_taken(
    hosted: HostedHarness, wait: str
) -> None:
    paused = await paused_run_of(hosted, "juru/demo")
    outputs = [{"tool_call_id": c["id"], "output": "{}"} for c in paused["pending_tool_calls"]]
    answer = await hosted.client.post(
        f"/v1/runs/{paused['id']}/tool_outputs", params={"wait": wait}, json={"outputs": outputs}
    )
    assert answer.status_code == 400, answer.text
    assert [field["path"] for field in answer.json()["error"]["fields"]] == ["query.wait"]
    assert await hosted.get_run(paused["id"]) == paused


async def test_the_service_checks_the_wait_before_it_takes_the_outputs(
    hosted: HostedHarness,
) -> None:
    paused = await paused_run_of(hosted, "juru/demo")
    outputs = [{"tool_call_id": c["id"], "output": "{}"} for c in paused["pending_tool_calls"]]
    with pytest.raises(InvalidRequestError, match="wait must be between 0 and 30"):
        await hosted.context.hosted.submit_tool_outputs(
            hosted.account_id, paused["id"], outputs, wait=31
        )
    assert await hosted.get_run(paused["id"]) == paused


async def test_a_stopping_server_answers_its_waits_at_once_with_the_runs_as_they_stand(
    hosted: HostedHarness,
) -> None:
    # A stop signal lets the API answer its open requests for up to 10 s, then cuts them: a
    # `?wait=` of a run still working would hold the stop that long and get no answer.
    run = await resumed_run(hosted)
    async with waiting(hosted, run["id"]) as waiter:
        stop_long_polls(hosted.app)  # what the stop signal's handler calls
        answered = await asyncio.wait_for(waiter, 10)
    assert answered.status_code == 200
    assert answered.json()["status"] in {"queued", "running"}
    assert answered.json() == await hosted.get_run(run["id"])
    # A wait asked once the server is stopping does not wait either.
    later = await asyncio.wait_for(hosted.client.get(f"/v1/runs/{run['id']}?wait=30"), 10)
    assert later.json() == answered.json()
