"""Built-in tools (`text_to_speech`, `rag_search`) run inside hosted runs; files and documents."""

from __future__ import annotations

import contextlib
import io
import json
import wave
from array import array
from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from typing import Any

import pytest
from httpx import ASGITransport, AsyncClient

from juru.app import create_app
from juru.core.clock import ManualClock
from juru.settings import Settings
from juru.store.accounts import account_named
from juru.store.usage import charges_of_run
from juru.tools import rag_search
from tests.conftest import openai_env
from tests.support.corpus import CORPUS, QUESTIONS
from tests.support.fake_openai import FakeOpenAIServer
from tests.support.hosted import WEATHER_TOOL, HostedHarness

MODEL = "openai/gpt-4o-mini"
BOTH = ["text_to_speech", "rag_search"]
SPOKEN = "Selamat pagi. Kereta ke Bandung berangkat pukul sembilan tiga puluh."


@contextlib.asynccontextmanager
async def harness_with(
    settings_factory: Callable[..., Settings], fake_openai: FakeOpenAIServer, **overrides: Any
) -> AsyncIterator[HostedHarness]:
    """Like the `hosted_openai` fixture, with settings of the test's own."""
    clock = ManualClock()
    settings = settings_factory(workers=0, provider_env=openai_env(fake_openai), **overrides)
    app = create_app(settings, clock=clock)
    async with (
        app.router.lifespan_context(app),
        AsyncClient(transport=ASGITransport(app=app), base_url="http://juru.test") as client,
    ):
        harness = HostedHarness(app, client, clock)
        await harness.sign_in(balance=1_000_000)
        try:
            yield harness
        finally:
            await harness.stop_workers()


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


async def run_agent(
    hosted: HostedHarness, run_input: str = "go", **agent: Any
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Create an agent and a thread, run the input to its next pause or end; the run and the
    thread's transcript."""
    created = await hosted.create_agent(**{"model_id": MODEL, "tools": [], **agent})
    thread = await hosted.create_thread(created["id"])
    response = await hosted.start_run(thread["id"], run_input)
    assert response.status_code == 202, response.text
    await hosted.work()
    run = await hosted.get_run(response.json()["id"])
    return run, await transcript(hosted, thread["id"])


async def transcript(hosted: HostedHarness, thread_id: str) -> list[dict[str, Any]]:
    response = await hosted.client.get(f"/v1/threads/{thread_id}/messages")
    assert response.status_code == 200, response.text
    messages: list[dict[str, Any]] = response.json()["data"]
    return messages


def tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["role"] == "tool"]


def is_error(message: dict[str, Any]) -> bool:
    return str(message["content"]).startswith("Error:")


async def builtin_charges(hosted: HostedHarness, run_id: str) -> list[dict[str, Any]]:
    rows = await charges_of_run(hosted.context.engine, run_id)
    return [row for row in rows if row["source"] == "builtin"]


async def upload(
    hosted: HostedHarness, filename: str, data: bytes, content_type: str = "", **form: str
) -> Any:
    file = (filename, data, content_type) if content_type else (filename, data)
    return await hosted.client.post("/v1/documents", files={"file": file}, data=form)


# --- text_to_speech -----------------------------------------------------------------------


async def test_a_run_speaks_text_into_a_wav_file_of_the_account(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script(
        [
            {"tool_calls": [call("text_to_speech", text=SPOKEN, language="id", voice="f3")]},
            {"content": "Here is your audio."},
        ]
    )
    run, messages = await run_agent(hosted_openai, builtin_tools=["text_to_speech"])
    assert run["status"] == "succeeded", run["error"]
    [result] = tool_results(messages)
    assert not is_error(result), result
    told = json.loads(result["content"])
    assert told["format"] == "wav" and told["url"] == f"/v1/files/{told['file_id']}/content"

    meta = (await hosted_openai.client.get(f"/v1/files/{told['file_id']}")).json()
    assert meta["content_type"] == "audio/wav" and meta["purpose"] == "text_to_speech"
    assert meta["run_id"] == run["id"] and meta["url"] == told["url"]
    content = await hosted_openai.client.get(told["url"])
    assert content.status_code == 200
    assert content.headers["content-type"] == "audio/wav"
    audio = content.content
    assert len(audio) == meta["size_bytes"] and audio[:4] == b"RIFF" and audio[8:12] == b"WAVE"
    with wave.open(io.BytesIO(audio)) as reader:
        assert (reader.getnchannels(), reader.getsampwidth()) == (1, 2)
        rate, frames = reader.getframerate(), reader.getnframes()
        samples = array("h", reader.readframes(frames))
    assert rate == 22050
    # The header's sizes agree with the bytes, and with the duration the model was told.
    assert len(audio) == 44 + 2 * frames
    assert frames / rate == pytest.approx(told["duration_seconds"], abs=0.001)
    assert told["duration_seconds"] == meta["duration_seconds"]
    # Speech at a normal pace says 6 to 25 characters a second, and is not silence.
    assert 6 <= len(SPOKEN) / told["duration_seconds"] <= 25
    assert max(abs(sample) for sample in samples) > 1000

    [charge] = await builtin_charges(hosted_openai, run["id"])
    assert charge["model_id"] == "text_to_speech" and charge["step"] == 1
    assert charge["cost_rupiah"] == Decimal(len(SPOKEN)) * 250 / 1000


async def test_the_demo_model_speaks_from_a_plain_message_once_the_balance_allows(
    hosted: HostedHarness,
) -> None:
    agent = await hosted.create_agent(tools=[], builtin_tools=BOTH)
    thread = await hosted.create_thread(agent["id"])
    message = "Read this out loud as speech: good morning"

    async def speak() -> tuple[dict[str, Any], dict[str, Any]]:
        response = await hosted.start_run(thread["id"], message)
        await hosted.work()
        run = await hosted.get_run(response.json()["id"])
        assert run["status"] == "succeeded", run["error"]
        return run, tool_results(await transcript(hosted, thread["id"]))[-1]

    # The demo model is free, but built-in tools are not: with no balance the call fails.
    run, result = await speak()
    assert is_error(result) and "has Rp0 available" in result["content"]
    await hosted.context.accounts.top_up("tester", Decimal(1_000))
    run, result = await speak()
    assert result["name"] == "text_to_speech" and not is_error(result), result
    assert json.loads(result["content"])["file_id"] in run["output"]


async def test_unknown_voice_and_language_are_error_results(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script(
        [
            {
                "tool_calls": [
                    call("text_to_speech", text="hi", voice="nobody"),
                    call("text_to_speech", text="hi", language="xx"),
                    call("text_to_speech", text=""),
                ]
            },
            {"content": "Sorry."},
        ]
    )
    run, messages = await run_agent(hosted_openai, builtin_tools=["text_to_speech"])
    assert run["status"] == "succeeded", run["error"]
    errors = [m["content"] for m in tool_results(messages)]
    assert ["voice 'nobody'" in errors[0], "language 'xx'" in errors[1], "text" in errors[2]] == [
        True,
        True,
        True,
    ]
    assert await builtin_charges(hosted_openai, run["id"]) == []


async def test_a_speech_engine_that_cannot_load_leaves_the_run_alive(
    settings_factory: Callable[..., Settings], fake_openai: FakeOpenAIServer, tmp_path: Any
) -> None:
    missing = tmp_path / "no-such-libespeak-ng.so"
    async with harness_with(settings_factory, fake_openai, tts_library=missing) as hosted:
        fake_openai.script(
            [
                {"tool_calls": [call("text_to_speech", text="Hello")]},
                {"content": "The speech engine is down, sorry."},
            ]
        )
        run, messages = await run_agent(hosted, builtin_tools=["text_to_speech"])
        assert run["status"] == "succeeded", run["error"]
        assert run["output"] == "The speech engine is down, sorry."
        [result] = tool_results(messages)
        assert is_error(result) and "cannot be loaded" in result["content"]
        assert await builtin_charges(hosted, run["id"]) == []
        # The model saw the failure as the call's result.
        last_request = fake_openai.requests()[-1]
        assert "cannot be loaded" in last_request["messages"][-1]["content"]


# --- limits -------------------------------------------------------------------------------


async def test_at_most_three_builtin_calls_run_per_model_turn(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    queries = ["refund", "password", "train", "fire"]
    fake_openai.script(
        [
            {"tool_calls": [call("rag_search", query=q) for q in queries]},
            {"tool_calls": [call("rag_search", query="fire")]},
            {"content": "Done."},
        ]
    )
    run, messages = await run_agent(hosted_openai, builtin_tools=["rag_search"])
    assert run["status"] == "succeeded", run["error"]
    results = tool_results(messages)
    assert [is_error(m) for m in results] == [False, False, False, True, False]
    assert "at most 3 built-in tool calls" in results[3]["content"]
    charges = await builtin_charges(hosted_openai, run["id"])
    assert [c["step"] for c in charges] == [1, 1, 1, 2]


async def test_builtin_charges_stop_at_the_run_ceiling(
    settings_factory: Callable[..., Settings], fake_openai: FakeOpenAIServer
) -> None:
    async with harness_with(
        settings_factory, fake_openai, rag_search_rupiah_per_call=Decimal(7_000)
    ) as hosted:
        fake_openai.script(
            [
                {"tool_calls": [call("rag_search", query="a"), call("rag_search", query="b")]},
                {"tool_calls": [call("rag_search", query="c"), call("rag_search", query="d")]},
                {"content": "Enough searching."},
            ]
        )
        run, messages = await run_agent(hosted, builtin_tools=["rag_search"])
        assert run["status"] == "succeeded", run["error"]
        results = tool_results(messages)
        # 7,000 + 7,000 = 14,000 fits; a third call would reach 21,000 > 20,000.
        assert [is_error(m) for m in results] == [False, False, True, True]
        assert "ceiling of Rp20000" in results[2]["content"]
        charges = await builtin_charges(hosted, run["id"])
        assert sum(c["cost_rupiah"] for c in charges) == Decimal(14_000)
        usage = (await hosted.client.get("/v1/usage")).json()
        builtin = [line for line in usage["data"] if line["source"] == "builtin"]
        assert [(b["model_id"], b["calls"], b["cost_rupiah"]) for b in builtin] == [
            ("rag_search", 2, 14_000)
        ]


async def test_a_turn_mixing_client_and_builtin_calls_runs_builtins_then_pauses(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script(
        [
            {
                "tool_calls": [
                    call("get_weather", city="Jakarta"),
                    call("rag_search", query="umbrella policy"),
                ]
            },
            {"content": "Sunny, and no umbrella policy was found."},
        ]
    )
    run, messages = await run_agent(hosted_openai, tools=[WEATHER_TOOL], builtin_tools=BOTH)
    assert run["status"] == "requires_action", run
    assert [c["name"] for c in run["pending_tool_calls"]] == ["get_weather"]
    [searched] = tool_results(messages)
    assert searched["name"] == "rag_search" and json.loads(searched["content"])["results"] == []

    response = await hosted_openai.answer(run, '{"temp_c": 31}')
    assert response.status_code == 200, response.text
    await hosted_openai.work()
    done = await hosted_openai.get_run(run["id"])
    assert done["status"] == "succeeded", done
    assert len(await builtin_charges(hosted_openai, run["id"])) == 1
    # The model's second call saw both results, each answering its own call once.
    answered = [
        m["tool_call_id"] for m in fake_openai.requests()[-1]["messages"] if m["role"] == "tool"
    ]
    assert sorted(answered) == sorted(c["id"] for c in messages[1]["tool_calls"])


async def test_builtin_tools_the_agent_does_not_have_are_not_run(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script([{"tool_calls": [call("rag_search", query="x")]}, {"content": "ok"}])
    run, messages = await run_agent(hosted_openai, tools=[WEATHER_TOOL])
    assert run["status"] == "succeeded", run["error"]
    [result] = tool_results(messages)
    assert is_error(result) and "no tool named 'rag_search'" in result["content"]


# --- documents and rag_search -------------------------------------------------------------


async def load_corpus(hosted: HostedHarness) -> dict[str, str]:
    """Upload the corpus; the document id of each key."""
    ids: dict[str, str] = {}
    for document in CORPUS:
        response = await upload(hosted, document.filename, document.data)
        assert response.status_code == 201, response.text
        ids[document.key] = response.json()["id"]
    return ids


async def test_rag_search_ranks_the_right_document_first(hosted: HostedHarness) -> None:
    ids = await load_corpus(hosted)
    key_of = {document_id: key for key, document_id in ids.items()}
    ranked = {}
    for question, _expected in QUESTIONS:
        found = await rag_search.search(
            hosted.context.engine, hosted.account_id, rag_search.SearchRequest(question, 3)
        )
        ranked[question] = [key_of[hit["document_id"]] for hit in found["results"]]
    firsts = {question: keys[0] if keys else None for question, keys in ranked.items()}
    assert firsts == dict(QUESTIONS), ranked


async def test_a_run_cites_documents_found_by_rag_search(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    ids = await load_corpus(hosted_openai)
    fake_openai.script(
        [
            {"tool_calls": [call("rag_search", query="cuti sakit surat dokter", top_k=2)]},
            {"content": "Bring a doctor's letter."},
        ]
    )
    run, messages = await run_agent(hosted_openai, builtin_tools=BOTH)
    assert run["status"] == "succeeded", run["error"]
    found = json.loads(tool_results(messages)[0]["content"])
    assert len(found["results"]) <= 2
    best = found["results"][0]
    assert best["document_id"] == ids["leave"] and best["title"] == "cuti-karyawan"
    assert best["chunk"] == 1 and "surat keterangan dokter" in best["text"]
    [charge] = await builtin_charges(hosted_openai, run["id"])
    assert (charge["model_id"], charge["cost_rupiah"]) == ("rag_search", Decimal(50))


async def test_documents_are_listed_shown_and_deleted(hosted: HostedHarness) -> None:
    ids = await load_corpus(hosted)
    listed = (await hosted.client.get("/v1/documents", params={"limit": 100})).json()
    assert [d["id"] for d in listed["data"]] == list(reversed(ids.values()))
    pdf = (await hosted.client.get(f"/v1/documents/{ids['server_room']}")).json()
    assert pdf["content_type"] == "application/pdf" and pdf["chunk_count"] >= 1
    assert pdf["title"] == "server-room" and pdf["object"] == "document"
    titled = await upload(hosted, "notes.md", b"# Notes\n\nQuokka sightings.", title="Field notes")
    assert titled.json()["title"] == "Field notes"
    assert titled.json()["content_type"] == "text/markdown"

    request = rag_search.SearchRequest("quokka", 3)
    engine, account = hosted.context.engine, hosted.account_id
    assert len((await rag_search.search(engine, account, request))["results"]) == 1
    deleted = await hosted.client.delete(f"/v1/documents/{titled.json()['id']}")
    assert deleted.json() == {"id": titled.json()["id"], "deleted": True}
    assert (await rag_search.search(engine, account, request))["results"] == []
    gone = await hosted.client.get(f"/v1/documents/{titled.json()['id']}")
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"


async def test_another_accounts_documents_are_not_searched(hosted: HostedHarness) -> None:
    await upload(hosted, "secret.txt", b"The vault code is kept by the quartermaster.")
    other = await hosted.new_account("other")
    other_account = await account_named(hosted.context.engine, "other")
    assert other_account is not None
    request = rag_search.SearchRequest("vault quartermaster", 3)
    engine = hosted.context.engine
    assert len((await rag_search.search(engine, hosted.account_id, request))["results"]) == 1
    assert (await rag_search.search(engine, other_account.id, request))["results"] == []
    hosted.act_as(other)
    assert (await hosted.client.get("/v1/documents")).json()["data"] == []


@pytest.mark.parametrize(
    ("filename", "data", "content_type", "status", "code"),
    [
        ("photo.png", b"\x89PNG\r\n", "image/png", 415, "unsupported_document_type"),
        ("report.docx", b"PK\x03\x04", "", 415, "unsupported_document_type"),
        ("broken.pdf", b"%PDF-1.4 this is not really a pdf", "", 400, "invalid_document"),
        ("fake.pdf", b"just text", "", 400, "invalid_document"),
        ("latin1.txt", "caf\u00e9".encode("latin-1"), "", 400, "invalid_document"),
        ("blank.md", b"  \n\n  ", "", 400, "empty_document"),
    ],
)
async def test_bad_documents_get_a_clear_4xx(
    hosted: HostedHarness, filename: str, data: bytes, content_type: str, status: int, code: str
) -> None:
    response = await upload(hosted, filename, data, content_type)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert (await hosted.client.get("/v1/documents")).json()["data"] == []


async def test_documents_over_the_size_limit_are_413(
    settings_factory: Callable[..., Settings], fake_openai: FakeOpenAIServer
) -> None:
    async with harness_with(settings_factory, fake_openai, documents_max_bytes=100) as hosted:
        assert (await upload(hosted, "small.txt", b"x" * 100)).status_code == 201
        response = await upload(hosted, "big.txt", b"x" * 101)
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "document_too_large"


async def test_an_upload_without_a_file_is_a_400(hosted: HostedHarness) -> None:
    response = await hosted.client.post("/v1/documents", json={"text": "hello"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
