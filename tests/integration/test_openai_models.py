"""The official `openai` SDK against Juru's models: list, retrieve (ids hold a slash), and a
paid model whose provider key is missing (a 4xx the SDK does not retry)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import openai
import pytest

from juru.models.catalog import CATALOG_CREATED
from tests.support.hosted import HostedHarness


@pytest.fixture
def sent() -> list[httpx.Request]:
    return []


@pytest.fixture
async def sdk(
    hosted: HostedHarness, sent: list[httpx.Request]
) -> AsyncIterator[openai.AsyncOpenAI]:
    """The SDK with its default retries, over the app in process; `sent` records each request."""

    async def record(request: httpx.Request) -> None:
        sent.append(request)

    transport = httpx.ASGITransport(app=hosted.app)
    async with httpx.AsyncClient(transport=transport, event_hooks={"request": [record]}) as http:
        yield openai.AsyncOpenAI(
            base_url="http://juru.test/v1",
            api_key=hosted.headers["Authorization"].removeprefix("Bearer "),
            http_client=http,
        )


async def test_models_list_in_openais_shape(sdk: openai.AsyncOpenAI) -> None:
    models = [model async for model in sdk.models.list()]
    by_id = {model.id: model for model in models}
    demo = by_id["juru/demo"]
    assert (demo.object, demo.created, demo.owned_by) == ("model", CATALOG_CREATED, "juru")
    assert by_id["openrouter/openai/gpt-4o-mini"].owned_by == "openrouter"
    extra = demo.model_extra or {}
    assert extra["agents"] is True and extra["input_rupiah_per_million"] == 0
    assert all(isinstance(model.created, int) for model in models)


async def test_models_retrieve_takes_ids_with_slashes(
    sdk: openai.AsyncOpenAI, sent: list[httpx.Request]
) -> None:
    demo = await sdk.models.retrieve("juru/demo")
    assert sent[-1].url.path == "/v1/models/juru/demo"
    assert (demo.id, demo.object, demo.owned_by) == ("juru/demo", "model", "juru")
    nested = await sdk.models.retrieve("openrouter/openai/gpt-4o-mini")
    assert nested.id == "openrouter/openai/gpt-4o-mini"
    with pytest.raises(openai.NotFoundError) as missing:
        await sdk.models.retrieve("juru/nope")
    assert missing.value.code == "model_not_found"


async def test_a_paid_model_without_its_key_is_a_400_naming_the_variable(
    sdk: openai.AsyncOpenAI, sent: list[httpx.Request]
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await sdk.chat.completions.create(
            model="openai/gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )
    assert refused.value.code == "provider_not_configured"
    assert "OPENAI_API_KEY" in refused.value.message
    assert len(sent) == 1  # not retried
