"""`juru.client` against a real `juru serve`: every resource, `run_until_done` with sync and
async tool functions (and one that raises, and one that is missing), a stream that resumes after
the connection drops, retries on 429, and pagination across pages."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from juru.client import (
    APIConnectionError,
    AsyncJuru,
    ConflictError,
    InvalidRequestError,
    Juru,
    NotFoundError,
    RateLimitError,
    Run,
    UnknownToolError,
)
from tests.e2e.test_hosted_runs import juru_serve
from tests.support.dropping_proxy import DroppingProxy
from tests.support.hosted import WEATHER_TOOL, demo_answer
from tests.support.server import api_key, run_juru

pytestmark = pytest.mark.e2e


# A tier of 4 requests a second, for the account of the retry test (the others have room).
RATE_LIMITS = '{"paid": "100000/minute", "corporate": "100000/minute", "tiny": "4/second"}'


@dataclass(frozen=True)
class Server:
    base_url: str
    key: str
    port: int
    limited_key: str
    log: Callable[[], str]

    def client(self, **options: Any) -> Juru:
        return Juru(self.base_url, self.key, **options)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("client")
    database_url = f"sqlite:///{folder}/juru.db"
    with (
        pytest.MonkeyPatch.context() as environment,
        juru_serve(
            database_url,
            folder / "serve.log",
            PLAYGROUND_ENABLED="true",
            JURU_TIER_RATE_LIMITS=RATE_LIMITS,
        ) as serve,
    ):
        environment.setenv("JURU_TIER_RATE_LIMITS", RATE_LIMITS)  # for the CLI below
        run_juru(database_url, "accounts", "create", "bursty", "--tier", "tiny")
        limited = run_juru(database_url, "keys", "create", "--account", "bursty")
        yield Server(
            serve.base_url,
            api_key(database_url),
            serve.port,
            limited.splitlines()[-1],
            serve.output,
        )


def weather(city: str) -> dict[str, Any]:
    return {"city": city, "temp_c": 31}


def test_every_resource(server: Server, tmp_path: Path) -> None:
    with server.client() as juru:
        models = juru.models.list()
        assert "juru/demo" in {m.id for m in models}
        assert juru.models.get("juru/demo").agents is True
        agent = juru.agents.create("Sumber", "juru/demo", tools=[WEATHER_TOOL], max_steps=5)
        assert juru.agents.get(agent.id) == agent
        changed = juru.agents.update(agent.id, system_prompt="Be brief.")
        assert changed.system_prompt == "Be brief." and changed.tools == agent.tools
        assert agent.id in {a.id for a in juru.agents.list()}

        thread = juru.threads.create(agent.id, title="Cuaca", metadata={"k": "v"})
        assert juru.threads.get(thread.id).metadata == {"k": "v"}
        assert [t.id for t in juru.threads.list(agent.id)] == [thread.id]

        run = juru.runs.create(thread.id, "What is the weather in Jakarta?")
        paused = juru.runs.get(run.id, wait=30)
        assert paused.status == "requires_action" and paused.pending_tool_calls
        with pytest.raises(ConflictError) as busy:
            juru.runs.create(thread.id, "and Bandung?")
        assert busy.value.code == "thread_busy" and busy.value.status == 409
        outputs = [{"tool_call_id": c.id, "output": "sunny"} for c in paused.pending_tool_calls]
        juru.runs.submit_tool_outputs(run.id, outputs)
        events = list(juru.runs.events(run.id))
        assert events[-1].run is not None and events[-1].run.status == "succeeded"
        durable = [e.id for e in events if e.id is not None]
        assert durable == list(range(1, len(durable) + 1))
        assert [r.id for r in juru.runs.list(thread.id)] == [run.id]
        roles = [m.role for m in juru.threads.messages(thread.id)]
        assert roles == ["user", "assistant", "tool", "assistant"]

        second = juru.runs.create(thread.id, "What is the weather in Medan?")
        assert juru.runs.cancel(second.id).status == "cancelled"

        handbook = tmp_path / "handbook.md"
        handbook.write_text("# Cuti\n\nSetiap karyawan mendapat dua belas hari cuti.\n")
        document = juru.documents.upload(handbook, title="Cuti")
        assert document.title == "Cuti" and document.chunk_count >= 1
        assert juru.documents.get(document.id) == document
        assert document.id in {d.id for d in juru.documents.list()}
        assert juru.documents.delete(document.id).deleted
        with pytest.raises(NotFoundError):
            juru.documents.get(document.id)

        speaker = juru.agents.create("Suara", "juru/demo", builtin_tools=["text_to_speech"])
        spoken = juru.runs.run_until_done(
            juru.threads.create(speaker.id).id, "Text to speech: selamat pagi"
        )
        assert spoken.status == "succeeded", spoken.error
        file_ids = [
            word.strip('",.}')
            for m in juru.threads.messages(spoken.thread_id)
            for word in m.content.split()
            if word.strip('"').startswith("file_")
        ]
        audio = juru.files.get(file_ids[0])
        assert audio.content_type == "audio/wav"
        assert [f.id for f in juru.files.list()] == [audio.id]
        assert juru.files.content(audio.id)[:4] == b"RIFF"

        account = juru.account()
        assert account.available_rupiah == account.balance_rupiah - account.held_rupiah
        today = datetime.now(UTC).date()
        usage = juru.usage(since=today, until=today)
        assert {line.source for line in usage.data} >= {"agent", "builtin"}
        assert juru.agents.delete(agent.id).deleted
        with pytest.raises(NotFoundError) as missing:
            juru.agents.get(agent.id)
        assert missing.value.code == "not_found"


def test_refusals_name_the_field(server: Server) -> None:
    bogus = {**WEATHER_TOOL, "function": {"name": "get_weather", "parameters": {"type": "x"}}}
    with server.client() as juru, pytest.raises(InvalidRequestError) as refused:
        juru.agents.create("Salah", "juru/demo", tools=[bogus])
    assert refused.value.status == 400
    assert any(field.startswith("tools.0.function.parameters") for field in refused.value.fields)


def test_run_until_done_calls_sync_and_async_functions(server: Server) -> None:
    with server.client() as juru:
        agent = juru.agents.create("Loop", "juru/demo", tools=[WEATHER_TOOL])
        run = juru.runs.run_until_done(
            juru.threads.create(agent.id).id, "Weather in Jakarta?", tools={"get_weather": weather}
        )
        assert run.status == "succeeded"
        assert run.output == demo_answer("get_weather", '{"city": "Jakarta", "temp_c": 31}')

        async def async_weather(city: str) -> str:
            await asyncio.sleep(0)
            return f"hujan di {city}"

        # An async function in the blocking client, and with ?wait= polls instead of a stream.
        polled = juru.runs.run_until_done(
            juru.threads.create(agent.id).id,
            "Weather in Bogor?",
            tools={"get_weather": async_weather},
            stream=False,
        )
        assert polled.output == demo_answer("get_weather", "hujan di Bogor")
        # One request per pause: the create waits for the first pause, the outputs' request
        # for the run's end, and no `GET` is needed in between.
        requests = [
            line.split('"')[1]
            for line in server.log().splitlines()
            if f"/{polled.id}" in line or f"/{polled.thread_id}/runs" in line
        ]
        assert requests == [
            f"POST /v1/threads/{polled.thread_id}/runs?wait=30.0 HTTP/1.1",
            f"POST /v1/runs/{polled.id}/tool_outputs?wait=30.0 HTTP/1.1",
        ]

    async def with_async_client() -> tuple[Run, Run]:
        async with AsyncJuru(server.base_url, server.key) as juru:
            thread = await juru.threads.create(agent.id)
            streamed = await juru.runs.run_until_done(
                thread.id, "Weather in Medan?", tools={"get_weather": async_weather}
            )
            thread = await juru.threads.create(agent.id)
            plain = await juru.runs.run_until_done(
                thread.id, "Weather in Solo?", tools={"get_weather": weather}, stream=False
            )
            return streamed, plain

    streamed, plain = asyncio.run(with_async_client())
    assert streamed.output == demo_answer("get_weather", "hujan di Medan")
    assert plain.output == demo_answer("get_weather", '{"city": "Solo", "temp_c": 31}')


def test_a_tool_that_raises_is_told_to_the_model(server: Server) -> None:
    def broken(city: str) -> str:
        raise TimeoutError(f"the weather service for {city} did not answer")

    with server.client() as juru:
        agent = juru.agents.create("Rusak", "juru/demo", tools=[WEATHER_TOOL])
        thread = juru.threads.create(agent.id)
        run = juru.runs.run_until_done(
            thread.id, "Weather in Jakarta?", tools={"get_weather": broken}
        )
        assert run.status == "succeeded"
        told = [m.content for m in juru.threads.messages(thread.id) if m.role == "tool"]
        assert told == ['{"error": "TimeoutError: the weather service for Jakarta did not answer"}']


def test_an_unknown_tool_raises_before_anything_is_submitted(server: Server) -> None:
    with server.client() as juru:
        agent = juru.agents.create("Tanpa", "juru/demo", tools=[WEATHER_TOOL])
        thread = juru.threads.create(agent.id)
        with pytest.raises(UnknownToolError) as unknown:
            juru.runs.run_until_done(thread.id, "Weather in Jakarta?", tools={"other": weather})
        assert unknown.value.names == ["get_weather"]
        waiting = juru.runs.get(unknown.value.run_id)
        assert waiting.status == "requires_action"
        assert [m.role for m in juru.threads.messages(thread.id)] == ["user", "assistant"]


def test_a_stream_resumes_after_the_connection_drops(server: Server) -> None:
    with server.client() as juru:
        agent = juru.agents.create("Putus", "juru/demo", tools=[WEATHER_TOOL])
        thread = juru.threads.create(agent.id)
        run = juru.runs.create(thread.id, "Weather in Jakarta?")
        paused = juru.runs.get(run.id, wait=30)
        assert paused.pending_tool_calls
        outputs = [{"tool_call_id": c.id, "output": "cerah"} for c in paused.pending_tool_calls]
        juru.runs.submit_tool_outputs(run.id, outputs)
        whole = [e.id for e in juru.runs.events(run.id) if e.id is not None]

    with (
        DroppingProxy(server.port, frames_per_stream=2) as proxy,
        Juru(proxy.base_url, server.key) as through_proxy,
    ):
        resumed = list(through_proxy.runs.stream(run.id))
        with pytest.raises(APIConnectionError):
            list(through_proxy.runs.events(run.id))  # one connection: no resume
    assert proxy.drops >= 3
    ids = [e.id for e in resumed if e.id is not None]
    assert ids == whole  # every durable event once, in order
    assert resumed[-1].run is not None and resumed[-1].run.status == "succeeded"


def test_rate_limits_are_retried_after_the_servers_advice(server: Server) -> None:
    with Juru(server.base_url, server.limited_key, max_retries=0) as impatient:
        with pytest.raises(RateLimitError) as limited:
            for _ in range(20):
                impatient.account()
        assert limited.value.retry_after is not None and limited.value.retry_after >= 0
    with Juru(server.base_url, server.limited_key, max_retries=5) as patient:
        accounts = [patient.account() for _ in range(12)]
    assert len(accounts) == 12 and {a.name for a in accounts} == {"bursty"}
    assert " 429 " in server.log()


def test_lists_are_iterated_across_pages(server: Server) -> None:
    with server.client() as juru:
        made = [juru.agents.create(f"Halaman {i}", "juru/demo").id for i in range(5)]
        listed = [agent.id for agent in juru.agents.list(limit=2)]
        assert len(listed) == len(set(listed))
        assert set(made) <= set(listed)
        first = juru.agents.list(limit=2).page()
        assert len(first.data) == 2 and first.has_more and first.next_cursor
        following = juru.agents.list(limit=2).page(first.next_cursor)
        assert following.data[0].id not in {a.id for a in first.data}

    async def async_listing() -> list[str]:
        async with AsyncJuru(server.base_url, server.key) as juru:
            return [agent.id async for agent in juru.agents.list(limit=2)]

    assert asyncio.run(async_listing()) == listed
