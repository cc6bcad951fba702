"""The published OpenAPI description: security, error statuses and named response schemas on
every `/v1` operation, real answers that match it, and `/docs` and `/redoc` served offline."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from httpx import AsyncClient

from juru.core.states import RunStatus
from juru.http import openapi
from tests.support.hosted import HostedHarness

REPO = Path(__file__).resolve().parents[2]
HTTP_METHODS = {"get", "post", "put", "patch", "delete"}
ENVELOPE_REF = "#/components/schemas/ErrorEnvelope"


async def description(client: AsyncClient) -> dict[str, Any]:
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    published: dict[str, Any] = response.json()
    return published


def hosted_operations(published: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    found = [
        (method, path, operation)
        for path, operations in published["paths"].items()
        if path.startswith("/v1/")
        for method, operation in operations.items()
        if method in HTTP_METHODS
    ]
    assert len(found) >= 24
    return found


def validator(published: dict[str, Any], name: str) -> Any:
    """A JSON Schema validator for one component, resolving references inside the document."""
    schema = {"$ref": f"#/components/schemas/{name}", "components": published["components"]}
    return jsonschema_rs.validator_for(schema)


async def test_every_hosted_operation_declares_the_bearer_scheme(client: AsyncClient) -> None:
    published = await description(client)
    assert published["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key: `juru_live_...`.",
    }
    for method, path, operation in hosted_operations(published):
        assert operation.get("security") == [{"bearer": []}], (method, path)
    assert "security" not in published["paths"]["/health"]["get"]


async def test_hosted_errors_are_the_envelope_and_never_fastapis_422(client: AsyncClient) -> None:
    published = await description(client)
    for method, path, operation in hosted_operations(published):
        responses = operation["responses"]
        where = f"{method.upper()} {path}"
        # FastAPI's validation 422 is gone; a 422 left is a declared one, with the envelope.
        assert {"401", "429", "503"} <= set(responses), where
        if operation.get("requestBody"):
            assert {"400", "413"} <= set(responses), where
        if "{" in path:
            assert "404" in responses, where
        for status, response in responses.items():
            if status.startswith(("4", "5")):
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": ENVELOPE_REF}, (where, status)
    create_run = published["paths"]["/v1/threads/{thread_id}/runs"]["post"]["responses"]
    assert "422" in create_run  # idempotency_key_reused
    chat = published["paths"]["/v1/chat/completions"]["post"]["responses"]
    assert {"402", "404", "502"} <= set(chat)
    # The playground's document fixes FastAPI's 422 list: it stays documented there.
    assert "422" in published["paths"]["/playground/messages"]["post"]["responses"]


async def test_every_hosted_answer_has_a_named_schema(client: AsyncClient) -> None:
    published = await description(client)
    schemas = published["components"]["schemas"]
    for method, path, operation in hosted_operations(published):
        if path.endswith("/content"):
            continue  # the file's own bytes
        for status, answer in operation["responses"].items():
            if not status.startswith("2"):
                continue
            if status == "204":
                assert "content" not in answer, (method, path)
                continue
            for kind, content in answer["content"].items():
                text = json.dumps(content["schema"])
                refs = re.findall(r"#/components/schemas/(\w+)", text)
                assert refs, (method, path, status, kind)
                for name in refs:
                    schema = schemas[name]
                    assert schema["type"] == "object" and schema["properties"], (path, name)
    run = schemas["RunOut"]
    assert run["properties"]["status"] == {"$ref": "#/components/schemas/RunStatus"}
    assert schemas["RunStatus"]["enum"] == [status.value for status in RunStatus]
    assert "output" not in run["required"]
    assert "url" in schemas["FileOut"]["required"]
    event_stream = published["paths"]["/v1/chat/completions"]["post"]["responses"]["200"]
    assert "ChatCompletionChunk" in json.dumps(event_stream["content"]["text/event-stream"])
    run_stream = published["paths"]["/v1/runs/{run_id}/events"]["get"]["responses"]["200"]
    described = json.dumps(run_stream["content"]["text/event-stream"])
    assert {"RunOut", "MessageOut", "StepEventOut", "MessageDeltaOut"} <= set(
        re.findall(r"schemas/(\w+)", described)
    )
    created = published["paths"]["/v1/threads/{thread_id}/runs"]["post"]["responses"]
    assert {"200", "202"} <= set(created) and "text/event-stream" in created["200"]["content"]
    assert {"ChatCompletionChunk", "ChatCompletionOut", "ModelOut", "UsageOut"} <= set(schemas)


async def test_real_answers_match_the_published_schemas(hosted: HostedHarness) -> None:
    client = hosted.client
    published = await description(client)
    agent = await hosted.create_agent()
    validator(published, "AgentOut").validate(agent)
    thread = await hosted.create_thread(agent["id"])
    created = await client.post(
        f"/v1/threads/{thread['id']}/runs", json={"input": "Cuaca di Oslo?"}
    )
    validator(published, "RunOut").validate(created.json())
    await hosted.work()
    paused = (await client.get(f"/v1/runs/{created.json()['id']}")).json()
    assert paused["status"] == "requires_action" and "output" not in paused
    validator(published, "RunOut").validate(paused)
    refused = await client.post("/v1/agents", json={"name": ""})
    assert refused.status_code == 400
    validator(published, "ErrorEnvelope").validate(refused.json())
    models = (await client.get("/v1/models")).json()
    validator(published, "ModelListOut").validate(models)
    chat = {"model": "juru/demo", "messages": [{"role": "user", "content": "Tell me a joke"}]}
    answer = await client.post("/v1/chat/completions", json=chat)
    validator(published, "ChatCompletionOut").validate(answer.json())
    streamed = await client.post(
        "/v1/chat/completions",
        json={**chat, "stream": True, "stream_options": {"include_usage": True}},
    )
    events = [line.removeprefix("data: ") for line in streamed.text.splitlines() if line]
    assert events[-1] == "[DONE]" and len(events) > 3
    chunk = validator(published, "ChatCompletionChunk")
    for event in events[:-1]:
        chunk.validate(json.loads(event))
    assert json.loads(events[-2])["usage"]["total_tokens"] > 0


def test_a_schema_violation_is_caught_by_the_validators() -> None:
    published = {"components": {"schemas": {"X": {"type": "object", "required": ["a"]}}}}
    with pytest.raises(jsonschema_rs.ValidationError):
        validator(published, "X").validate({})


ASSET = re.compile(r"""(?:src|href|url)\s*[=:(]\s*['"]?([^'")\s>]+)""")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_docs_pages_load_every_asset_from_juru(client: AsyncClient, page: str) -> None:
    response = await client.get(page)
    assert response.status_code == 200 and "text/html" in response.headers["content-type"]
    assert "//" not in re.sub(r"<!--.*?-->", "", response.text).replace("://juru.test", "")
    assets = [url for url in ASSET.findall(response.text) if not url.startswith("#")]
    scripts = [url for url in assets if url.endswith(".js")]
    assert scripts, response.text
    for url in {*assets, "/openapi.json"}:
        assert url.startswith("/"), url
        served = await client.get(url)
        assert served.status_code == 200 and len(served.content) > 100, url


def test_the_docs_assets_ship_inside_the_package() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["juru"]
    package = REPO / "src" / "juru"
    files = [path.relative_to(package).as_posix() for path in openapi.STATIC_DIR.iterdir()]
    assert {"swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js"} <= {
        name.rsplit("/", 1)[-1] for name in files
    }
    for name in files:
        assert any(fnmatch.fnmatch(name, pattern) for pattern in patterns), name
