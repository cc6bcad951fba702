"""The console (`/console`) in Chromium against a real `juru serve`: signing in, an agent with a
client tool from creation to a streamed, paid answer, a tool output typed by hand, a cancel,
the playground's review flow, and usage with a document that `rag_search` then finds.

Every test saves a screenshot of its last page under `test-results/screenshots/`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.test_hosted_runs import FAKE_MODEL, Api, FakeOpenAIProcess, juru_serve
from tests.support.hosted import WEATHER_TOOL
from tests.support.server import REPO, api_key

pytestmark = pytest.mark.e2e
SCREENSHOTS = REPO / "test-results" / "screenshots"
STEP_SECONDS = 60_000  # ms: a browser wait for one model step on a slow, busy machine
JAKARTA_CALL = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Jakarta"}}]}

expect.set_options(timeout=STEP_SECONDS)


@dataclass(frozen=True)
class Server:
    base_url: str
    key: str
    fake: FakeOpenAIProcess

    def api(self) -> Api:
        return Api(self.base_url, self.key)

    def open_gate(self, name: str) -> None:
        response = httpx.post(f"{self.fake.root}/_control/open", json={"gate": name})
        assert response.status_code == 200, response.text


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("console")
    fake = FakeOpenAIProcess(folder / "fake_openai.log").start()
    database_url = f"sqlite:///{folder}/juru.db"
    try:
        with juru_serve(
            database_url, folder / "serve.log", PLAYGROUND_ENABLED="true", **fake.env()
        ) as serve:
            yield Server(serve.base_url, api_key(database_url), fake)
    finally:
        fake.stop()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    scheme = "dark" if "dark" in request.node.name else "light"
    context = browser.new_context(viewport={"width": 1200, "height": 900}, color_scheme=scheme)
    opened = context.new_page()
    failures: list[str] = []
    opened.on("pageerror", lambda error: failures.append(str(error)))
    try:
        yield opened
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        opened.screenshot(path=SCREENSHOTS / f"console-{request.node.name}.png", full_page=True)
    finally:
        context.close()
    assert not failures, f"uncaught errors in the page: {failures}"


def sign_in(page: Page, server: Server, hash_path: str = "") -> None:
    page.goto(f"{server.base_url}/console/")
    page.click("#use-local-key")
    expect(page.locator(".tab.current")).to_have_text("Agents")
    if hash_path:
        page.goto(f"{server.base_url}/console/{hash_path}")


def create_agent(server: Server, **body: Any) -> dict[str, Any]:
    with server.api() as api:
        return api.create_agent(**body)


def test_sign_in_keeps_the_key_in_the_tab_only(page: Page, server: Server) -> None:
    page.goto(f"{server.base_url}/console/")
    page.fill("#api-key", "juru_live_not_a_key_at_all")
    page.click("button[type=submit]")
    refusal = page.get_by_role("alert")
    expect(refusal).to_be_visible()
    assert "{" not in refusal.inner_text()  # a sentence, not the JSON body

    page.click("#use-local-key")
    expect(page.locator(".tab.current")).to_have_text("Agents")
    assert page.evaluate("sessionStorage.getItem('juru.apiKey')") == server.key
    assert page.evaluate("localStorage.length") == 0
    assert page.context.cookies() == []
    assert server.key not in page.url
    page.reload()  # the same tab stays signed in
    expect(page.locator(".tab.current")).to_have_text("Agents")
    page.click("text=Sign out")
    expect(page.locator("#api-key")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('juru.apiKey')") is None


def test_an_agent_with_a_client_tool_streams_a_paid_answer(page: Page, server: Server) -> None:
    answer = "Jakarta is sunny and 31 degrees today, with a light breeze from the sea."
    server.fake.script([JAKARTA_CALL, {"content": answer, "hold": "answer"}])
    sign_in(page, server, "#/agents/new")
    page.fill("input[name=name]", "Cuaca di konsol")
    page.select_option("select[name=model_id]", FAKE_MODEL)
    tools = page.locator("textarea[name=tools]")

    tools.fill("[{")
    page.click("text=Create agent")
    expect(page.get_by_role("alert")).to_contain_text("not valid JSON")
    bogus = [{**WEATHER_TOOL, "function": {"name": "get_weather", "parameters": {"type": "x"}}}]
    tools.fill(json.dumps(bogus))
    page.click("text=Create agent")
    expect(page.get_by_role("alert")).to_contain_text("tools.0.function.parameters")

    tools.fill(json.dumps([WEATHER_TOOL]))
    page.click("text=Create agent")
    page.click("text=New thread")
    page.fill("#composer", "What is the weather in Jakarta?")
    page.click("button:has-text('Send')")

    output = page.locator("textarea[data-tool-call]")
    expect(output).to_be_visible()
    expect(page.locator(".tool-outputs pre")).to_contain_text('"city": "Jakarta"')
    output.fill("sunny, 31 C")
    page.click("#submit-outputs")
    # The answer's first piece is on the page while the provider holds the rest back.
    draft = page.locator(".message.streaming .content")
    expect(draft).not_to_be_empty()
    assert answer.startswith(draft.inner_text())
    assert draft.inner_text() != answer
    server.open_gate("answer")

    expect(page.locator("#run-status")).to_have_text("succeeded")
    expect(page.locator(".message.streaming")).to_have_count(0)
    roles = page.locator(".transcript .message").evaluate_all("els => els.map(e => e.className)")
    assert roles == ["message user", "message assistant", "message tool", "message assistant"]
    expect(page.locator(".transcript .message").last).to_contain_text(answer)
    expect(page.locator("#run-steps")).to_have_text(re.compile(r"^step 2 of"))
    thread_id = page.url.rsplit("/", 1)[-1]
    with server.api() as api:
        runs = api.http.get(f"/v1/threads/{thread_id}/runs").json()["data"]
    assert runs[-1]["status"] == "succeeded" and runs[-1]["cost_rupiah"] > 0
    expect(page.locator("#run-cost")).not_to_have_text("Rp 0")


def test_the_steps_of_a_called_agent_are_shown_under_the_call(page: Page, server: Server) -> None:
    call = {"name": "researcher", "arguments": {"input": "Find a fact about Bandung"}}
    server.fake.script(
        [
            {"tool_calls": [call]},  # the parent calls the other agent
            {"content": "Bandung sits 768 m above the sea."},  # the child answers
            {"content": "Bandung is high up: 768 m."},  # the parent, with the child's answer
        ]
    )
    child = create_agent(server, name="Peneliti", model_id=FAKE_MODEL)
    tool = {"agent_id": child["id"], "name": "researcher", "description": "Finds facts."}
    parent = create_agent(server, name="Ketua", model_id=FAKE_MODEL, agent_tools=[tool])
    with server.api() as api:
        thread = api.create_thread(parent["id"])
    sign_in(page, server, f"#/threads/{thread['id']}")
    page.fill("#composer", "Tell me about Bandung")
    page.click("button:has-text('Send')")

    expect(page.locator("#run-status")).to_have_text("succeeded")
    nested = page.locator(".transcript .message.child.depth-1")
    expect(nested.last).to_contain_text("Bandung sits 768 m above the sea.")
    expect(nested.first).to_contain_text("called agent · depth 1")
    expect(page.locator(".transcript .message").last).to_contain_text("768 m.")
    # The child's step is not counted as the parent's: the parent took two.
    expect(page.locator("#run-steps")).to_have_text(re.compile(r"^step 2 of"))


def test_a_slow_run_is_cancelled_from_the_thread(page: Page, server: Server) -> None:
    server.fake.script([JAKARTA_CALL, {"content": "a very slow answer", "hold": "slow"}])
    agent = create_agent(server, model_id=FAKE_MODEL, tools=[WEATHER_TOOL])
    with server.api() as api:
        thread = api.create_thread(agent["id"])
    try:
        sign_in(page, server, f"#/threads/{thread['id']}")
        page.fill("#composer", "Weather in Jakarta, slowly")
        page.click("button:has-text('Send')")
        page.locator("textarea[data-tool-call]").fill("sunny")
        page.click("#submit-outputs")
        expect(page.locator(".message.streaming")).to_have_count(1)  # the call is in flight
        expect(page.locator("#run-status")).to_have_text("running")
        page.click("#cancel-run")
        expect(page.locator("#run-status")).to_have_text("cancelled")
        expect(page.locator("#cancel-run")).to_have_count(0)
        expect(page.locator(".message.streaming")).to_have_count(0)
        expect(page.locator(".message.cut-off")).to_contain_text("cancelled while this was written")
        expect(page.locator("button:has-text('Send')")).to_be_enabled()
    finally:
        server.open_gate("slow")


def test_the_playground_tab_reviews_tool_calls(page: Page, server: Server) -> None:
    sign_in(page, server, "#/playground")
    page.select_option("#feature", "Human-in-the-loop")
    turns = page.locator(".timeline .turn")
    submit = page.locator("form.review:not(.answered) .submit-review")

    page.locator(".example").first.click()
    expect(submit).to_be_visible()
    expect(turns.last.locator(".step")).to_contain_text("send_email")
    submit.click()  # approve is the first choice
    expect(turns.last.locator(".answer")).to_be_visible()
    expect(page.locator("form.review.answered")).to_have_count(1)  # answered: frozen
    assert page.locator("form.review").evaluate("form => form.inert")
    expect(turns.last.locator(".event.result")).to_contain_text("send_email")
    expect(turns.last.locator(".event.failed")).to_have_count(0)

    page.click("text=New conversation")
    page.locator(".example").first.click()
    review = page.locator(".review-item")
    review.locator("input[value=edit]").check()
    arguments = review.locator("textarea")
    edited = {**json.loads(arguments.input_value()), "to": "budi@example.com"}
    arguments.fill("{not json")
    submit.click()
    expect(page.locator(".review .error")).to_contain_text("not a JSON object")
    arguments.fill(json.dumps(edited))
    submit.click()
    expect(turns.last.locator(".event.call")).to_contain_text("budi@example.com")
    expect(turns.last.locator(".answer")).to_be_visible()

    page.click("text=New conversation")
    page.locator(".example").first.click()
    review.locator("input[value=reject]").check()
    review.locator("input[aria-label='Reject message']").fill("not to Ana, not today")
    submit.click()
    expect(turns.last.locator(".event.failed")).to_contain_text("not to Ana, not today")
    expect(turns.last.locator(".turn-end")).not_to_contain_text("Running")


def test_usage_shows_spend_and_a_document_rag_search_finds_dark(
    page: Page, server: Server, tmp_path: Path
) -> None:
    with server.api() as api:
        charged = api.http.post(
            "/v1/chat/completions",
            json={"model": FAKE_MODEL, "messages": [{"role": "user", "content": "halo"}]},
        )
        assert charged.status_code == 200, charged.text
        spent = api.http.get("/v1/usage").json()["total_rupiah"]
        speaker = api.create_agent(model_id="juru/demo", builtin_tools=["text_to_speech"])
        spoken = api.create_run(api.create_thread(speaker["id"])["id"], "Text to speech: halo")
        assert api.run(spoken["id"], wait=30)["status"] == "succeeded"
    assert spent > 0
    sign_in(page, server, "#/usage")
    speech = page.locator("tr[data-file-id]").first
    expect(speech).to_contain_text("text_to_speech")
    speech.locator("button:has-text('Play')").click()
    # The browser decoded the WAV it fetched with the key (an <audio src> could not send it).
    page.wait_for_function(
        "() => { const a = document.querySelector('tr[data-file-id] audio');"
        " return a && a.src.startsWith('blob:') && a.readyState >= 1 && a.duration > 0; }"
    )
    expect(page.locator("svg.chart rect.bar").first).to_be_visible()
    expect(page.locator("#usage-spent")).not_to_have_text("Rp 0")
    expect(page.locator(".card", has_text="By model")).to_contain_text(FAKE_MODEL)

    handbook = tmp_path / "handbook.md"
    handbook.write_text("# Handbook\n\nEvery employee gets twelve kelapa days of leave a year.\n")
    page.set_input_files("input[type=file]", handbook)
    page.fill("input[name=title]", "Handbook kelapa")
    page.click("button:has-text('Upload')")
    expect(page.get_by_role("status")).to_contain_text("Added “Handbook kelapa”")
    expect(page.locator("table.list", has_text="Handbook kelapa")).to_be_visible()

    agent = create_agent(server, model_id="juru/demo", builtin_tools=["rag_search"])
    with server.api() as api:
        thread = api.create_thread(agent["id"])
    page.goto(f"{server.base_url}/console/#/threads/{thread['id']}")
    page.fill("#composer", "Search the handbook: how many kelapa days of leave?")
    page.click("button:has-text('Send')")
    expect(page.locator("#run-status")).to_have_text("succeeded")
    expect(page.locator(".message.tool")).to_contain_text("twelve kelapa days")


def test_an_agent_is_edited_and_deleted(page: Page, server: Server) -> None:
    agent = create_agent(server, name="Penyunting", model_id="juru/demo", tools=[WEATHER_TOOL])
    sign_in(page, server, f"#/agents/{agent['id']}")
    page.fill("textarea[name=system_prompt]", "Answer in Indonesian.")
    page.fill("input[name=max_steps]", "99")
    page.click("button:has-text('Save')")
    expect(page.get_by_role("alert")).to_contain_text("max_steps")
    page.fill("input[name=max_steps]", "7")
    page.locator("label.check", has_text="rag_search").locator("input").check()
    page.click("button:has-text('Save')")
    expect(page.get_by_role("status")).to_have_text("Saved.")
    with server.api() as api:
        saved = api.http.get(f"/v1/agents/{agent['id']}").json()
    assert saved["system_prompt"] == "Answer in Indonesian."
    assert saved["max_steps"] == 7 and saved["builtin_tools"] == ["rag_search"]
    assert saved["tools"] == [WEATHER_TOOL]

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("button:has-text('Delete')")
    expect(page.locator("h1")).to_have_text("Agents")
    expect(page.locator("#view table.list, #view p.empty")).to_be_visible()  # the list is in
    expect(page.locator("#view")).not_to_contain_text("Penyunting")
    with server.api() as api:
        assert api.http.get(f"/v1/agents/{agent['id']}").status_code == 404
