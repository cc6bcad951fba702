"""The run state machine and the engine on real databases: every transition, failure reason,
race and time limit (driven by a manual clock)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, event, select, text, update
from sqlalchemy.exc import IntegrityError

from juru.context import run_events
from juru.core.errors import InvalidRequestError
from juru.core.states import RunStatus
from juru.engine import worker as worker_module
from juru.engine.events import MAX_NOTICE_BYTES
from juru.engine.execution import (
    INPUT_WRITE_CHUNK,
    PRUNE_EVERY_STEPS,
    RunExecution,
    hosted_thread_key,
)
from juru.engine.graphs import CompiledGraphs
from juru.engine.worker import Worker
from juru.store import runs as run_store
from juru.store.checkpointer import open_checkpointer
from juru.store.pruning import count_checkpoints
from juru.store.records import RunRecord
from juru.store.run_log import events_after
from juru.store.tables import runs
from juru.store.transcript import list_messages
from juru.store.urls import DatabaseUrl
from juru.store.usage import charges_of_run
from tests.support.fake_openai import FakeOpenAIServer
from tests.support.hosted import HostedHarness, demo_answer
from tests.support.statements import statements_sent

OPENAI_MODEL = "openai/gpt-4o-mini"
WEATHER_CALL = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Jakarta"}}]}


async def statuses(hosted: HostedHarness) -> dict[str, str]:
    async with hosted.context.engine.connect() as connection:
        rows = (await connection.execute(runs.select())).all()
    return {row.id: row.status for row in rows}


async def checkpoint_rows(hosted: HostedHarness, thread_key: str) -> int:
    """Rows of the thread in every table of LangGraph's saver (checkpoints, pending writes and,
    on PostgreSQL, channel values)."""
    if hosted.context.engine.dialect_name == "sqlite":
        tables = ("checkpoints", "writes")
    else:
        tables = ("checkpoints", "checkpoint_writes", "checkpoint_blobs")
    async with hosted.context.engine.connect() as connection:
        counts = [
            await connection.scalar(
                text(f"SELECT count(*) FROM {table} WHERE thread_id = :t"), {"t": thread_key}
            )
            for table in tables
        ]
    return sum(counts)


_ORPHANS = {
    # Pending writes of a checkpoint that is gone.
    "sqlite": (
        "SELECT count(*) FROM writes w WHERE w.thread_id = :t AND NOT EXISTS (SELECT 1 "
        "FROM checkpoints c WHERE c.thread_id = :t AND c.checkpoint_ns = w.checkpoint_ns "
        "AND c.checkpoint_id = w.checkpoint_id)",
    ),
    "postgresql": (
        "SELECT count(*) FROM checkpoint_writes w WHERE w.thread_id = :t AND NOT EXISTS ("
        "SELECT 1 FROM checkpoints c WHERE c.thread_id = :t "
        "AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)",
        # Channel values no checkpoint left refers to.
        "SELECT count(*) FROM checkpoint_blobs b WHERE b.thread_id = :t AND NOT EXISTS ("
        "SELECT 1 FROM checkpoints c WHERE c.thread_id = :t "
        "AND c.checkpoint_ns = b.checkpoint_ns "
        "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)",
    ),
}


async def orphan_rows(hosted: HostedHarness, thread_key: str) -> int:
    """Rows of the thread's saver tables that belong to no checkpoint left."""
    async with hosted.context.engine.connect() as connection:
        counts = [
            await connection.scalar(text(query), {"t": thread_key})
            for query in _ORPHANS[hosted.context.engine.dialect_name]
        ]
    return sum(counts)


class TestTheHappyPath:
    async def test_queued_running_requires_action_running_succeeded(
        self, hosted: HostedHarness
    ) -> None:
        run = await hosted.new_run()
        assert run["status"] == "queued"
        await hosted.work()
        paused = await hosted.get_run(run["id"])
        assert paused["status"] == "requires_action" and paused["step_count"] == 1
        [call] = paused["pending_tool_calls"]
        assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {
            "city": "Jakarta"
        }
        resumed = await hosted.answer(paused, "sunny, 31 C")
        assert resumed.status_code == 200 and resumed.json()["status"] == "running"
        assert resumed.json()["pending_tool_calls"] is None
        await hosted.work()
        done = await hosted.get_run(run["id"])
        assert done["status"] == "succeeded"
        assert done["output"] == demo_answer("get_weather", "sunny, 31 C")
        assert done["step_count"] == 2 and done["error"] is None

    async def test_a_run_can_pause_more_than_once(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        other_city = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Bandung"}}]}
        fake_openai.script([WEATHER_CALL, other_city, {"content": "Both are warm."}])
        run = await hosted_openai.new_run(model_id=OPENAI_MODEL)
        for city in ("Jakarta", "Bandung"):
            await hosted_openai.work()
            paused = await hosted_openai.get_run(run["id"])
            assert paused["status"] == "requires_action"
            assert json.loads(paused["pending_tool_calls"][0]["arguments"]) == {"city": city}
            assert (await hosted_openai.answer(paused)).status_code == 200
        await hosted_openai.work()
        done = await hosted_openai.get_run(run["id"])
        assert done["status"] == "succeeded" and done["output"] == "Both are warm."
        assert done["step_count"] == 3

    async def test_step_count_grows_while_the_run_is_running(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        unknown_tool = {"tool_calls": [{"name": "no_such_tool", "arguments": {}}]}
        fake_openai.script([unknown_tool, {"content": "late", "delay": 60}])
        run = await hosted_openai.new_run(model_id=OPENAI_MODEL)
        worker = hosted_openai.worker()
        await worker.fill_slots()
        await _until(lambda: len(fake_openai.requests()) == 2)
        running = await hosted_openai.get_run(run["id"])
        assert running["status"] == "running" and running["step_count"] == 1
        tool_message = fake_openai.requests()[1]["messages"][-1]
        assert tool_message["role"] == "tool" and "no tool named" in tool_message["content"]
        await worker.stop()

    async def test_old_checkpoints_are_pruned(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        await hosted.work()
        await hosted.answer(await hosted.get_run(run["id"]))
        await hosted.work()
        key = hosted_thread_key(run["thread_id"])
        assert await count_checkpoints(hosted.context.checkpointer, key) == 1
        assert await orphan_rows(hosted, key) == 0
        rows_after_one_run = await checkpoint_rows(hosted, key)
        second = await hosted.start_run(run["thread_id"], "What is the weather in Bandung?")
        await hosted.work()
        await hosted.answer(await hosted.get_run(second.json()["id"]))
        await hosted.work()
        assert await count_checkpoints(hosted.context.checkpointer, key) == 1
        # Nothing of the older checkpoints is left behind: not their writes, not their values.
        assert await checkpoint_rows(hosted, key) == rows_after_one_run
        assert await orphan_rows(hosted, key) == 0
        state = await hosted.context.checkpointer.aget({"configurable": {"thread_id": key}})
        assert state is not None and len(state["channel_values"]["messages"]) == 8

    async def test_a_pausing_run_prunes_once_in_prune_every_steps(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        calls = [
            {"tool_calls": [{"name": "get_weather", "arguments": {"city": f"City {number}"}}]}
            for number in range(PRUNE_EVERY_STEPS)
        ]
        fake_openai.script([*calls, {"content": "Warm."}])
        run = await hosted_openai.new_run(model_id=OPENAI_MODEL, max_steps=PRUNE_EVERY_STEPS + 1)
        key = hosted_thread_key(run["thread_id"])
        kept = []
        for _ in range(PRUNE_EVERY_STEPS):
            await hosted_openai.work()
            paused = await hosted_openai.get_run(run["id"])
            assert paused["status"] == "requires_action"
            kept.append(await count_checkpoints(hosted_openai.context.checkpointer, key))
            assert (await hosted_openai.answer(paused)).status_code == 200
        # Each pause before the last kept the checkpoints before it; the one that completes
        # `PRUNE_EVERY_STEPS` steps left only its own, and nothing of the others.
        assert kept[:-1] == sorted(kept[:-1]) and kept[-2] > kept[0] > 0
        assert kept[-1] == 1
        assert await orphan_rows(hosted_openai, key) == 0
        await hosted_openai.work()
        done = await hosted_openai.get_run(run["id"])
        assert done["status"] == "succeeded" and done["step_count"] == PRUNE_EVERY_STEPS + 1
        assert await count_checkpoints(hosted_openai.context.checkpointer, key) == 1

    async def test_a_run_resumed_where_it_paused_reads_its_checkpoint_from_memory(
        self,
        hosted_openai: HostedHarness,
        fake_openai: FakeOpenAIServer,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        bandung = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Bandung"}}]}
        fake_openai.script([WEATHER_CALL, bandung, {"content": "Both are warm."}])
        run = await hosted_openai.new_run(model_id=OPENAI_MODEL)
        key = hosted_thread_key(run["thread_id"])
        saver = hosted_openai.context.checkpointer
        read_from_the_database = saver._get_tuple_now  # type: ignore[attr-defined]
        reads: list[str] = []

        async def counted(config: Any) -> Any:
            reads.append(config["configurable"]["thread_id"])
            return await read_from_the_database(config)

        monkeypatch.setattr(saver, "_get_tuple_now", counted)
        await hosted_openai.work()
        assert reads == [key]  # the run's first execution: a new thread
        first_pause = await hosted_openai.get_run(run["id"])
        assert (await hosted_openai.answer(first_pause)).status_code == 200
        await hosted_openai.work()
        assert reads == [key]  # resumed in the process that paused it: from memory
        paused = await hosted_openai.get_run(run["id"])
        assert json.loads(paused["pending_tool_calls"][0]["arguments"]) == {"city": "Bandung"}
        # Another claim between the pause and the resume (the hand-off's lease lapsed, and a
        # worker took the run and let it go): the run may have gone on elsewhere, so the
        # resume reads the database.
        assert (await hosted_openai.answer(paused, '{"temp_c": 24}')).status_code == 200
        hosted_openai.clock.advance(hosted_openai.context.machine.limits.handoff_seconds + 1)
        [taken] = await hosted_openai.context.machine.claim("another-worker")
        await hosted_openai.context.machine.release_lease(taken, "another-worker")
        await hosted_openai.work()
        assert reads == [key, key]
        done = await hosted_openai.get_run(run["id"])
        assert done["status"] == "succeeded" and done["output"] == "Both are warm."
        # Each call saw the whole conversation, the resume from memory included.
        sent = [request["messages"] for request in fake_openai.requests()]
        assert [len(messages) for messages in sent] == [1, 3, 5]
        assert sent[2][:3] == sent[1] and sent[2][-1]["content"] == '{"temp_c": 24}'
        assert sent[1][-1]["role"] == "tool" and sent[1][-1]["content"] == '{"temp_c": 32}'

    async def test_a_checkpoint_kept_for_one_run_is_not_read_by_the_next_run_of_its_thread(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer, database_url: str
    ) -> None:
        # Two worker processes, each with its own saver: this one and `elsewhere`.
        async with open_checkpointer(DatabaseUrl.parse(database_url)) as other_saver:
            elsewhere = Worker(
                replace(
                    hosted_openai.context.run_context(),
                    checkpointer=other_saver,
                    graphs=CompiledGraphs(other_saver),
                ),
                concurrency=8,
                name="elsewhere",
            )

            async def work_elsewhere() -> None:
                while await elsewhere.fill_slots():
                    await elsewhere.drain()

            def lapse_handoff() -> None:
                """The resumed run's hand-off to the worker that paused it lapses."""
                hosted_openai.clock.advance(
                    hosted_openai.context.machine.limits.handoff_seconds + 1
                )

            fake_openai.script(
                [WEATHER_CALL, {"content": "first"}, WEATHER_CALL, {"content": "second"}]
            )
            first = await hosted_openai.new_run(model_id=OPENAI_MODEL)
            await hosted_openai.work()  # pauses here: this process keeps its checkpoint
            await hosted_openai.answer(await hosted_openai.get_run(first["id"]), '{"temp_c": 1}')
            lapse_handoff()
            await work_elsewhere()  # resumed and ended elsewhere: what is kept here is old
            assert (await hosted_openai.get_run(first["id"]))["output"] == "first"
            started = await hosted_openai.start_run(first["thread_id"], "And tomorrow?")
            second = started.json()
            await work_elsewhere()  # the second run pauses elsewhere, as the first did here
            await hosted_openai.answer(await hosted_openai.get_run(second["id"]), '{"temp_c": 2}')
            lapse_handoff()
            await hosted_openai.work()  # and resumes here, at the same pause and claim counts
            done = await hosted_openai.get_run(second["id"])
            assert done["status"] == "succeeded" and done["output"] == "second"
            last = fake_openai.requests()[-1]["messages"]
            assert [message["role"] for message in last] == [
                "user",
                "assistant",
                "tool",
                "assistant",
                "user",
                "assistant",
                "tool",
            ]
            assert last[-1]["content"] == '{"temp_c": 2}'


class TestTheAgentOfAClaim:
    async def test_an_unchanged_agent_is_not_read_again_and_an_edit_is_seen(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        fake_openai.script([{"content": "one"}, {"content": "two"}, {"content": "three"}])
        agent = await hosted_openai.create_agent(model_id=OPENAI_MODEL, system_prompt="First.")
        thread = await hosted_openai.create_thread(agent["id"])
        reads: list[str] = []

        def agent_read(statement: str) -> bool:
            return statement.lstrip().upper().startswith("SELECT") and "FROM agents" in statement

        async def one_run() -> None:
            response = await hosted_openai.start_run(thread["id"], "Hi")
            assert response.status_code == 202, response.text
            with statements_sent(agent_read) as seen:
                await hosted_openai.work()
            reads.extend(seen)
            assert (await hosted_openai.get_run(response.json()["id"]))["status"] == "succeeded"

        await one_run()
        assert len(reads) == 1  # the first claim of the agent reads it
        await one_run()
        assert len(reads) == 1  # the claim said it has not changed
        edited = await hosted_openai.client.patch(
            f"/v1/agents/{agent['id']}", json={"system_prompt": "Second."}
        )
        assert edited.status_code == 200, edited.text
        await one_run()
        assert len(reads) == 2
        prompts = [request["messages"][0]["content"] for request in fake_openai.requests()]
        assert prompts == ["First.", "First.", "Second."]


class TestFailures:
    async def test_step_limit(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run(max_steps=1)
        await hosted.work()
        await hosted.answer(await hosted.get_run(run["id"]))
        await hosted.work()
        failed = await hosted.get_run(run["id"])
        assert failed["status"] == "failed" and failed["error"] == "step_limit"
        assert failed["step_count"] == 1 and "output" not in failed

    async def test_loop(self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer) -> None:
        fake_openai.script([{**WEATHER_CALL, "repeat": True}])
        run = await hosted_openai.new_run(model_id=OPENAI_MODEL)
        for _ in range(2):
            await hosted_openai.work()
            await hosted_openai.answer(await hosted_openai.get_run(run["id"]))
        await hosted_openai.work()
        failed = await hosted_openai.get_run(run["id"])
        assert failed["status"] == "failed" and failed["error"] == "loop"

    async def test_the_same_call_twice_is_not_a_loop(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        fake_openai.script([WEATHER_CALL, WEATHER_CALL, {"content": "done"}])
        run = await hosted_openai.new_run(model_id=OPENAI_MODEL)
        for _ in range(2):
            await hosted_openai.work()
            await hosted_openai.answer(await hosted_openai.get_run(run["id"]))
        await hosted_openai.work()
        assert (await hosted_openai.get_run(run["id"]))["status"] == "succeeded"

    async def test_model_failure_message(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        fake_openai.script([{"error": {"status": 400, "message": "prompt is too long"}}])
        run = await hosted_openai.new_run(model_id=OPENAI_MODEL)
        await hosted_openai.work()
        failed = await hosted_openai.get_run(run["id"])
        assert failed["status"] == "failed" and "prompt is too long" in failed["error"]

    async def test_timeout_counts_queued_and_running_time(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        hosted.clock.advance(599)
        assert await hosted.reap() == 0
        hosted.clock.advance(2)
        assert await hosted.reap() == 1
        failed = await hosted.get_run(run["id"])
        assert failed["status"] == "failed" and failed["error"] == "timeout"
        await hosted.work()
        assert (await hosted.get_run(run["id"]))["status"] == "failed"

    async def test_time_waiting_for_tool_outputs_does_not_count(
        self, hosted: HostedHarness
    ) -> None:
        run = await hosted.new_run()
        hosted.clock.advance(500)
        await hosted.work()
        hosted.clock.advance(3000)
        assert await hosted.reap() == 0
        await hosted.answer(await hosted.get_run(run["id"]))
        hosted.clock.advance(99)
        assert await hosted.reap() == 0
        hosted.clock.advance(2)
        assert await hosted.reap() == 1
        assert (await hosted.get_run(run["id"]))["error"] == "timeout"

    async def test_expiry_after_an_hour_in_requires_action(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        await hosted.work()
        hosted.clock.advance(3599)
        assert await hosted.reap() == 0
        hosted.clock.advance(2)
        assert await hosted.reap() == 1
        expired = await hosted.get_run(run["id"])
        assert expired["status"] == "expired" and expired["pending_tool_calls"] is None
        late = await hosted.answer({**expired, "pending_tool_calls": [{"id": "x"}]})
        assert late.status_code == 409


class TestIllegalTransitions:
    async def test_ended_runs_cannot_move(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        cancelled = await hosted.client.post(f"/v1/runs/{run['id']}/cancel")
        assert cancelled.json()["status"] == "cancelled"
        record = await run_store.get_run(hosted.context.engine, run["id"])
        assert record is not None
        machine = hosted.context.machine
        assert await machine.cancel(run["id"]) is None
        assert await machine.fail(record, "x", sources=(RunStatus.QUEUED,)) is None
        assert await machine.claim("someone") == []
        assert (await hosted.get_run(run["id"]))["status"] == "cancelled"

    async def test_the_database_refuses_an_unknown_status(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        with pytest.raises(IntegrityError):
            async with hosted.context.engine.begin() as connection:
                await connection.execute(
                    update(runs).where(runs.c.id == run["id"]).values(status="paused")
                )

    async def test_two_active_runs_on_one_thread_cannot_be_stored(
        self, hosted: HostedHarness
    ) -> None:
        run = await hosted.new_run()
        with pytest.raises(IntegrityError):
            async with hosted.context.engine.begin() as connection:
                columns = [column.name for column in runs.columns]
                copied = ["'run_copy'" if name == "id" else name for name in columns]
                copied = ["NULL" if name == "idempotency_key" else name for name in copied]
                await connection.execute(
                    text(
                        f"INSERT INTO runs ({', '.join(columns)}) "
                        f"SELECT {', '.join(copied)} FROM runs WHERE id = :id"
                    ),
                    {"id": run["id"]},
                )


class TestRaces:
    async def test_fifty_concurrent_requests_with_one_key_make_one_run(
        self, hosted: HostedHarness
    ) -> None:
        agent = await hosted.create_agent()
        thread = await hosted.create_thread(agent["id"])
        responses = await asyncio.gather(
            *(hosted.start_run(thread["id"], key="same-key") for _ in range(50))
        )
        assert {response.status_code for response in responses} == {202}
        assert len({response.json()["id"] for response in responses}) == 1
        assert len(await statuses(hosted)) == 1

    async def test_twenty_concurrent_tool_outputs_one_accepted(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        await hosted.work()
        paused = await hosted.get_run(run["id"])
        responses = await asyncio.gather(*(hosted.answer(paused, f"out {i}") for i in range(20)))
        codes = sorted(response.status_code for response in responses)
        assert codes == [200] + [409] * 19
        assert all(
            r.json()["error"]["code"] == "run_not_waiting"
            for r in responses
            if r.status_code == 409
        )
        await hosted.work()
        done = await hosted.get_run(run["id"])
        accepted = next(r for r in responses if r.status_code == 200)
        assert done["status"] == "succeeded"
        assert done["output"] == demo_answer("get_weather", f"out {responses.index(accepted)}")

    async def test_incomplete_tool_outputs_change_nothing(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        await hosted.work()
        paused = await hosted.get_run(run["id"])
        call_id = paused["pending_tool_calls"][0]["id"]
        for outputs in (
            [{"tool_call_id": "nope", "output": "x"}],
            [{"tool_call_id": call_id, "output": "x"}, {"tool_call_id": call_id, "output": "y"}],
            [{"tool_call_id": call_id, "output": "x"}, {"tool_call_id": "extra", "output": "y"}],
        ):
            response = await hosted.client.post(
                f"/v1/runs/{run['id']}/tool_outputs", json={"outputs": outputs}
            )
            assert response.status_code == 400
            assert response.json()["error"]["code"] == "invalid_tool_outputs"
            assert await hosted.get_run(run["id"]) == paused
        assert (await hosted.answer(paused)).status_code == 200

    async def test_one_claim_takes_several_runs_oldest_first(self, hosted: HostedHarness) -> None:
        first, second, third = [await hosted.new_run() for _ in range(3)]
        machine = hosted.context.machine
        taken = await machine.claim("batch", 2)
        assert [run.id for run in taken] == [first["id"], second["id"]]
        assert all(run.lease_owner == "batch" and run.status == "running" for run in taken)
        # Fewer than asked for: nothing else is waiting.
        assert [run.id for run in await machine.claim("batch", 5)] == [third["id"]]
        assert await machine.claim("other", 5) == []

    @pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
    async def test_only_a_claim_that_starts_a_run_waits_for_the_disk(
        self, hosted: HostedHarness
    ) -> None:
        # A resumed run's claim shows nobody anything (the step's write, synced, takes it to
        # disk with its own COMMIT); the claim of a queued run appends the run's `running`
        # event, which streams show at once.
        levels: list[int] = []
        changes = [0]

        def commit(connection: Any) -> None:
            # The `synchronous` of each COMMIT that writes something (a claim that found
            # nothing to take has nothing to sync).
            raw = connection.connection.driver_connection
            if raw.total_changes != changes[0]:
                changes[0] = raw.total_changes
                levels.append(raw.execute("PRAGMA synchronous").fetchone()[0])

        writer = hosted.context.engine.writer.engine
        event.listen(writer, "commit", commit)
        try:
            run = await hosted.new_run()
            levels.clear()
            await hosted.work()  # claims the queued run, then records its pause
            assert levels and set(levels) == {2}  # FULL
            paused = await hosted.get_run(run["id"])
            assert (await hosted.answer(paused)).status_code == 200
            levels.clear()
            # The hand-off to the worker that paused it lapses; another worker claims it.
            hosted.clock.advance(hosted.context.machine.limits.handoff_seconds + 1)
            [resumed] = await hosted.context.machine.claim("another-worker")
            # NORMAL, and counted once more (once by the hand-off, once by this claim).
            assert levels == [1] and resumed.attempts == 3
            log = await events_after(hosted.context.engine, run["id"], 0)
            running = [item for item in log if item.data.get("status") == "running"]
            assert len(running) == 2  # its start and its resume, once each
        finally:
            event.remove(writer, "commit", commit)

    async def test_a_claim_tells_the_other_processes(
        self, hosted: HostedHarness, database_url: str
    ) -> None:
        # Another process's events, on the same database (PostgreSQL: the claim's own
        # statement sends the NOTIFY; SQLite: the writer's thread, once the claim committed).
        other = run_events(DatabaseUrl.parse(database_url))
        await other.start()
        try:
            run = await hosted.new_run()
            machine = hosted.context.machine
            status, lease = other.watch(run["id"]), other.watch(run["id"], leases=True)
            async with status as status_changed, lease as lease_moved:
                [claimed] = await machine.claim("first")
                # queued → running: a status change, which every watcher hears of.
                await asyncio.wait_for(status_changed.wait(), 10)
                await asyncio.wait_for(lease_moved.wait(), 10)
                status_changed.clear()
                lease_moved.clear()
                hosted.clock.advance(machine.limits.lease_seconds + 1)
                [taken_back] = await machine.claim("second")
                assert taken_back.id == claimed.id and taken_back.attempts == 2
                # Taken back: only the lease moved.
                await asyncio.wait_for(lease_moved.wait(), 10)
                assert not status_changed.is_set()
        finally:
            await other.stop()

    async def test_an_expired_lease_lets_another_worker_finish_the_run(
        self, hosted: HostedHarness
    ) -> None:
        run = await hosted.new_run()
        machine = hosted.context.machine
        [claimed] = await machine.claim("worker-that-dies")
        assert claimed.id == run["id"]
        assert await machine.claim("impatient") == []
        hosted.clock.advance(machine.limits.lease_seconds + 1)
        await hosted.work()
        paused = await hosted.get_run(run["id"])
        assert paused["status"] == "requires_action"
        record = await run_store.get_run(hosted.context.engine, run["id"])
        assert record is not None and record.attempts == 2
        assert await machine.succeed(claimed, "worker-that-dies", "late", 1) is None

    async def test_tool_outputs_hand_the_run_to_the_worker_that_paused_it(
        self, hosted: HostedHarness
    ) -> None:
        run = await hosted.new_run()
        worker = hosted.worker("pausing-worker")
        idle = hosted.worker("idle-worker")
        await worker.fill_slots()
        await worker.drain()
        paused = await hosted.get_run(run["id"])
        assert paused["status"] == "requires_action"
        record = await run_store.get_run(hosted.context.engine, run["id"])
        assert record is not None and record.last_worker == "pausing-worker"
        assert (await hosted.answer(paused)).status_code == 200
        # Leased to it in the outputs' own write, for the hand-off's short lease, and counted
        # as an attempt as a claim would count it.
        resumed = await run_store.get_run(hosted.context.engine, run["id"])
        assert resumed is not None and resumed.lease_owner == "pausing-worker"
        assert resumed.attempts == record.attempts + 1
        handoff = timedelta(seconds=hosted.context.machine.limits.handoff_seconds)
        assert resumed.lease_expires_at == hosted.clock.now() + handoff
        # No other worker can claim it meanwhile; the one it was handed to takes it up.
        assert await idle.fill_slots() == 0
        assert await worker.fill_slots(claim=False) == 1
        await worker.drain()
        assert (await hosted.get_run(run["id"]))["status"] == "succeeded"


class TestCancel:
    async def test_cancel_while_queued(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        response = await hosted.client.post(f"/v1/runs/{run['id']}/cancel")
        assert response.status_code == 200 and response.json()["status"] == "cancelled"
        await hosted.work()
        assert (await hosted.get_run(run["id"]))["status"] == "cancelled"

    async def test_cancel_in_requires_action(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        await hosted.work()
        paused = await hosted.get_run(run["id"])
        cancelled = (await hosted.client.post(f"/v1/runs/{run['id']}/cancel")).json()
        assert cancelled["status"] == "cancelled" and cancelled["pending_tool_calls"] is None
        assert (await hosted.answer(paused)).status_code == 409

    async def test_cancel_of_an_ended_run_returns_it_unchanged(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        await hosted.client.post(f"/v1/runs/{run['id']}/cancel")
        before = await hosted.get_run(run["id"])
        hosted.clock.advance(10)
        again = await hosted.client.post(f"/v1/runs/{run['id']}/cancel")
        assert again.status_code == 200 and again.json() == before

    async def test_cancel_during_a_paid_model_call_ends_the_run_and_charges_the_call(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        # The provider bills a call it was sent, so the call in flight is let finish: the
        # run is cancelled at once, and the call is charged to it when it returns.
        fake_openai.script([{"content": "too late", "delay": 2}])
        run = await hosted_openai.new_run(model_id=OPENAI_MODEL)
        worker = hosted_openai.worker()
        assert await worker.fill_slots() == 1
        await _until(lambda: len(fake_openai.requests()) == 1)
        response = await hosted_openai.client.post(f"/v1/runs/{run['id']}/cancel")
        assert response.json()["status"] == "cancelled"
        await asyncio.wait_for(worker.drain(), timeout=20)
        final = await hosted_openai.get_run(run["id"])
        assert final["status"] == "cancelled" and "output" not in final
        charges = await charges_of_run(hosted_openai.context.engine, run["id"])
        assert [c["step"] for c in charges] == [1]
        assert Decimal(str(final["cost_rupiah"])) == charges[0]["cost_rupiah"] > 0
        account = (await hosted_openai.client.get("/v1/account")).json()
        assert account["held_rupiah"] == 0
        assert Decimal(str(account["balance_rupiah"])) == 1_000_000 - charges[0]["cost_rupiah"]
        transcript = await hosted_openai.client.get(f"/v1/threads/{run['thread_id']}/messages")
        assert "too late" not in transcript.text

    async def test_the_thread_is_usable_after_a_cancelled_pause(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        fake_openai.script([WEATHER_CALL, {"content": "Hello again."}])
        run = await hosted_openai.new_run(model_id=OPENAI_MODEL)
        await hosted_openai.work()
        await hosted_openai.client.post(f"/v1/runs/{run['id']}/cancel")
        second = await hosted_openai.start_run(run["thread_id"], "hello?")
        assert second.status_code == 202
        await hosted_openai.work()
        done = await hosted_openai.get_run(second.json()["id"])
        assert done["status"] == "succeeded" and done["output"] == "Hello again."
        history = fake_openai.requests()[-1]["messages"]
        assert [m["role"] for m in history] == ["user", "assistant", "tool", "user"]
        assert history[2]["content"].startswith("This tool call was never answered")


class TestWaiting:
    async def test_wait_returns_when_the_status_changes(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        waiter = asyncio.create_task(hosted.client.get(f"/v1/runs/{run['id']}?wait=30"))
        await _until(lambda: _has_watcher(hosted, run["id"]))
        await hosted.client.post(f"/v1/runs/{run['id']}/cancel")
        response = await asyncio.wait_for(waiter, timeout=10)
        assert response.json()["status"] == "cancelled"

    async def test_wait_follows_a_run_until_it_needs_the_caller(
        self, hosted: HostedHarness
    ) -> None:
        run = await hosted.new_run()
        waiter = asyncio.create_task(hosted.client.get(f"/v1/runs/{run['id']}?wait=30"))
        await _until(lambda: _has_watcher(hosted, run["id"]))
        await hosted.work()  # queued, running, then requires_action: one answer, at the pause
        paused = (await asyncio.wait_for(waiter, timeout=10)).json()
        assert paused["status"] == "requires_action" and paused["pending_tool_calls"]

    async def test_a_run_already_waiting_for_the_caller_answers_at_once(
        self, hosted: HostedHarness
    ) -> None:
        # The race a fast model creates: the run is back in requires_action before the
        # client's wait arrives. Nothing will change until the client acts, so no waiting.
        run = await hosted.new_run()
        await hosted.work()
        response = await asyncio.wait_for(
            hosted.client.get(f"/v1/runs/{run['id']}?wait=30"), timeout=10
        )
        assert response.json()["status"] == "requires_action"

    async def test_wait_gives_up_at_the_deadline(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        response = await hosted.client.get(f"/v1/runs/{run['id']}?wait=0.2")
        assert response.status_code == 200 and response.json()["status"] == "queued"

    async def test_wait_is_at_most_thirty_seconds(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        response = await hosted.client.get(f"/v1/runs/{run['id']}?wait=31")
        assert response.status_code == 400

    async def test_a_terminal_run_answers_at_once(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        await hosted.client.post(f"/v1/runs/{run['id']}/cancel")
        response = await asyncio.wait_for(
            hosted.client.get(f"/v1/runs/{run['id']}?wait=30"), timeout=10
        )
        assert response.json()["status"] == "cancelled"


async def test_a_run_resumed_before_its_execution_has_ended_is_executed_again(
    hosted: HostedHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fast client's outputs can come back, and this worker claim the run again, while the
    # execution that paused it is still winding down. The new execution starts once that one
    # has ended; the run must not wait for the lease the claim took to lapse.
    run = await hosted.new_run()
    worker = hosted.worker()
    execute = RunExecution.execute
    answered: list[int] = []

    async def pause_then_answer_at_once(execution: RunExecution) -> None:
        await execute(execution)
        if not answered:
            paused = await hosted.get_run(execution.run.id)
            assert paused["status"] == "requires_action", paused
            answered.append((await hosted.answer(paused)).status_code)
            answered.append(await worker.fill_slots())  # this execution has not ended yet

    monkeypatch.setattr(RunExecution, "execute", pause_then_answer_at_once)
    assert await worker.fill_slots() == 1
    await asyncio.wait_for(worker.drain(), timeout=20)
    assert answered == [200, 1]
    done = await hosted.get_run(run["id"])
    assert done["status"] == "succeeded", done


class TestCreatingWithAWait:
    async def test_a_run_created_with_a_wait_answers_at_its_first_pause(
        self, hosted: HostedHarness
    ) -> None:
        agent = await hosted.create_agent()
        thread = await hosted.create_thread(agent["id"])
        worker = asyncio.create_task(hosted.worker().run_forever())
        try:
            response = await asyncio.wait_for(
                hosted.client.post(
                    f"/v1/threads/{thread['id']}/runs?wait=30", json={"input": "Weather?"}
                ),
                timeout=20,
            )
        finally:
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)
        assert response.status_code == 202, response.text
        paused = response.json()
        assert paused["status"] == "requires_action" and paused["pending_tool_calls"]
        assert paused == await hosted.get_run(paused["id"])

    @pytest.mark.parametrize(
        ("query", "body"),
        [
            pytest.param("wait=31", {}, id="too-long"),
            pytest.param("wait=-1", {}, id="negative"),
            pytest.param("wait=5", {"stream": True}, id="with-a-stream"),
        ],
    )
    async def test_a_create_with_a_wait_it_cannot_give_starts_no_run(
        self, hosted: HostedHarness, query: str, body: dict[str, Any]
    ) -> None:
        agent = await hosted.create_agent()
        thread = await hosted.create_thread(agent["id"])
        # A deadline: a stream started by mistake would never end (no worker runs here).
        response = await asyncio.wait_for(
            hosted.client.post(
                f"/v1/threads/{thread['id']}/runs?{query}", json={"input": "Weather?", **body}
            ),
            timeout=10,
        )
        assert response.status_code == 400, response.text
        assert "wait" in response.json()["error"]["message"]
        runs = await hosted.client.get(f"/v1/threads/{thread['id']}/runs")
        assert runs.json()["data"] == []

    async def test_the_service_checks_the_wait_before_it_creates_the_run(
        self, hosted: HostedHarness
    ) -> None:
        agent = await hosted.create_agent()
        thread = await hosted.create_thread(agent["id"])
        with pytest.raises(InvalidRequestError, match="wait must be between 0 and 30"):
            await hosted.context.hosted.create_run(
                hosted.account_id, thread["id"], [{"role": "user", "content": "hi"}], None, 31
            )
        runs = await hosted.client.get(f"/v1/threads/{thread['id']}/runs")
        assert runs.json()["data"] == []


def _has_watcher(hosted: HostedHarness, run_id: str) -> bool:
    events: Any = hosted.context.machine.events
    return run_id in events._watchers


async def _until(condition: Callable[[], bool], timeout: float = 20) -> None:
    """Poll a condition with a deadline (the event it stands for has no hook)."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


class TestResilience:
    async def test_a_worker_survives_a_failing_claim(
        self, hosted: HostedHarness, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        run = await hosted.new_run()
        worker = hosted.worker()
        real_claim = worker.machine.claim
        calls = []

        async def flaky_claim(name: str, limit: int = 1) -> Any:
            calls.append(name)
            if len(calls) == 1:
                raise ConnectionError("database restarting")
            return await real_claim(name, limit)

        monkeypatch.setattr(worker.machine, "claim", flaky_claim)
        task = asyncio.create_task(worker.run_forever())
        try:
            await hosted.context.machine.events.announce_work()
            async with asyncio.timeout(20):
                while (await hosted.get_run(run["id"]))["status"] != "requires_action":
                    await asyncio.sleep(0.01)  # polling with a deadline
            assert len(calls) >= 2
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def test_a_worker_that_takes_back_its_own_run_does_not_run_it_twice(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        # The lease lapses while the worker is in a model call (the database was down and no
        # renewal got through): its next claim takes the run again, under the same name.
        fake_openai.script([WEATHER_CALL, {"content": "Cerah.", "delay": 60}])
        run = await hosted_openai.new_run(model_id=OPENAI_MODEL)
        await hosted_openai.work()
        await hosted_openai.answer(await hosted_openai.get_run(run["id"]))
        worker = hosted_openai.default_worker
        assert worker is not None
        assert await worker.fill_slots() == 1  # handed back to it by the outputs' write
        await _until(lambda: len(fake_openai.requests()) == 2)
        hosted_openai.clock.advance(hosted_openai.context.machine.limits.lease_seconds + 1)
        assert await worker.fill_slots() == 0  # taken back, not started again
        async with hosted_openai.context.engine.connect() as connection:
            attempts = await connection.scalar(
                select(runs.c.attempts).where(runs.c.id == run["id"])
            )
        assert attempts == 3 and len(worker._running) == 1
        await worker.stop()


class TestHandOff:
    """A resumed run is leased to the worker that paused it in the tool outputs' own write
    (`RunMachine.submit_tool_outputs`), for a short lease that the worker renews once it has
    taken the run up, and that lapses to any worker's claim otherwise."""

    async def test_a_run_handed_to_a_worker_that_never_takes_it_up_goes_to_another(
        self, hosted: HostedHarness
    ) -> None:
        run = await hosted.new_run()
        await hosted.work()
        assert (await hosted.answer(await hosted.get_run(run["id"]))).status_code == 200
        other = hosted.worker("other-worker")
        assert await other.fill_slots() == 0  # leased to the worker that paused it
        hosted.clock.advance(hosted.context.machine.limits.handoff_seconds + 1)
        assert await other.fill_slots() == 1
        await other.drain()
        assert (await hosted.get_run(run["id"]))["status"] == "succeeded"
        # The worker it was handed to finds it gone from its lease: it starts nothing.
        assert hosted.default_worker is not None
        assert await hosted.default_worker.fill_slots(claim=False) == 0

    async def test_a_serving_worker_takes_a_handed_run_up_without_a_claim(
        self, hosted: HostedHarness, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(worker_module, "IDLE_POLL_SECONDS", 3600.0)  # no poll meanwhile
        worker = Worker(hosted.context.run_context(), concurrency=8, name="serving-worker")
        hosted.workers.append(worker)
        serving = asyncio.create_task(worker.run_forever())
        try:
            run = await hosted.new_run()  # announced to every worker: claimed
            paused = (await hosted.client.get(f"/v1/runs/{run['id']}?wait=10")).json()
            assert paused["status"] == "requires_action"
            with statements_sent(lambda statement: "runs.attempts +" in statement) as claims:
                assert (await hosted.answer(paused)).status_code == 200
                done = (await hosted.client.get(f"/v1/runs/{run['id']}?wait=10")).json()
            assert done["status"] == "succeeded"
            assert claims == []
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)

    async def test_a_worker_kept_busy_by_handed_runs_still_polls_on_time(
        self, hosted: HostedHarness, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # A handed run alone needs no claim; but once the poll's time has come since the last
        # claim (a lease may have lapsed, a wake-up may have been lost), the wake-up claims too,
        # however often handed runs keep waking the worker. The poll's time is made long, so
        # that a slow machine's claim does not reach it before the first wake-up.
        monkeypatch.setattr(worker_module, "IDLE_POLL_SECONDS", 3600.0)
        worker = hosted.worker("busy-worker")
        await hosted.context.machine.events.wait_for_work(0)  # a new listener's first wake-up
        await worker.fill_slots()  # claims (nothing): the poll's clock starts
        await hosted.context.machine.events.wait_for_work(0)  # work announced before: claimed
        worker.handed.hand("run_handed", None)
        assert await worker._wait_for_work() is False
        worker._claimed_at -= worker_module.IDLE_POLL_SECONDS  # as if that long ago
        worker.handed.hand("run_handed_later", None)
        assert await worker._wait_for_work() is True

    async def test_what_is_heard_of_a_run_during_its_resume_comes_after_the_resume(
        self, hosted: HostedHarness, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        run = await hosted.new_run()
        await hosted.work()
        paused = await hosted.get_run(run["id"])
        events = hosted.context.machine.events
        transition = run_store.transition_run

        async def heard_meanwhile(*args: Any, **kwargs: Any) -> Any:
            moved = await transition(*args, **kwargs)
            # The worker the commit woke streams its call before this process delivered it.
            events.hear(f'~{run["id"]} {{"delta": "early"}}')  # type: ignore[attr-defined]
            return moved

        monkeypatch.setattr(run_store, "transition_run", heard_meanwhile)
        async with events.follow(run["id"]) as follower:
            assert follower.take() == [None]
            assert (await hosted.answer(paused)).status_code == 200
            resumed, early = follower.take()
        # The resume's status change (its event, carried), then the delta.
        assert isinstance(resumed, list) and resumed[0].data["status"] == "running"
        assert early == {"delta": "early"}

    async def test_a_handed_run_is_taken_up_as_its_notice_carried_it_while_its_lease_lasts(
        self, hosted: HostedHarness
    ) -> None:
        worker = hosted.worker("pausing-worker")
        first, second = await hosted.new_run(), await hosted.new_run()
        assert await worker.fill_slots() == 2
        await worker.drain()
        paused = [await hosted.get_run(run["id"]) for run in (first, second)]
        for run in paused:
            assert (await hosted.answer(run)).status_code == 200
        [(first_id, carried), _] = worker.handed.waiting
        # The run as the resume's write left it, with what a claim reads besides its row.
        assert carried is not None and first_id == first["id"]
        assert (carried.status, carried.attempts, carried.lease_owner) == (
            "running",
            2,
            "pausing-worker",
        )
        call = paused[0]["pending_tool_calls"][0]["id"]
        assert carried.tool_outputs == {call: '{"temp_c": 32}'}
        assert carried.input == [{"role": "user", "content": "What is the weather in Jakarta?"}]
        # All of it, as the hand-off's read would find it.
        assert [carried] == await run_store.handed_runs(hosted.context.machine.engine, [first_id])
        with statements_sent(lambda statement: "AS account_tier" in statement) as reads:
            assert await worker.fill_slots(claim=False) == 2
        await worker.drain()
        assert reads == []
        for run in (first, second):
            assert (await hosted.get_run(run["id"]))["status"] == "succeeded"

    async def test_handed_runs_not_carried_or_past_their_lease_are_read_in_one_go(
        self, hosted: HostedHarness, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        worker = hosted.worker("pausing-worker")
        # An input too large for a notice: its hand-off does not carry the run.
        thread = await hosted.create_thread((await hosted.create_agent())["id"])
        question = "What is the weather in Jakarta? " + "x" * MAX_NOTICE_BYTES
        started = await hosted.start_run(thread["id"], question)
        large, small = started.json(), await hosted.new_run()
        assert await worker.fill_slots() == 2
        await worker.drain()
        for run in (large, small):
            assert (await hosted.answer(await hosted.get_run(run["id"]))).status_code == 200
        assert [run is None for _, run in worker.handed.waiting] == [True, False]
        # Past the hand-off's lease another worker may have claimed the carried one.
        hosted.clock.advance(hosted.context.machine.limits.handoff_seconds)
        machine = hosted.context.machine
        read: list[list[str]] = []

        async def handed_runs(run_ids: Sequence[str]) -> list[RunRecord]:
            read.append(list(run_ids))
            return await run_store.handed_runs(machine.engine, run_ids)

        monkeypatch.setattr(machine, "handed_runs", handed_runs)
        assert await worker.fill_slots(claim=False) == 2
        await worker.drain()
        assert read == [[large["id"], small["id"]]]
        for run in (large, small):
            assert (await hosted.get_run(run["id"]))["status"] == "succeeded"

    async def test_a_worker_without_room_takes_a_handed_run_up_once_it_has(
        self, hosted: HostedHarness
    ) -> None:
        worker = hosted.worker("pausing-worker")
        run = await hosted.new_run()
        await worker.fill_slots()
        await worker.drain()
        worker.concurrency = 0  # as full as it gets
        assert (await hosted.answer(await hosted.get_run(run["id"]))).status_code == 200
        assert await worker.fill_slots() == 0
        worker.concurrency = 1  # a slot free again
        assert await worker.fill_slots(claim=False) == 1
        await worker.drain()
        assert (await hosted.get_run(run["id"]))["status"] == "succeeded"

    async def test_a_lease_shorter_than_the_handoff_bounds_it(self, hosted: HostedHarness) -> None:
        machine = hosted.context.machine
        machine.limits = replace(machine.limits, lease_seconds=2.0)
        run = await hosted.new_run()
        await hosted.work()
        assert (await hosted.answer(await hosted.get_run(run["id"]))).status_code == 200
        handed = await run_store.get_run(hosted.context.engine, run["id"])
        assert handed is not None
        assert handed.lease_expires_at == hosted.clock.now() + timedelta(seconds=2)

    async def test_a_handed_run_renews_its_short_lease_before_it_lapses(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        fake_openai.script([WEATHER_CALL, {"content": "late", "delay": 60}])
        machine = hosted_openai.context.machine
        machine.limits = replace(machine.limits, handoff_seconds=0.2)
        engine, clock = hosted_openai.context.engine, hosted_openai.clock
        run = await hosted_openai.new_run(model_id=OPENAI_MODEL)
        await hosted_openai.work()
        await hosted_openai.answer(await hosted_openai.get_run(run["id"]))
        handed = await run_store.get_run(engine, run["id"])
        assert handed is not None
        assert handed.lease_expires_at == clock.now() + timedelta(seconds=0.2)
        worker = hosted_openai.default_worker
        assert worker is not None and await worker.fill_slots(claim=False) == 1
        # Renewed during the model call, long before the usual third of a lease.
        renewed = clock.now() + timedelta(seconds=machine.limits.lease_seconds)
        async with asyncio.timeout(machine.limits.lease_seconds / 6):
            while (found := await run_store.get_run(engine, run["id"])) is None or (
                found.lease_expires_at != renewed
            ):
                await asyncio.sleep(0.01)
        await worker.stop()


class TestLargeInputs:
    async def test_a_large_input_is_written_in_short_transactions(
        self, hosted: HostedHarness
    ) -> None:
        rows_per_statement: list[int] = []

        def count(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
            # A part of a joined statement (`store.joined`), its rows as one JSON array: on
            # PostgreSQL a parameter of the statement, on SQLite of the part's row of the view.
            if "INSERT INTO thread_messages" in statement:
                rows_per_statement.append(len(json.loads(parameters["transcript_rows"])))
            elif "INSERT INTO juru_parts" in statement:
                bodies = [json.loads(value) for value in parameters if value.startswith("{")]
                rows_per_statement.extend(
                    len(body["transcript_rows"]) for body in bodies if "transcript_rows" in body
                )

        agent = await hosted.create_agent()
        thread = await hosted.create_thread(agent["id"])
        size = 3 * INPUT_WRITE_CHUNK + 7
        messages = [{"role": "user", "content": f"message {i}"} for i in range(size)]
        run = (await hosted.start_run(thread["id"], messages)).json()
        # Every engine: on SQLite the writes run on the writer thread's own.
        event.listen(Engine, "before_cursor_execute", count)
        try:
            await hosted.work()
        finally:
            event.remove(Engine, "before_cursor_execute", count)
        assert (await hosted.get_run(run["id"]))["status"] == "succeeded"
        # Written ahead in chunks (each its own transaction), then the step's own write.
        assert max(rows_per_statement) == INPUT_WRITE_CHUNK
        assert sum(rows_per_statement) == size + 1
        tail = await list_messages(hosted.context.engine, thread["id"], 10, after=size - 3)
        assert [(m.position, m.role) for m in tail.items] == [
            (size - 2, "user"),
            (size - 1, "user"),
            (size, "assistant"),
        ]
        assert [m.content for m in tail.items[:2]] == [f"message {size - 2}", f"message {size - 1}"]
