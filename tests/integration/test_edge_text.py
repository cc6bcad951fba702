"""Text is checked at the edge: every route of the app's own OpenAPI description (so a new route
cannot be forgotten) is sent a NUL character and a lone surrogate in every string its body
schema has, in every path and query parameter and in the headers Juru stores. Each answer is a
400 naming the field (404 in a path), in its face's error shape, never a 5xx; afterwards every
object reads back exactly as before, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from httpx import Response

from juru.app import create_app
from juru.core.clock import ManualClock
from juru.settings import Settings
from tests.conftest import start_client
from tests.support.hosted import WEATHER_TOOL, HostedHarness, assert_envelope

NUL = "a\u0000b"
SURROGATE = "a\ud800b"
BAD_STRINGS = [pytest.param(NUL, id="nul"), pytest.param(SURROGATE, id="surrogate")]
Path = tuple[str | int, ...]


@pytest.fixture
async def edges(settings_factory: Callable[..., Settings]) -> AsyncIterator[HostedHarness]:
    """Every face on (playground, runtime, `/v1`), no workers, and one of each object."""
    app = create_app(settings_factory(workers=0, runtime_enabled=True), clock=ManualClock())
    async for client in start_client(app):
        harness = HostedHarness(app, client, ManualClock())
        await harness.sign_in()
        yield harness


def resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = spec["components"]["schemas"][name]
    return schema


def string_paths(spec: dict[str, Any], schema: dict[str, Any], depth: int = 0) -> Iterator[Path]:
    """Where a string can go in a body of `schema`: each path ends in a string (or free) slot;
    a free-form object gets the key `k`."""
    schema = resolve(spec, schema)
    if depth > 6:
        return
    alternatives = schema.get("anyOf", []) + schema.get("oneOf", []) + schema.get("allOf", [])
    for alternative in alternatives:
        yield from string_paths(spec, alternative, depth + 1)
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        for name, child in schema.get("properties", {}).items():
            for rest in string_paths(spec, child, depth + 1):
                yield (name, *rest)
        extra = schema.get("additionalProperties", not schema.get("properties"))
        if extra is not False:
            child = extra if isinstance(extra, dict) else {}
            for rest in string_paths(spec, child, depth + 1):
                yield ("k", *rest)
    elif kind == "array":
        for rest in string_paths(spec, schema.get("items", {}), depth + 1):
            yield (0, *rest)
    elif kind == "string" or (kind is None and not alternatives):
        yield ()


def body_with(path: Path, value: Any) -> Any:
    for part in reversed(path):
        value = [value] if isinstance(part, int) else {part: value}
    return value


def dotted(path: Path) -> str:
    return ".".join(str(part) for part in path)


def operations(spec: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for route, methods in spec["paths"].items():
        for method, operation in methods.items():
            yield method.upper(), route, operation


async def objects(edges: HostedHarness) -> dict[str, str]:
    """One object behind each path parameter, so attacks reach routes that would find it."""
    agent = await edges.create_agent(tools=[WEATHER_TOOL])
    thread = await edges.create_thread(agent["id"])
    run = (await edges.start_run(thread["id"], key="first")).json()
    files = {"file": ("notes.md", b"# Notes\n\nMedan is sunny.", "text/markdown")}
    document = (await edges.client.post("/v1/documents", files=files)).json()
    return {
        "agent_id": agent["id"],
        "thread_id": thread["id"],
        "run_id": run["id"],
        "document_id": document["id"],
        "file_id": "file_00000000000000aaaaaaaaaa",
        "model_id": "juru/demo",
    }


def fill(route: str, ids: dict[str, str], bad: str | None = None) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: bad if bad is not None else ids[m.group(1)], route)


def assert_refused(
    response: Response, route: str, status: int, field: str | None, listed: bool = True
) -> None:
    """The refusal in the shape of the route's face, naming `field` (in `fields` too where the
    edge refused it: `listed`); never a 5xx."""
    assert response.status_code == status, (route, field, response.text)
    body = response.json()
    if route.startswith("/api/"):
        assert set(body) == {"error"} and isinstance(body["error"], str), body
        message = body["error"]
    elif route.startswith(("/playground", "/chat")):
        assert set(body) == {"detail"} and isinstance(body["detail"], str), body
        message = body["detail"]
    else:
        assert_envelope(body)
        message = body["error"]["message"]
        if field is not None and listed:
            assert [item["path"] for item in body["error"]["fields"]] == [field], body
    if field is not None:
        assert field in message, body


async def snapshot(
    edges: HostedHarness, spec: dict[str, Any], ids: dict[str, str]
) -> dict[str, Any]:
    """Every GET route that needs nothing but the ids, read with 200."""
    views = {}
    for method, route, operation in operations(spec):
        if method != "GET" or "file_id" in route:
            continue
        if "text/event-stream" in operation["responses"]["200"].get("content", {}):
            continue  # a run's stream follows the (unfinished) run until it ends
        response = await edges.client.get(fill(route, ids))
        assert response.status_code == 200, (route, response.text)
        views[route] = response.json() if "json" in response.headers["content-type"] else None
    return views


@pytest.mark.parametrize("bad", BAD_STRINGS)
async def test_every_string_of_every_route_is_checked_before_it_is_used(
    edges: HostedHarness, bad: str
) -> None:
    spec = edges.app.openapi()
    ids = await objects(edges)
    before = await snapshot(edges, spec, ids)
    attacked: set[tuple[str, str]] = set()
    for method, route, operation in operations(spec):
        parameters = operation.get("parameters", [])
        for parameter in parameters:
            name = parameter["name"]
            where = parameter["in"]
            if where == "path" and bad == NUL:
                response = await edges.client.request(method, fill(route, ids, "x%00y"))
                assert_refused(response, route, 404, None)
            elif where == "query" and bad == NUL:
                url = fill(route, ids)
                response = await edges.client.request(method, url, params={name: bad})
                assert_refused(response, route, 400, f"query.{name}")
            elif where == "header" and bad == NUL:
                response = await edges.client.request(
                    method, fill(route, ids), headers={name: bad}, json={"input": "hi"}
                )
                assert_refused(response, route, 400, f"header.{name}")
            attacked.add((method, route))
        content = (operation.get("requestBody") or {}).get("content", {})
        if "application/json" in content:
            schema = content["application/json"]["schema"]
            paths = sorted(set(string_paths(spec, schema)), key=dotted)
            assert paths, (route, schema)
            for path in paths:
                body = json.dumps(body_with(path, bad))
                response = await edges.client.request(
                    method,
                    fill(route, ids),
                    content=body,
                    headers={"content-type": "application/json"},
                )
                assert_refused(response, route, 400, dotted(path) or "body")
                if path and path[-1] == "k":
                    keyed = json.dumps(body_with((*path[:-1], bad), "v"))
                    response = await edges.client.request(
                        method,
                        fill(route, ids),
                        content=keyed,
                        headers={"content-type": "application/json"},
                    )
                    assert_refused(response, route, 400, dotted(path[:-1]) or "body")
            attacked.add((method, route))
        if "multipart/form-data" in content:
            await attack_upload(edges, route, bad)
            attacked.add((method, route))
    unchecked = {
        (method, route)
        for method, route, operation in operations(spec)
        if operation.get("parameters") or operation.get("requestBody")
    } - attacked
    assert not unchecked
    assert await snapshot(edges, spec, ids) == before


BOUNDARY = "edge-boundary"


def multipart_file(filename: bytes, data: bytes) -> bytes:
    """A one-file form written by hand: httpx would percent-encode the file name."""
    return b"".join(
        [
            f"--{BOUNDARY}\r\n".encode(),
            b'Content-Disposition: form-data; name="file"; filename="' + filename + b'"\r\n',
            b"Content-Type: text/plain\r\n\r\n",
            data,
            f"\r\n--{BOUNDARY}--\r\n".encode(),
        ]
    )


async def attack_upload(edges: HostedHarness, route: str, bad: str) -> None:
    """The form's strings (title, file name) and the text of the file itself."""
    encoded = bad.encode("utf-8", "surrogatepass")
    if bad == NUL:
        # (A surrogate cannot be sent in a form's fields: its bytes are no UTF-8.)
        files = {"file": ("notes.txt", b"plain words", "text/plain")}
        titled = await edges.client.post(route, files=files, data={"title": bad})
        assert_refused(titled, route, 400, "title", listed=False)
        named = await edges.client.post(
            route,
            content=multipart_file(b"x" + encoded + b".txt", b"words"),
            headers={"content-type": f"multipart/form-data; boundary={BOUNDARY}"},
        )
        assert_refused(named, route, 400, "file.filename", listed=False)
    content = await edges.client.post(route, files={"file": ("notes.txt", encoded, "text/plain")})
    # A NUL is refused as such; a surrogate's bytes are not UTF-8 at all.
    assert_refused(content, route, 400, None)
    assert content.json()["error"]["code"] == "invalid_document"
