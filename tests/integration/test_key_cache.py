"""The key cache: a busy client costs one key lookup per `JURU_KEY_CACHE_SECONDS`, and a key
revoked by another process stops working here within that time (by the app's clock)."""

from __future__ import annotations

import asyncio
from contextlib import AbstractContextManager

from tests.support.hosted import HostedHarness, api_error
from tests.support.server import run_juru
from tests.support.statements import statements_sent


def key_lookups() -> AbstractContextManager[list[str]]:
    """The statements on `api_keys` the app runs while the block runs."""
    return statements_sent(lambda statement: "api_keys" in statement)


async def test_repeated_requests_look_the_key_up_once_per_period(hosted: HostedHarness) -> None:
    with key_lookups() as lookups:
        for _ in range(5):
            assert (await hosted.client.get("/v1/agents")).status_code == 200
        assert len(lookups) == 1
        hosted.clock.advance(hosted.context.settings.key_cache_seconds)
        assert (await hosted.client.get("/v1/agents")).status_code == 200
        assert len(lookups) == 2


async def test_a_key_revoked_by_another_process_stops_within_the_period(
    hosted: HostedHarness,
) -> None:
    second = await hosted.context.accounts.create_key("tester")
    headers = {"Authorization": f"Bearer {second.secret}"}
    assert (await hosted.client.get("/v1/agents", headers=headers)).status_code == 200

    database_url = hosted.context.settings.database_url
    await asyncio.to_thread(run_juru, database_url, "keys", "revoke", second.prefix)
    # This process looked the key up a moment ago and trusts it until the period ends ...
    assert (await hosted.client.get("/v1/agents", headers=headers)).status_code == 200
    hosted.clock.advance(hosted.context.settings.key_cache_seconds)
    # ... and not a moment longer.
    api_error(await hosted.client.get("/v1/agents", headers=headers), 401, "invalid_api_key")


async def test_an_unknown_key_is_looked_up_every_time(hosted: HostedHarness) -> None:
    unknown = {"Authorization": "Bearer juru_live_" + "x" * 40}
    with key_lookups() as lookups:
        for _ in range(3):
            api_error(
                await hosted.client.get("/v1/agents", headers=unknown), 401, "invalid_api_key"
            )
        assert len(lookups) == 3
