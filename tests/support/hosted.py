"""Helpers for tests of the Hosted Agents API: an app with a manual clock and a test worker."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from fastapi import FastAPI
from httpx import AsyncClient, Response

from juru.context import AppContext
from juru.core.clock import ManualClock
from juru.engine.worker import Reaper, Worker
from juru.store.accounts import account_named
from juru.tools import text_to_speech

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}

AGENT_FIELDS = frozenset(
    {
        "id",
        "name",
        "model_id",
        "system_prompt",
        "tools",
        "builtin_tools",
        "agent_tools",
        "max_steps",
        "mcp_servers",
        "created_at",
        "updated_at",
    }
)
RUN_FIELDS = frozenset(
    {
        "id",
        "thread_id",
        "agent_id",
        "parent_run_id",
        "status",
        "step_count",
        "max_steps",
        "cost_rupiah",
        "pending_tool_calls",
        "error",
        "created_at",
        "updated_at",
    }
)


def demo_answer(tool: str, output: str) -> str:
    """The `juru/demo` model's answer from one tool result: a sentence quoting it."""
    return f"[Juru demo model] The tool {tool} returned: {output.strip().rstrip('.')}."


def api_error(response: Response, status: int, code: str) -> str:
    """Assert the `/v1` error shape, status and code; return the message."""
    assert response.status_code == status, response.text
    body = response.json()
    assert_envelope(body)
    assert body["error"]["code"] == code, body
    message: str = body["error"]["message"]
    return message


def assert_envelope(body: Any) -> None:
    """The one error shape: `code` and `message`, and `fields` (path and reason) for shape
    errors; never a library's links."""
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert set(error) <= {"code", "message", "fields"} and {"code", "message"} <= set(error), body
    assert re.fullmatch(r"[a-z][a-z0-9_]*", error["code"]), body
    assert isinstance(error["message"], str) and error["message"], body
    assert "http://" not in error["message"] and "https://" not in error["message"], body
    if "fields" in error:
        assert error["code"] in ("invalid_request", "invalid_text"), body
        assert error["fields"], body
        for field in error["fields"]:
            assert set(field) == {"path", "reason"}, body
            assert isinstance(field["path"], str) and isinstance(field["reason"], str), body


@dataclass
class HostedHarness:
    """An app without background workers: tests run the worker step by step."""

    app: FastAPI
    client: AsyncClient
    clock: ManualClock
    workers: list[Worker] = field(default_factory=list)
    default_worker: Worker | None = None
    serving: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    account_id: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def context(self) -> AppContext:
        context: AppContext = self.app.state.context
        return context

    def worker(self, name: str = "test-worker") -> Worker:
        """A worker that the runs it pauses are handed back to when they resume (as a
        serving worker's are); it works only when a test calls `fill_slots`."""
        worker = Worker(self.context.run_context(), concurrency=8, name=name)
        self.serving.enter_context(worker.serving())
        self.workers.append(worker)
        return worker

    async def stop_workers(self) -> None:
        for worker in self.workers:
            await worker.stop()
        self.serving.close()

    async def reap(self) -> int:
        """One reaper sweep at the clock's current time; how many runs it ended."""
        return await Reaper(self.context.run_context()).reap_once()

    async def new_account(
        self, name: str, tier: str = "paid", balance: Decimal | int = 0
    ) -> dict[str, str]:
        """A new account with a key: the headers that act for it."""
        await self.context.accounts.create_account(name, tier, Decimal(balance))
        issued = await self.context.accounts.create_key(name)
        return {"Authorization": f"Bearer {issued.secret}"}

    async def sign_in(self, name: str = "tester", **account: Any) -> str:
        """Make the harness's client act for a new account; returns the account id."""
        self.headers = await self.new_account(name, **account)
        self.client.headers.update(self.headers)
        found = await account_named(self.context.engine, name)
        assert found is not None
        self.account_id = found.id
        return found.id

    def act_as(self, headers: dict[str, str] | None) -> None:
        """Send the next requests with another account's key (None: with the harness's own)."""
        self.client.headers.update(headers or self.headers)

    async def work(self) -> None:
        """Execute every run that needs a worker, until none is left (with the same worker
        each time: the runs it paused come back to it when they resume)."""
        if self.default_worker is None:
            self.default_worker = self.worker()
        while await self.default_worker.fill_slots():
            await self.default_worker.drain()

    async def create_agent(self, **overrides: Any) -> dict[str, Any]:
        body = {"name": "Weather", "model_id": "juru/demo", "tools": [WEATHER_TOOL], **overrides}
        response = await self.client.post("/v1/agents", json=body)
        assert response.status_code == 201, response.text
        agent: dict[str, Any] = response.json()
        return agent

    async def create_thread(self, agent_id: str) -> dict[str, Any]:
        response = await self.client.post(f"/v1/agents/{agent_id}/threads", json={})
        assert response.status_code == 201, response.text
        thread: dict[str, Any] = response.json()
        return thread

    async def start_run(
        self,
        thread_id: str,
        run_input: Any = "What is the weather in Jakarta?",
        key: str | None = None,
    ) -> Response:
        headers = {"Idempotency-Key": key} if key else {}
        return await self.client.post(
            f"/v1/threads/{thread_id}/runs", json={"input": run_input}, headers=headers
        )

    async def new_run(self, **agent: Any) -> dict[str, Any]:
        """A queued run on a fresh agent and thread."""
        created = await self.create_agent(**agent)
        thread = await self.create_thread(created["id"])
        response = await self.start_run(thread["id"])
        assert response.status_code == 202, response.text
        run: dict[str, Any] = response.json()
        return run

    async def get_run(self, run_id: str) -> dict[str, Any]:
        response = await self.client.get(f"/v1/runs/{run_id}")
        assert response.status_code == 200, response.text
        run: dict[str, Any] = response.json()
        return run

    async def answer(self, run: dict[str, Any], output: str = '{"temp_c": 32}') -> Response:
        outputs = [{"tool_call_id": c["id"], "output": output} for c in run["pending_tool_calls"]]
        return await self.client.post(
            f"/v1/runs/{run['id']}/tool_outputs", json={"outputs": outputs}
        )

    async def speech_file(self, text: str = "Hello") -> str:
        """A speech file of the harness's account, made the way `text_to_speech` makes it."""
        builtins = self.context.builtins
        target = text_to_speech.SpeechTarget(
            builtins.engine, builtins.storage, self.account_id, None, self.clock.now()
        )
        request = text_to_speech.SpeechRequest(text, "en", None)
        told = await text_to_speech.speak(request, builtins.synthesizer, target)
        file_id: str = told["file_id"]
        return file_id

    async def upload_document(self, filename: str, data: bytes) -> str:
        response = await self.client.post("/v1/documents", files={"file": (filename, data)})
        assert response.status_code == 201, response.text
        document_id: str = response.json()["id"]
        return document_id
