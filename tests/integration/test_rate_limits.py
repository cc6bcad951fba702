"""Per-account rate limits on `/v1`: a moving window per account sized by its tier, 429 with
`Retry-After` past it, `X-RateLimit-*` on every answer, and one budget across replicas when
the windows are counted in Redis."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from httpx import AsyncClient, Response
from sqlalchemy import func, select

from juru.app import create_app
from juru.settings import Settings
from juru.store.tables import agents
from tests.conftest import start_client
from tests.support.hosted import api_error

REDIS_URL = "redis://127.0.0.1:6379"


@asynccontextmanager
async def api(settings: Settings) -> AsyncIterator[tuple[AsyncClient, Any]]:
    app = create_app(settings)
    async for client in start_client(app):
        yield client, app.state.context


async def key_for(context: Any, name: str, tier: str = "paid") -> dict[str, str]:
    await context.accounts.create_account(name, tier, 0)
    issued = await context.accounts.create_key(name)
    return {"Authorization": f"Bearer {issued.secret}"}


def limits(response: Response) -> tuple[int, int, int]:
    headers = response.headers
    return (
        int(headers["X-RateLimit-Limit"]),
        int(headers["X-RateLimit-Remaining"]),
        int(headers["X-RateLimit-Reset"]),
    )


async def test_past_the_limit_is_429_with_retry_after(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(workers=0, tier_rate_limits={"paid": "3/minute"})
    async with api(settings) as (client, context):
        headers = await key_for(context, "acme")
        seen = []
        for _ in range(3):
            response = await client.get("/v1/agents", headers=headers)
            assert response.status_code == 200, response.text
            seen.append(limits(response))
        assert [(limit, remaining) for limit, remaining, _ in seen] == [(3, 2), (3, 1), (3, 0)]
        assert all(0 < reset <= 60 for _, _, reset in seen)

        refused = await client.post("/v1/agents", json={"name": "x"}, headers=headers)
        message = api_error(refused, 429, "rate_limit_exceeded")
        assert "3 requests" in message
        assert 0 < int(refused.headers["Retry-After"]) <= 60
        assert limits(refused)[:2] == (3, 0)
        async with context.engine.connect() as connection:
            assert await connection.scalar(select(func.count()).select_from(agents)) == 0
        other = await key_for(context, "other")
        assert (await client.get("/v1/agents", headers=other)).status_code == 200


async def test_tiers_have_their_own_limits(settings_factory: Callable[..., Settings]) -> None:
    tiers = {"paid": "2/minute", "corporate": "5/minute"}
    async with api(settings_factory(workers=0, tier_rate_limits=tiers)) as (client, context):
        paid = await key_for(context, "small", "paid")
        corporate = await key_for(context, "big", "corporate")
        paid_codes = [(await client.get("/v1/models", headers=paid)).status_code for _ in range(3)]
        corporate_codes = [
            (await client.get("/v1/models", headers=corporate)).status_code for _ in range(6)
        ]
        assert paid_codes == [200, 200, 429]
        assert corporate_codes == [200] * 5 + [429]


async def fill_window(client: AsyncClient, headers: dict[str, str]) -> Response:
    """Send requests until one is refused; that refusal."""
    for _ in range(100):
        response = await client.get("/v1/agents", headers=headers)
        if response.status_code == 429:
            return response
    raise AssertionError("the window never filled")


async def test_requests_pass_again_once_the_window_has_moved_on(
    settings_factory: Callable[..., Settings],
) -> None:
    async with api(settings_factory(workers=0, tier_rate_limits={"paid": "2/second"})) as (
        client,
        context,
    ):
        headers = await key_for(context, "acme")
        refused = await fill_window(client, headers)
        retry_after = int(refused.headers["Retry-After"])
        assert retry_after == 1
        refused_at = time.monotonic()
        deadline = refused_at + 10
        while True:
            response = await client.get("/v1/agents", headers=headers)
            if response.status_code == 200:
                break
            assert response.status_code == 429
            assert time.monotonic() < deadline, "the window never moved on"
            await asyncio.sleep(0.05)  # polling interval, not synchronisation
        assert limits(response)[0] == 2


@pytest.mark.redis
async def test_replicas_share_one_budget_in_redis(
    settings_factory: Callable[..., Settings],
) -> None:
    # Every run uses fresh account ids, so windows of earlier runs never interfere.
    options = {
        "workers": 0,
        "tier_rate_limits": {"paid": "4/minute"},
        "rate_limit_storage": REDIS_URL,
    }
    async with (
        api(settings_factory(**options)) as (first, context),
        api(settings_factory(**options)) as (second, _),
    ):
        headers = await key_for(context, f"shared-{uuid.uuid4().hex[:8]}")
        codes = []
        for client in (first, second, first, second, first, second):
            codes.append((await client.get("/v1/agents", headers=headers)).status_code)
        assert codes == [200, 200, 200, 200, 429, 429]
