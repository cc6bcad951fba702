"""Agents calling agents as tools (`agent_tools`): validation, child runs, results, costs,
cancellation, depth, and a child's client tool pausing its parent. Workers are driven one run
at a time, so the fake model's script is consumed in a known order."""

from __future__ import annotations

import dataclasses
import json
from decimal import Decimal
from typing import Any

from sqlalchemy import delete, update

from juru.engine.worker import Worker
from juru.store.run_log import events_after
from juru.store.tables import runs, threads
from juru.store.usage import charges_of_run
from tests.support.fake_openai import FakeOpenAIServer
from tests.support.hosted import WEATHER_TOOL, HostedHarness, api_error

MODEL = "openai/gpt-4o-mini"


def call(tool: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": tool, "arguments": arguments}]}


async def agent(hosted: HostedHarness, name: str, **fields: Any) -> str:
    created = await hosted.create_agent(**{"name": name, "model_id": MODEL, "tools": [], **fields})
    agent_id: str = created["id"]
    return agent_id


def calls_of(*tools: tuple[str, str]) -> list[dict[str, str]]:
    return [{"agent_id": agent_id, "name": name} for name, agent_id in tools]


async def start(hosted: HostedHarness, agent_id: str, text: str = "Go") -> dict[str, Any]:
    thread = await hosted.create_thread(agent_id)
    response = await hosted.start_run(thread["id"], text)
    assert response.status_code == 202, response.text
    run: dict[str, Any] = response.json()
    return run


async def work_one_at_a_time(hosted: HostedHarness, max_depth: int | None = None) -> int:
    """Execute runs one at a time (oldest claimable first) until none is left; how many."""
    context = hosted.context.run_context()
    if max_depth is not None:
        context = dataclasses.replace(context, max_agent_depth=max_depth)
    worker = Worker(context, concurrency=1, name="one-at-a-time")
    hosted.workers.append(worker)
    executed = 0
    while await worker.fill_slots():
        await worker.drain()
        executed += 1
    return executed


async def children(hosted: HostedHarness, run_id: str) -> list[dict[str, Any]]:
    response = await hosted.client.get("/v1/runs", params={"parent_run_id": run_id})
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["data"]
    return sorted(found, key=lambda child: str(child["id"]))  # the list is newest first


def tool_results(request: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m["role"] == "tool"}


async def ledger_total(hosted: HostedHarness, *run_ids: str) -> Decimal:
    total = Decimal(0)
    for run_id in run_ids:
        total += sum(
            (
                Decimal(c["cost_rupiah"])
                for c in await charges_of_run(hosted.context.engine, run_id)
            ),
            Decimal(0),
        )
    return total


class TestValidation:
    async def test_agent_tools_are_shown_and_checked(self, hosted: HostedHarness) -> None:
        helper = await agent(hosted, "Helper")
        caller = await hosted.create_agent(
            name="Caller", agent_tools=[{"agent_id": helper, "name": "ask_helper"}]
        )
        assert caller["agent_tools"] == [
            {"agent_id": helper, "name": "ask_helper", "description": ""}
        ]
        assert (await hosted.client.get(f"/v1/agents/{helper}")).json()["agent_tools"] == []
        bad = [
            (
                [{"agent_id": "agt_00000000000000000000abcd", "name": "x"}],
                "agent_tools[0].agent_id",
            ),
            ([{"agent_id": helper, "name": "get_weather"}], "agent_tools[0].name"),
            (
                [{"agent_id": helper, "name": "a"}, {"agent_id": helper, "name": "a"}],
                "agent_tools[1].name",
            ),
        ]
        for agent_tools, field in bad:
            response = await hosted.client.post(
                "/v1/agents",
                json={
                    "name": "Bad",
                    "model_id": "juru/demo",
                    "tools": [WEATHER_TOOL],
                    "agent_tools": agent_tools,
                },
            )
            assert field in api_error(response, 400, "invalid_request")

    async def test_another_accounts_agent_cannot_be_called(self, hosted: HostedHarness) -> None:
        hosted.act_as(await hosted.new_account("other"))
        theirs = await agent(hosted, "Theirs")
        hosted.act_as(None)
        response = await hosted.client.post(
            "/v1/agents",
            json={
                "name": "Mine",
                "model_id": "juru/demo",
                "agent_tools": [{"agent_id": theirs, "name": "theirs"}],
            },
        )
        assert "agent_tools[0].agent_id" in api_error(response, 400, "invalid_request")

    async def test_cycles_are_refused(self, hosted: HostedHarness) -> None:
        a = await agent(hosted, "A")
        b = await agent(hosted, "B", agent_tools=calls_of(("call_a", a)))
        c = await agent(hosted, "C", agent_tools=calls_of(("call_b", b)))
        for target, tools in ((a, calls_of(("call_c", c))), (a, calls_of(("me", a)))):
            response = await hosted.client.patch(
                f"/v1/agents/{target}", json={"agent_tools": tools}
            )
            message = api_error(response, 400, "agent_cycle")
            assert message.startswith("agent_tools:") and a in message
        assert (await hosted.client.get(f"/v1/agents/{a}")).json()["agent_tools"] == []
        # A diamond is no cycle: D calls A directly and through B.
        d = await agent(hosted, "D", agent_tools=calls_of(("call_a", a), ("call_b", b)))
        response = await hosted.client.patch(
            f"/v1/agents/{c}", json={"agent_tools": calls_of(("call_b", b), ("call_d", d))}
        )
        assert response.status_code == 200, response.text


class TestChildRuns:
    async def test_a_parent_with_two_child_agents(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        hosted = hosted_openai
        researcher = await agent(hosted, "Researcher")
        writer = await agent(hosted, "Writer")
        boss = await agent(
            hosted, "Boss", agent_tools=calls_of(("research", researcher), ("write", writer))
        )
        both = {
            "tool_calls": [
                {"id": "call_r", "name": "research", "arguments": {"input": "find rain data"}},
                {"id": "call_w", "name": "write", "arguments": {"input": "draft a note"}},
            ]
        }
        fake_openai.script(
            [both, {"content": "Rain: 30 mm"}, {"content": "Note drafted"}, {"content": "Done"}]
        )
        run = await start(hosted, boss)
        assert await work_one_at_a_time(hosted) == 4  # boss, two children, boss again
        done = await hosted.get_run(run["id"])
        assert done["status"] == "succeeded" and done["output"] == "Done"
        assert done["parent_run_id"] is None and done["step_count"] == 2
        found = await children(hosted, run["id"])
        assert [(c["agent_id"], c["status"], c["output"]) for c in found] == [
            (researcher, "succeeded", "Rain: 30 mm"),
            (writer, "succeeded", "Note drafted"),
        ]
        assert {c["parent_run_id"] for c in found} == {run["id"]}
        assert len({c["thread_id"] for c in found} | {run["thread_id"]}) == 3
        requests = fake_openai.requests()
        assert requests[1]["messages"][-1] == {"role": "user", "content": "find rain data"}
        assert tool_results(requests[3]) == {"call_r": "Rain: 30 mm", "call_w": "Note drafted"}
        # The parent's cost is its own charges and its children's, as the ledger has them.
        child_ids = [c["id"] for c in found]
        own = await ledger_total(hosted, run["id"])
        assert own > 0 and all(Decimal(str(c["cost_rupiah"])) > 0 for c in found)
        assert Decimal(str(done["cost_rupiah"])) == own + await ledger_total(hosted, *child_ids)
        # The children's steps are in the parent's log, marked with their run and depth 1.
        log = await events_after(hosted.context.engine, run["id"], 0)
        forwarded = [e.data for e in log if e.data.get("depth") == 1]
        assert {e["run_id"] for e in forwarded} == set(child_ids)
        texts = [e.get("content") for e in forwarded if e.get("role") == "assistant"]
        assert texts == ["Rain: 30 mm", "Note drafted"]
        steps = [e for e in log if e.type == "step.completed" and e.data.get("depth") == 1]
        assert len(steps) == 2
        stream = (await hosted.client.get(f"/v1/runs/{run['id']}/events")).text
        datas = [json.loads(line[6:]) for line in stream.splitlines() if line.startswith("data: ")]
        marked = [(d.get("run_id"), d.get("depth")) for d in datas if "depth" in d]
        assert marked.count((child_ids[0], 1)) == 3  # its input, its answer, its step
        assert marked.count((child_ids[1], 1)) == 3
        assert (
            await hosted.client.get("/v1/runs", params={"parent_run_id": "run_x"})
        ).status_code == 404

    async def test_a_failed_child_is_an_error_result(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        hosted = hosted_openai
        helper = await agent(hosted, "Helper")
        boss = await agent(hosted, "Boss", agent_tools=calls_of(("helper", helper)))
        fake_openai.script(
            [
                call("helper", "call_h", input="try"),
                {"error": {"status": 400, "message": "prompt is too long"}},
                {"content": "The helper failed, sorry."},
            ]
        )
        run = await start(hosted, boss)
        await work_one_at_a_time(hosted)
        [child] = await children(hosted, run["id"])
        assert child["status"] == "failed"
        result = tool_results(fake_openai.requests()[2])["call_h"]
        assert result.startswith(f"Error: the agent's run {child['id']} failed:")
        done = await hosted.get_run(run["id"])
        assert done["status"] == "succeeded" and done["output"] == "The helper failed, sorry."


class TestEnds:
    async def test_cancelling_the_parent_cancels_its_children(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        hosted = hosted_openai
        helper = await agent(hosted, "Helper")
        boss = await agent(hosted, "Boss", agent_tools=calls_of(("helper", helper)))
        fake_openai.script([call("helper", "call_h", input="work")])
        run = await start(hosted, boss)
        worker = Worker(hosted.context.run_context(), concurrency=1, name="once")
        hosted.workers.append(worker)
        assert await worker.fill_slots() == 1
        await worker.drain()
        waiting = await hosted.get_run(run["id"])
        assert waiting["status"] == "running"  # no lease: it waits for its child
        [child] = await children(hosted, run["id"])
        assert child["status"] == "queued"
        # The parent waits, unclaimable, for its child; the child is claimed.
        claimed = await hosted.context.machine.claim("probe", limit=5)
        assert [r.id for r in claimed] == [child["id"]]
        cancelled = await hosted.client.post(f"/v1/runs/{run['id']}/cancel")
        assert cancelled.json()["status"] == "cancelled"
        child = await hosted.get_run(child["id"])
        assert child["status"] == "cancelled" and run["id"] in child["error"]
        assert await work_one_at_a_time(hosted) == 0

    async def test_a_parent_that_times_out_cancels_its_children(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        hosted = hosted_openai
        helper = await agent(hosted, "Helper")
        boss = await agent(hosted, "Boss", agent_tools=calls_of(("helper", helper)))
        fake_openai.script([call("helper", "call_h", input="work")])
        run = await start(hosted, boss)
        hosted.clock.advance(300)
        worker = Worker(hosted.context.run_context(), concurrency=1, name="once")
        hosted.workers.append(worker)
        assert await worker.fill_slots() == 1
        await worker.drain()
        [child] = await children(hosted, run["id"])
        assert child["status"] == "queued"
        hosted.clock.advance(301)  # past the parent's wall clock, not yet the child's
        assert await hosted.reap() == 1
        assert (await hosted.get_run(run["id"]))["error"] == "timeout"
        assert (await hosted.get_run(child["id"]))["status"] == "cancelled"


class TestRecovery:
    async def test_a_child_whose_worker_died_is_taken_over_and_its_parent_goes_on(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        hosted = hosted_openai
        machine = hosted.context.machine
        helper = await agent(hosted, "Helper")
        boss = await agent(hosted, "Boss", agent_tools=calls_of(("helper", helper)))
        fake_openai.script(
            [call("helper", "call_h", input="work"), {"content": "helped"}, {"content": "done"}]
        )
        run = await start(hosted, boss)
        worker = Worker(hosted.context.run_context(), concurrency=1, name="once")
        hosted.workers.append(worker)
        assert await worker.fill_slots() == 1
        await worker.drain()
        [child] = await children(hosted, run["id"])
        [claimed] = await machine.claim("worker-that-dies")
        assert claimed.id == child["id"]
        assert await machine.claim("impatient") == []  # the parent waits, the child is leased
        hosted.clock.advance(machine.limits.lease_seconds + 1)
        assert await work_one_at_a_time(hosted) == 2  # the child taken over, then the parent
        assert (await hosted.get_run(child["id"]))["output"] == "helped"
        assert (await hosted.get_run(run["id"]))["output"] == "done"
        assert len(fake_openai.requests()) == 3

    async def test_a_parent_killed_before_its_step_write_starts_its_child_once(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        hosted = hosted_openai
        helper = await agent(hosted, "Helper")
        boss = await agent(hosted, "Boss", agent_tools=calls_of(("helper", helper)))
        fake_openai.script(
            [call("helper", "call_h", input="work"), {"content": "helped"}, {"content": "done"}]
        )
        run = await start(hosted, boss)
        worker = Worker(hosted.context.run_context(), concurrency=1, name="once")
        hosted.workers.append(worker)
        assert await worker.fill_slots() == 1
        await worker.drain()
        [lost] = await children(hosted, run["id"])
        # As if the process died after the checkpoint (the pause) and before the write that
        # starts the child and gives up the lease: no child, the run leased to a dead worker.
        async with hosted.context.engine.begin() as connection:
            await connection.execute(delete(runs).where(runs.c.id == lost["id"]))
            await connection.execute(delete(threads).where(threads.c.id == lost["thread_id"]))
            await connection.execute(
                update(runs)
                .where(runs.c.id == run["id"])
                .values(lease_owner="dead", lease_expires_at=hosted.clock.now())
            )
        hosted.clock.advance(1)
        assert await work_one_at_a_time(hosted) == 3  # the parent again, the child, the parent
        [child] = await children(hosted, run["id"])
        assert child["output"] == "helped"
        assert (await hosted.get_run(run["id"]))["output"] == "done"
        assert len(fake_openai.requests()) == 3  # the parent's first call was not made again
        charges = await charges_of_run(hosted.context.engine, run["id"])
        assert [c["step"] for c in charges] == [1, 2]


class TestDepth:
    async def test_calls_past_the_depth_limit_are_error_results(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        hosted = hosted_openai
        last = await agent(hosted, "Last")
        low = await agent(hosted, "Low", agent_tools=calls_of(("last", last)))
        mid = await agent(hosted, "Mid", agent_tools=calls_of(("low", low)))
        top = await agent(hosted, "Top", agent_tools=calls_of(("mid", mid)))
        fake_openai.script(
            [
                call("mid", "call_m", input="a"),
                call("low", "call_l", input="b"),
                call("last", "call_x", input="c"),
                {"content": "low done"},
                {"content": "mid done"},
                {"content": "top done"},
            ]
        )
        run = await start(hosted, top)
        assert await work_one_at_a_time(hosted, max_depth=2) == 5
        assert (await hosted.get_run(run["id"]))["output"] == "top done"
        [mid_run] = await children(hosted, run["id"])
        [low_run] = await children(hosted, mid_run["id"])
        assert await children(hosted, low_run["id"]) == []
        refused = tool_results(fake_openai.requests()[3])["call_x"]
        assert refused == "Error: agents may call other agents at most 2 deep; last was not called."
        log = await events_after(hosted.context.engine, run["id"], 0)
        depths = {(e.data.get("run_id"), e.data.get("depth")) for e in log if "depth" in e.data}
        assert depths == {(mid_run["id"], 1), (low_run["id"], 2)}


class TestClientToolsOfChildren:
    async def test_a_childs_client_tool_pauses_the_parent_and_its_outputs_resume_the_child(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        hosted = hosted_openai
        helper = await agent(hosted, "Helper", tools=[WEATHER_TOOL])
        boss = await agent(hosted, "Boss", agent_tools=calls_of(("helper", helper)))
        fake_openai.script(
            [
                call("helper", "call_h", input="weather in Bogor?"),
                call("get_weather", "call_w", city="Bogor"),
                {"content": "Sunny in Bogor"},
                {"content": "The helper says: sunny"},
            ]
        )
        run = await start(hosted, boss)
        assert await work_one_at_a_time(hosted) == 2
        paused = await hosted.get_run(run["id"])
        [child] = await children(hosted, run["id"])
        assert paused["status"] == "requires_action" and child["status"] == "requires_action"
        [shown] = paused["pending_tool_calls"]
        assert shown["id"] == "call_w" and shown["name"] == "get_weather"
        assert shown["run_id"] == child["id"]
        assert "run_id" not in child["pending_tool_calls"][0]
        on_child = await hosted.answer(child, "31 C")
        assert run["id"] in api_error(on_child, 409, "answer_on_parent_run")
        answered = await hosted.answer(paused, "31 C")
        assert answered.status_code == 200, answered.text
        assert answered.json()["status"] == "running"
        assert answered.json()["pending_tool_calls"] is None
        assert (await hosted.get_run(child["id"]))["status"] == "running"
        assert await work_one_at_a_time(hosted) == 2  # the child, then its parent
        requests = fake_openai.requests()
        assert tool_results(requests[2]) == {"call_w": "31 C"}
        assert tool_results(requests[3]) == {"call_h": "Sunny in Bogor"}
        done = await hosted.get_run(run["id"])
        assert done["status"] == "succeeded" and done["output"] == "The helper says: sunny"
        # Answering on the child itself is refused once the parent has answered.
        again = await hosted.client.post(
            f"/v1/runs/{run['id']}/tool_outputs",
            json={"outputs": [{"tool_call_id": "call_w", "output": "x"}]},
        )
        assert api_error(again, 409, "run_not_waiting")

    async def test_a_paused_child_cancelled_on_its_own_frees_its_parent(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        hosted = hosted_openai
        helper = await agent(hosted, "Helper", tools=[WEATHER_TOOL])
        boss = await agent(hosted, "Boss", agent_tools=calls_of(("helper", helper)))
        fake_openai.script(
            [
                call("helper", "call_h", input="weather?"),
                call("get_weather", "call_w", city="Bogor"),
                {"content": "The helper gave up"},
            ]
        )
        run = await start(hosted, boss)
        await work_one_at_a_time(hosted)
        [child] = await children(hosted, run["id"])
        await hosted.client.post(f"/v1/runs/{child['id']}/cancel")
        freed = await hosted.get_run(run["id"])
        assert freed["status"] == "running" and freed["pending_tool_calls"] is None
        assert await work_one_at_a_time(hosted) == 1
        result = tool_results(fake_openai.requests()[2])["call_h"]
        assert result == f"Error: the agent's run {child['id']} was cancelled."
        assert (await hosted.get_run(run["id"]))["output"] == "The helper gave up"
