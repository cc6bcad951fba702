"""`juru accounts ...` and `juru keys ...` on a real database, checked against the API."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from juru.app import create_app
from juru.cli import cli
from juru.core.clock import ManualClock
from juru.settings import Settings
from juru.store.accounts import account_named
from tests.conftest import start_client
from tests.support.hosted import api_error


@pytest.fixture
def juru(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., tuple[int, str]]:
    """Run a `juru` command on the test database; (exit code, standard output)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JURU_DATABASE_URL", database_url)
    runner = CliRunner()

    def run(*args: str) -> tuple[int, str]:
        result = runner.invoke(cli, list(args))
        return result.exit_code, result.stdout

    return run


async def test_accounts_and_keys_from_the_command_line(
    juru: Callable[..., tuple[int, str]], settings_factory: Callable[..., Settings]
) -> None:
    code, out = await asyncio.to_thread(
        juru, "accounts", "create", "acme", "--tier", "corporate", "--balance", "1500.25"
    )
    assert code == 0 and out.strip().startswith("acc_")
    assert (await asyncio.to_thread(juru, "accounts", "topup", "acme", "499.75"))[0] == 0
    code, out = await asyncio.to_thread(juru, "keys", "create", "--account", "acme")
    key = out.strip().splitlines()[-1]
    assert code == 0 and key.startswith("juru_live_")

    clock = ManualClock()
    settings = settings_factory(workers=0)
    app = create_app(settings, clock=clock)
    async for client in start_client(app):
        account = await account_named(app.state.context.engine, "acme")
        assert account is not None
        assert (account.tier, account.balance_rupiah) == ("corporate", Decimal(2000))
        headers = {"Authorization": f"Bearer {key}"}
        response = await client.get("/v1/agents", headers=headers)
        assert response.status_code == 200
        assert response.headers["X-RateLimit-Limit"] == "300"

        revoked = await asyncio.to_thread(juru, "keys", "revoke", key[: len("juru_live_") + 8])
        assert revoked[0] == 0
        # The app looked the key up a moment ago; it trusts it for JURU_KEY_CACHE_SECONDS.
        clock.advance(settings.key_cache_seconds)
        api_error(await client.get("/v1/agents", headers=headers), 401, "invalid_api_key")


@pytest.mark.parametrize(
    "args",
    [
        ("accounts", "create", "acme"),  # the name is taken
        ("accounts", "create", "other", "--tier", "gold"),
        ("accounts", "topup", "nobody", "10"),
        ("accounts", "topup", "acme", "-5"),
        ("accounts", "topup", "acme", "ten"),
        ("accounts", "topup", "acme", "0.0000001"),
        ("keys", "create", "--account", "nobody"),
        ("keys", "revoke", "juru_live_zzzzzzzz"),
        ("keys", "revoke", "sk-123"),
    ],
)
def test_refused_commands_exit_non_zero_and_change_nothing(
    juru: Callable[..., tuple[int, str]], args: tuple[str, ...]
) -> None:
    assert juru("accounts", "create", "acme", "--balance", "10")[0] == 0
    code, out = juru(*args)
    assert code != 0
    assert "juru_live_" not in out
    # The account is as it was: a top-up of 1 brings it to exactly 11.
    assert juru("accounts", "topup", "acme", "1") == (0, "11\n")
