"""A run's durable event log and its stream (`GET /v1/runs/:id/events`, `stream: true`) on real
databases, with the worker driven step by step."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from httpx import Response
from sqlalchemy import Connection, func, select, update

from juru.engine.events import log_grew
from juru.hosted.streams import Heartbeat, MessageDelta, follow_run
from juru.models import streams
from juru.store import run_log
from juru.store.run_log import RunEventRecord
from juru.store.tables import run_events, runs
from juru.store.transactions import write
from juru.store.usage import charges_of_run
from tests.support.fake_openai import FakeOpenAIServer
from tests.support.hosted import HostedHarness, api_error, demo_answer


def parse_stream(text: str, ephemeral: bool = False) -> list[dict[str, Any]]:
    """The durable events of an SSE body (with `ephemeral`, text deltas too, whose id is
    None): id, event and parsed data."""
    events = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            name, _, value = line.partition(": ")
            if name in {"id", "event", "data"}:
                fields[name] = value
        if "event" in fields:
            seq = int(fields["id"]) if "id" in fields else None
            if seq is not None or ephemeral:
                data = json.loads(fields["data"])
                events.append({"id": seq, "event": fields["event"], "data": data})
    return events


def kinds(events: list[dict[str, Any]]) -> list[str]:
    """Each event as `type` or `run.status:<status>`, for comparing sequences."""
    return [
        f"run.status:{e['data']['status']}" if e["event"] == "run.status" else e["event"]
        for e in events
    ]


WHOLE_RUN = [
    "run.status:queued",
    "run.status:running",
    "message.completed",  # the user's input
    "message.completed",  # the model's tool call
    "step.completed",
    "run.status:requires_action",
    "run.status:running",
    "message.completed",  # the tool's output
    "message.completed",  # the answer
    "step.completed",
    "run.status:succeeded",
]


async def run_to_the_end(hosted: HostedHarness, run_id: str) -> None:
    await hosted.work()
    paused = await hosted.get_run(run_id)
    assert paused["status"] == "requires_action"
    response = await hosted.answer(paused, "sunny, 31 C")
    assert response.status_code == 200, response.text
    await hosted.work()


async def stream(hosted: HostedHarness, run_id: str, **request: Any) -> Response:
    return await hosted.client.get(f"/v1/runs/{run_id}/events", **request)


class TestTheLog:
    async def test_a_finished_runs_stream_replays_every_event_in_order_and_closes(
        self, hosted: HostedHarness
    ) -> None:
        run = await hosted.new_run()
        await run_to_the_end(hosted, run["id"])
        response = await stream(hosted, run["id"])
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = parse_stream(response.text)
        assert kinds(events) == WHOLE_RUN
        assert [e["id"] for e in events] == list(range(1, len(WHOLE_RUN) + 1))

    async def test_each_event_has_the_shape_of_its_read_endpoint(
        self, hosted: HostedHarness
    ) -> None:
        run = await hosted.new_run()
        await run_to_the_end(hosted, run["id"])
        events = parse_stream((await stream(hosted, run["id"])).text)
        assert events[-1]["data"] == await hosted.get_run(run["id"])
        paused = next(e for e in events if e["data"].get("status") == "requires_action")
        assert paused["data"]["pending_tool_calls"][0]["name"] == "get_weather"
        listed = await hosted.client.get(f"/v1/threads/{run['thread_id']}/messages")
        messages = [e["data"] for e in events if e["event"] == "message.completed"]
        assert messages == listed.json()["data"]
        steps = [e["data"] for e in events if e["event"] == "step.completed"]
        assert [s["step_count"] for s in steps] == [1, 2]
        assert messages[-1]["content"] == demo_answer("get_weather", "sunny, 31 C")

    async def test_after_an_id_only_the_later_events_come(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        await run_to_the_end(hosted, run["id"])
        whole = parse_stream((await stream(hosted, run["id"])).text)
        by_query = parse_stream((await stream(hosted, run["id"], params={"after": 6})).text)
        assert by_query == whole[6:]
        # A reconnecting EventSource keeps its URL and sends Last-Event-ID: the header wins.
        headers = {"Last-Event-ID": "9"}
        by_header = await stream(hosted, run["id"], params={"after": 2}, headers=headers)
        assert parse_stream(by_header.text) == whole[9:]
        # After the terminal event a reconnect has nothing more, ever: 204 makes a browser's
        # EventSource stop reconnecting.
        done = await stream(hosted, run["id"], headers={"Last-Event-ID": "11"})
        assert done.status_code == 204 and done.content == b""

    async def test_a_stream_opened_before_the_run_starts_follows_it_to_the_end(
        self, hosted: HostedHarness
    ) -> None:
        run = await hosted.new_run()
        following = asyncio.create_task(stream(hosted, run["id"]))
        await run_to_the_end(hosted, run["id"])
        response = await asyncio.wait_for(following, 30)
        assert kinds(parse_stream(response.text)) == WHOLE_RUN
        # The answer's text came in deltas first (no id: a reconnect never resumes from one).
        every = parse_stream(response.text, ephemeral=True)
        deltas = [e for e in every if e["event"] == "message.delta"]
        answer = next(e for e in every if e["data"].get("role") == "assistant" and e["id"] > 8)
        assert deltas and all(e["id"] is None for e in deltas)
        assert "".join(e["data"]["delta"] for e in deltas) == answer["data"]["content"]
        assert every.index(deltas[-1]) < every.index(answer)

    async def test_stream_true_on_create_answers_with_the_runs_stream(
        self, hosted: HostedHarness
    ) -> None:
        agent = await hosted.create_agent()
        thread = await hosted.create_thread(agent["id"])
        body = {"input": "What is the weather in Jakarta?", "stream": True}
        headers = {"Idempotency-Key": "streamed-1"}
        url = f"/v1/threads/{thread['id']}/runs"
        following = asyncio.create_task(hosted.client.post(url, json=body, headers=headers))
        runs = await wait_for_run(hosted, thread["id"])
        await run_to_the_end(hosted, runs[0]["id"])
        response = await asyncio.wait_for(following, 30)
        assert response.status_code == 200
        events = parse_stream(response.text)
        assert kinds(events) == WHOLE_RUN and events[0]["data"]["id"] == runs[0]["id"]
        # The key's replay streams the same run again (now a replay of its whole log).
        replay = await hosted.client.post(url, json=body, headers=headers)
        assert replay.status_code == 200 and parse_stream(replay.text) == events
        # And without `stream` the same key answers with the run, as before.
        plain = await hosted.client.post(url, json={"input": body["input"]}, headers=headers)
        assert plain.status_code == 202 and plain.json()["id"] == runs[0]["id"]

    async def test_a_cancelled_run_ends_its_stream(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        following = asyncio.create_task(stream(hosted, run["id"]))
        await hosted.work()
        cancelled = await hosted.client.post(f"/v1/runs/{run['id']}/cancel")
        assert cancelled.status_code == 200
        events = parse_stream((await asyncio.wait_for(following, 30)).text)
        assert kinds(events)[-2:] == ["run.status:requires_action", "run.status:cancelled"]

    async def test_the_log_has_no_gaps_when_runs_and_cancels_race(
        self, hosted: HostedHarness
    ) -> None:
        agent = await hosted.create_agent()
        run_ids = []
        for _ in range(6):
            thread = await hosted.create_thread(agent["id"])
            run_ids.append((await hosted.start_run(thread["id"])).json()["id"])
        cancels = [hosted.client.post(f"/v1/runs/{i}/cancel") for i in run_ids[::2]]
        await asyncio.gather(hosted.work(), *cancels)
        async with hosted.context.engine.connect() as connection:
            query = select(
                run_events.c.run_id,
                func.count(),
                func.min(run_events.c.seq),
                func.max(run_events.c.seq),
            ).group_by(run_events.c.run_id)
            rows = (await connection.execute(query)).all()
        assert {row[0] for row in rows} == set(run_ids)
        for _, count, lowest, highest in rows:
            assert (lowest, highest) == (1, count)

    async def test_events_logged_already_are_left_out_and_the_rest_numbered_per_run(
        self, hosted: HostedHarness
    ) -> None:
        first, second = await hosted.new_run(), await hosted.new_run()  # event 1 each
        engine, now = hosted.context.engine, hosted.clock.now()

        def messages(run: dict[str, Any], *ids: str) -> list[run_log.NewRunEvent]:
            listed = [{"message_id": message_id, "role": "user"} for message_id in ids]
            return run_log.message_events(run["thread_id"], run["id"], listed, now)

        def append(events: list[tuple[str, run_log.NewRunEvent]]) -> Any:
            return write(engine, lambda c: run_log.append_to_logs(c, events, now))

        await append([(first["id"], event) for event in messages(first, "a", "b")])
        # A redone write: `a` and `b` are in the first run's log, and the step's key in neither.
        redone = [*messages(first, "a", "c", "b"), run_log.step_event(1, Decimal(0))]
        elsewhere = [*messages(second, "a"), run_log.step_event(1, Decimal(0))]
        await append([*[(first["id"], e) for e in redone], *[(second["id"], e) for e in elsewhere]])

        async def logged(run: dict[str, Any]) -> list[tuple[int, str | None]]:
            records = await run_log.events_after(engine, run["id"], 1)
            return [(record.seq, record.data.get("message_id")) for record in records]

        assert await logged(first) == [(2, "a"), (3, "b"), (4, "c"), (5, None)]
        assert await logged(second) == [(2, "a"), (3, None)]


class TestAccess:
    async def test_another_accounts_run_is_not_found_and_no_key_is_401(
        self, hosted: HostedHarness
    ) -> None:
        run = await hosted.new_run()
        hosted.act_as(await hosted.new_account("other"))
        api_error(await stream(hosted, run["id"]), 404, "not_found")
        hosted.act_as(None)
        anonymous = await hosted.client.get(
            f"/v1/runs/{run['id']}/events", headers={"Authorization": ""}
        )
        api_error(anonymous, 401, "missing_api_key")

    async def test_a_last_event_id_that_is_not_a_number_is_400(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        response = await stream(hosted, run["id"], headers={"Last-Event-ID": "abc"})
        assert "last-event-id" in api_error(response, 400, "invalid_request")
        api_error(await stream(hosted, run["id"], params={"after": -1}), 400, "invalid_request")


class TestStreamTokens:
    async def test_a_stream_token_reads_its_runs_stream_without_a_header(
        self, hosted: HostedHarness
    ) -> None:
        run, other = await hosted.new_run(), await hosted.new_run()
        await run_to_the_end(hosted, run["id"])
        issued = await hosted.client.post(f"/v1/runs/{run['id']}/stream_token")
        assert issued.status_code == 201, issued.text
        ticket = issued.json()
        token = ticket["token"]
        assert ticket["url"] == f"/v1/runs/{run['id']}/events?token={token}"
        hosted.client.headers.pop("Authorization")  # as the browser's EventSource sends it
        try:
            response = await hosted.client.get(ticket["url"])
            assert kinds(parse_stream(response.text)) == WHOLE_RUN
            # Only for that run, only as signed, only until it expires.
            wrong_run = await stream(hosted, other["id"], params={"token": token})
            assert "another run" in api_error(wrong_run, 401, "invalid_stream_token")
            forged = token[:-1] + ("0" if token[-1] != "0" else "1")
            tampered = await stream(hosted, run["id"], params={"token": forged})
            api_error(tampered, 401, "invalid_stream_token")
            garbage = await stream(hosted, run["id"], params={"token": "abc"})
            api_error(garbage, 401, "invalid_stream_token")
            hosted.clock.advance(hosted.context.hosted.stream_token_seconds + 1)
            api_error(await hosted.client.get(ticket["url"]), 401, "expired_stream_token")
        finally:
            hosted.act_as(None)

    async def test_revoking_the_key_revokes_its_tokens_and_others_runs_get_none(
        self, hosted: HostedHarness
    ) -> None:
        run = await hosted.new_run()
        hosted.act_as(await hosted.new_account("other"))
        refused = await hosted.client.post(f"/v1/runs/{run['id']}/stream_token")
        api_error(refused, 404, "not_found")
        hosted.act_as(None)
        ticket = (await hosted.client.post(f"/v1/runs/{run['id']}/stream_token")).json()
        await hosted.context.accounts.revoke_key(ticket["token"].split(".")[1])
        hosted.client.headers.pop("Authorization")
        try:
            revoked = await hosted.client.get(ticket["url"])
            assert "revoked" in api_error(revoked, 401, "invalid_stream_token")
        finally:
            hosted.act_as(None)


class TestRetention:
    async def test_a_runs_events_are_pruned_after_the_retention_period(
        self, hosted: HostedHarness
    ) -> None:
        finished = await hosted.new_run()
        await run_to_the_end(hosted, finished["id"])
        waiting = await hosted.new_run()
        await hosted.work()
        await hosted.reap()  # the first sweep prunes (nothing is old enough yet)
        hosted.clock.advance(timedelta(days=30, hours=2).total_seconds())
        await hosted.reap()
        response = await stream(hosted, finished["id"])
        assert "pruned" in api_error(response, 410, "run_events_pruned")
        # The run itself stays, and a run that has not ended keeps its log.
        assert (await hosted.get_run(finished["id"]))["status"] == "succeeded"
        kept = await hosted.context.hosted.run_events(hosted.account_id, waiting["id"])
        first = await anext(kept)
        await kept.aclose()
        assert isinstance(first, RunEventRecord) and first.seq == 1


async def paused_run_stream(hosted: HostedHarness) -> tuple[dict[str, Any], Any]:
    """A run paused on its tool call, and its stream from the start, with a heartbeat every
    50 ms while it is quiet."""
    hosted.context.hosted.stream_heartbeat_seconds = 0.05
    run = await hosted.new_run()
    await hosted.work()
    return run, await hosted.context.hosted.run_events(hosted.account_id, run["id"])


class TestFollowing:
    async def test_a_quiet_stream_sends_heartbeats_and_stays_open_across_the_pause(
        self, hosted: HostedHarness
    ) -> None:
        run, items = await paused_run_stream(hosted)
        seen = []
        async for item in items:
            seen.append(item)
            if isinstance(item, Heartbeat):
                break
        assert [getattr(i, "seq", None) for i in seen] == [1, 2, 3, 4, 5, 6, None]
        paused = await hosted.get_run(run["id"])
        await hosted.answer(paused, "sunny, 31 C")
        await hosted.work()
        rest = [item async for item in items if not isinstance(item, Heartbeat)]
        durable = [item for item in rest if isinstance(item, RunEventRecord)]
        assert [event.seq for event in durable] == [7, 8, 9, 10, 11]
        # The answer's text, if it came in pieces, came before the answer.
        answer = durable[2]
        assert answer.data["role"] == "assistant"
        pieces = [i for i in rest if isinstance(i, MessageDelta)]
        assert all(rest.index(piece) < rest.index(answer) for piece in pieces)

    async def test_an_idle_stream_keeps_none_of_the_events_it_sent(
        self, hosted: HostedHarness
    ) -> None:
        # 1,000 open streams of paused runs held 8 MB of replayed events (bench/, streams).
        _, items = await paused_run_stream(hosted)
        sent = []
        item = await anext(items)
        while not isinstance(item, Heartbeat):  # sent after the stream waited, idle
            sent.append(weakref.ref(item))
            item = await anext(items)
        gc.collect()
        assert len(sent) == 6
        assert [ref() for ref in sent] == [None] * len(sent)
        await items.aclose()


async def wait_for_run(hosted: HostedHarness, thread_id: str) -> list[dict[str, Any]]:
    """The thread's runs, once it has one (a streamed create has no body to read it from)."""
    for _ in range(500):
        listed = await hosted.client.get(f"/v1/threads/{thread_id}/runs")
        if listed.json()["data"]:
            runs: list[dict[str, Any]] = listed.json()["data"]
            return runs
        await asyncio.sleep(0.01)
    raise AssertionError("the streamed create made no run")


OPENAI_MODEL = "openai/gpt-4o-mini"
ANSWER = "Cuaca di Jakarta hari ini cerah, tiga puluh satu derajat, dengan angin pelan."


async def follow_all(hosted: HostedHarness, run_id: str) -> list[Any]:
    """Everything a stream of the run yields until it ends, heartbeats left out."""
    items = await hosted.context.hosted.run_events(hosted.account_id, run_id)
    return [item async for item in items if not isinstance(item, Heartbeat)]


class TestTextDeltas:
    async def test_a_followed_calls_text_arrives_in_deltas_before_its_message(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        fake_openai.script([{"content": ANSWER, "chunk_delay": 0.03}])
        run = await hosted_openai.new_run(model_id=OPENAI_MODEL, tools=[])
        following = asyncio.create_task(follow_all(hosted_openai, run["id"]))
        await wait_until(lambda: hosted_openai.context.machine.events.followed(run["id"]))
        await hosted_openai.work()
        items = await asyncio.wait_for(following, 30)
        deltas = [item for item in items if isinstance(item, MessageDelta)]
        answer = next(
            item
            for item in items
            if isinstance(item, RunEventRecord)
            and item.type == "message.completed"
            and item.data["role"] == "assistant"
        )
        assert len(deltas) >= 2 and "".join(d.delta for d in deltas) == ANSWER
        assert {d.message_id for d in deltas} == {answer.data["message_id"]}
        assert items.index(deltas[-1]) < items.index(answer)
        assert fake_openai.requests()[0].get("stream") is True
        # Streamed or not, the call is charged from the provider's own usage.
        done = await hosted_openai.get_run(run["id"])
        assert done["status"] == "succeeded" and Decimal(str(done["cost_rupiah"])) > 0
        [charge] = await charges_of_run(hosted_openai.context.engine, run["id"])
        assert charge["input_tokens"] > 0 and charge["output_tokens"] > 0

    async def test_a_call_nobody_follows_is_not_streamed(
        self, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
    ) -> None:
        fake_openai.script([{"content": ANSWER}])
        run = await hosted_openai.new_run(model_id=OPENAI_MODEL, tools=[])
        await hosted_openai.work()
        assert (await hosted_openai.get_run(run["id"]))["output"] == ANSWER
        assert not fake_openai.requests()[0].get("stream")

    async def test_a_followed_call_whose_model_goes_silent_fails_the_run_uncharged(
        self,
        hosted_openai: HostedHarness,
        fake_openai: FakeOpenAIServer,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        monkeypatch.setattr(streams, "SILENCE_SECONDS", 0.3)
        # The stream stops after its first piece of text and sends nothing more.
        fake_openai.script([{"content": ANSWER, "hold": "silent"}])
        run = await hosted_openai.new_run(model_id=OPENAI_MODEL, tools=[])
        following = asyncio.create_task(follow_all(hosted_openai, run["id"]))
        await wait_until(lambda: hosted_openai.context.machine.events.followed(run["id"]))
        try:
            await hosted_openai.work()
            await asyncio.wait_for(following, 30)
        finally:
            fake_openai.open_gate("silent")  # the fake's held stream ends
        failed = await hosted_openai.get_run(run["id"])
        assert failed["status"] == "failed"
        assert failed["error"].startswith("ModelSilentError: the model's stream sent no content")
        assert "0.3 s" in failed["error"]
        assert await charges_of_run(hosted_openai.context.engine, run["id"]) == []

    async def test_the_demo_model_streams_too(self, hosted: HostedHarness) -> None:
        run = await hosted.new_run()
        await hosted.work()
        await hosted.answer(await hosted.get_run(run["id"]), "sunny, 31 C")
        following = asyncio.create_task(follow_all(hosted, run["id"]))
        await wait_until(lambda: hosted.context.machine.events.followed(run["id"]))
        await hosted.work()
        items = await asyncio.wait_for(following, 30)
        text = "".join(item.delta for item in items if isinstance(item, MessageDelta))
        assert text == demo_answer("get_weather", "sunny, 31 C")


async def wait_until(condition: Any) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in time")


class TestCarriedEvents:
    """A write's notice carries the events it appended; a stream sends them without reading
    the log, and reads it only when they do not follow the last event it sent."""

    async def test_a_steps_notice_carries_its_events_as_the_log_holds_them(
        self, hosted: HostedHarness, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        events = hosted.context.machine.events
        sent: list[str] = []
        deliver = events.committed

        async def recording(*payloads: str) -> None:
            sent.extend(payloads)
            await deliver(*payloads)

        monkeypatch.setattr(events, "committed", recording)
        # Without a stream to send them, notices carry no events.
        unfollowed = await hosted.new_run()
        await run_to_the_end(hosted, unfollowed["id"])
        assert sent and not [payload for payload in sent if '"events":' in payload]
        run = await hosted.new_run()
        async with events.follow(run["id"]):
            await run_to_the_end(hosted, run["id"])
        carried = [
            json.loads(payload.partition(" ")[2])["events"]
            for payload in sent
            if payload.startswith(f"#{run['id']} ") and '"events":' in payload
        ]
        logged = await run_log.events_after(hosted.context.engine, run["id"], 0)
        held = {event.seq: (event.type, event.data) for event in logged}
        # The pause's write and the end's (each its messages, its step and its status), and
        # between them the tool outputs' status change.
        step = ["message.completed", "message.completed", "step.completed", "run.status"]
        assert [[item["type"] for item in listed] for listed in carried] == [
            step,
            ["run.status"],
            step,
        ]
        for listed in carried:
            for item in listed:
                assert held[item["seq"]] == (item["type"], item["data"])
        assert [listed[-1]["data"]["status"] for listed in carried] == [
            "requires_action",
            "running",
            "succeeded",
        ]

    async def test_a_stream_sends_carried_events_and_reads_the_log_after_a_gap(
        self, hosted: HostedHarness
    ) -> None:
        run = await hosted.new_run()  # its log holds `run.status: queued`, id 1
        engine, events = hosted.context.engine, hosted.context.machine.events
        now = hosted.clock.now()

        async def logged(*steps: int) -> list[RunEventRecord]:
            """Steps appended to the log with no notice, as the log then holds them."""
            new = [run_log.step_event(step, Decimal(step)) for step in steps]
            await write(engine, lambda c: run_log.append_events(c, run["id"], new, now))
            return (await run_log.events_after(engine, run["id"], 0))[-len(steps) :]

        def carrying(*records: RunEventRecord) -> str:
            return log_grew(run["id"], list(records))

        def as_carried(record: RunEventRecord, note: str) -> RunEventRecord:
            return RunEventRecord(record.run_id, record.seq, record.type, {"note": note}, now)

        following = follow_run(engine, events, run["id"], 0, ended=False, heartbeat_seconds=60)
        assert (await anext(following)).seq == 1
        [second] = await logged(2)
        # Its notice carried it: the stream sends it as carried, and reads nothing.
        events.deliver(carrying(as_carried(second, "carried")))
        assert await asyncio.wait_for(anext(following), 10) == as_carried(second, "carried")
        third, fourth = await logged(3, 4)
        # Carried again (sent already), then a notice of the fourth alone: the stream missed
        # the third, so it reads the log.
        events.deliver(carrying(as_carried(second, "again")))
        events.deliver(carrying(as_carried(fourth, "carried")))
        assert await asyncio.wait_for(anext(following), 10) == third
        assert await asyncio.wait_for(anext(following), 10) == fourth
        [fifth] = await logged(5)
        events.deliver(carrying(as_carried(fourth, "again"), as_carried(fifth, "carried")))
        events.deliver(carrying(as_carried(fifth, "again")))
        # A list that starts with one sent already is read; nothing is sent twice.
        assert await asyncio.wait_for(anext(following), 10) == fifth
        [sixth] = await logged(6)
        events.deliver(carrying(as_carried(sixth, "carried")))
        assert await asyncio.wait_for(anext(following), 10) == as_carried(sixth, "carried")
        await following.aclose()

    async def test_a_runs_update_says_which_ids_its_next_events_get(
        self, hosted: HostedHarness
    ) -> None:
        run = await hosted.new_run()  # event 1
        engine, now = hosted.context.engine, hosted.clock.now()
        message = run_log.message_events(
            run["thread_id"], run["id"], [{"message_id": "m1", "role": "user"}], now
        )
        await write(engine, lambda c: run_log.append_events(c, run["id"], message, now))
        touch = (
            update(runs)
            .where(runs.c.id == run["id"])
            .values(updated_at=now)
            .returning(*run_log.log_tail_columns())
        )

        async def appended(new: list[run_log.NewRunEvent]) -> list[int] | None:
            def work(connection: Connection) -> Any:
                keys = run_log.event_keys(new)
                return connection.execute(touch, {"log_keys": keys}).one()._mapping

            row = await write(engine, work)
            records = run_log.appended_records(run["id"], new, row, now)
            return None if records is None else [record.seq for record in records]

        fresh = run_log.message_events(
            run["thread_id"], run["id"], [{"message_id": "m2", "role": "user"}], now
        )
        assert await appended([*fresh, run_log.step_event(1, Decimal(0))]) == [3, 4]
        assert await appended([]) == []
        # A redone step's event is in the log already: the ids of the rest are not known.
        assert await appended([*fresh, *message]) is None
