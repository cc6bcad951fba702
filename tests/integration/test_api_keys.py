"""API keys on `/v1`: every route needs a live key, keys are stored as hashes only, a revoked
key stops at once, and a fresh SQLite install starts with a local account and key."""

from __future__ import annotations

import asyncio
import stat
from decimal import Decimal
from pathlib import Path

import pytest
from fastapi.routing import APIRoute, iter_route_contexts
from sqlalchemy import delete, select

from juru.app import create_app
from juru.core.keys import KEY_PREFIX, hash_key
from juru.settings import Settings
from juru.store.accounts import count_accounts
from juru.store.tables import accounts, api_keys
from tests.conftest import make_settings, start_client
from tests.support.hosted import HostedHarness, api_error


def v1_routes(hosted: HostedHarness) -> set[tuple[str, str]]:
    """(method, path) of every `/v1` route, included routers walked too."""
    return {
        (method, context.path)
        for context in iter_route_contexts(hosted.app.routes)
        if isinstance(context.original_route, APIRoute)
        and context.path is not None
        and context.path.startswith("/v1/")
        for method in context.methods or ()
    }


def concrete(path: str) -> str:
    """The path with every `{param}` filled in."""
    return path.replace("{", "x_").replace("}", "")


async def test_every_v1_route_refuses_requests_without_a_valid_key(
    hosted: HostedHarness,
) -> None:
    routes = v1_routes(hosted)
    assert ("POST", "/v1/chat/completions") in routes and ("GET", "/v1/models") in routes
    unknown_key = KEY_PREFIX + "A" * 40
    cases = [
        ({}, "missing_api_key"),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, "invalid_api_key"),
        ({"Authorization": "Bearer "}, "invalid_api_key"),
        ({"Authorization": "Bearer sk-not-a-juru-key"}, "invalid_api_key"),
        ({"Authorization": f"Bearer {unknown_key}"}, "invalid_api_key"),
    ]
    hosted.client.headers.pop("Authorization")
    for method, path in sorted(routes):
        for headers, code in cases:
            response = await hosted.client.request(method, concrete(path), headers=headers)
            api_error(response, 401, code)
            assert response.headers["WWW-Authenticate"] == "Bearer", (method, path)


async def test_keys_are_stored_only_as_hashes(hosted: HostedHarness) -> None:
    secret = hosted.headers["Authorization"].removeprefix("Bearer ")
    assert secret.startswith(KEY_PREFIX) and len(secret) == len(KEY_PREFIX) + 40
    async with hosted.context.engine.connect() as connection:
        rows = (await connection.execute(select(api_keys))).all()
    stored = [str(value) for row in rows for value in row]
    assert not any(secret in value for value in stored)
    assert not any(secret[len(KEY_PREFIX) + 8 :] in value for value in stored)
    assert hash_key(secret) in stored
    assert (await hosted.client.get("/v1/agents")).status_code == 200


async def test_a_revoked_key_stops_working_at_once(hosted: HostedHarness) -> None:
    second = await hosted.context.accounts.create_key("tester")
    headers = {"Authorization": f"Bearer {second.secret}"}
    assert (await hosted.client.get("/v1/agents", headers=headers)).status_code == 200

    assert await hosted.context.accounts.revoke_key(second.prefix) == second.prefix
    api_error(await hosted.client.get("/v1/agents", headers=headers), 401, "invalid_api_key")
    # The account's other key is untouched.
    assert (await hosted.client.get("/v1/agents")).status_code == 200


async def test_two_keys_of_one_account_see_the_same_objects(hosted: HostedHarness) -> None:
    agent = await hosted.create_agent()
    second = await hosted.context.accounts.create_key("tester")
    response = await hosted.client.get(
        f"/v1/agents/{agent['id']}", headers={"Authorization": f"Bearer {second.secret}"}
    )
    assert response.status_code == 200 and response.json()["id"] == agent["id"]


# --- the local account of a fresh SQLite install ------------------------------------------


@pytest.fixture
def sqlite_settings(tmp_path: Path) -> Settings:
    return make_settings(f"sqlite:///{tmp_path}/data/juru.db", workers=0)


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    """Where a fresh SQLite database's local key is written, beside the database."""
    return tmp_path / "data" / "local-api-key"


async def test_a_fresh_sqlite_database_gets_a_local_key_once(
    sqlite_settings: Settings, key_file: Path
) -> None:
    app = create_app(sqlite_settings)
    async for client in start_client(app):
        secret = key_file.read_text().strip()
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        response = await client.get("/v1/agents", headers={"Authorization": f"Bearer {secret}"})
        assert response.status_code == 200, response.text
    key_file.unlink()

    # A second start finds an account and makes no new key.
    again = create_app(sqlite_settings)
    async for _ in start_client(again):
        assert not key_file.exists()
        async with again.state.context.engine.connect() as connection:
            local = (await connection.execute(select(accounts))).all()
            keys = (await connection.execute(select(api_keys.c.id))).all()
        assert [(row.name, row.balance_rupiah) for row in local] == [("local", 100_000)]
        assert len(keys) == 1


async def test_processes_starting_at_once_make_one_local_key(
    sqlite_settings: Settings, key_file: Path
) -> None:
    # `juru serve` and its forked workers open the fresh database at the same moment.
    app = create_app(sqlite_settings)
    async for _ in start_client(app):
        context = app.state.context
        await context.engine.writer.run(lambda connection: connection.execute(delete(api_keys)))
        await context.engine.writer.run(lambda connection: connection.execute(delete(accounts)))
        issued = await asyncio.gather(
            *(context.accounts.bootstrap_local(key_file, Decimal(5)) for _ in range(3))
        )
        made = [key for key in issued if key is not None]
        assert len(made) == 1
        assert key_file.read_text().strip() == made[0].secret
        async with context.engine.connect() as connection:
            names = (await connection.execute(select(accounts.c.name))).scalars().all()
            keys = (await connection.execute(select(api_keys.c.id))).all()
        assert (names, len(keys)) == (["local"], 1)


@pytest.mark.postgresql
async def test_postgresql_never_creates_accounts_or_keys_by_itself(
    fresh_postgres_url: str,
) -> None:
    app = create_app(make_settings(fresh_postgres_url, workers=0))
    async for client in start_client(app):
        assert await count_accounts(app.state.context.engine) == 0
        api_error(await client.get("/v1/agents"), 401, "missing_api_key")
