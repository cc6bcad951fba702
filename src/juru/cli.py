"""The `juru` command: serve the API, manage the database."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Annotated, TypeVar

import typer
import uvicorn
from rich.console import Console

from juru.billing.accounts import AccountAdmin, AccountAdminError, parse_rupiah
from juru.core.clock import SystemClock
from juru.settings import Settings
from juru.store.database import create_engine
from juru.store.migrations import upgrade_to_head
from juru.store.urls import DatabaseUrl

cli = typer.Typer(help="Juru: a self-hosted agent server.", no_args_is_help=True)
db_cli = typer.Typer(help="Database commands.", no_args_is_help=True)
runtime_cli = typer.Typer(help="Agent Runtime contract commands.", no_args_is_help=True)
cli.add_typer(db_cli, name="db")
accounts_cli = typer.Typer(help="Accounts and their Rupiah balances.", no_args_is_help=True)
cli.add_typer(accounts_cli, name="accounts")
keys_cli = typer.Typer(help="API keys of accounts.", no_args_is_help=True)
cli.add_typer(keys_cli, name="keys")
cli.add_typer(runtime_cli, name="runtime")
console = Console(stderr=True)


def configure_logging() -> None:
    """Juru's own log lines (runs taken, leases lost, crashes) at INFO; others from WARNING."""
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("juru").setLevel(logging.INFO)


@cli.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default $PORT, else 8000).")] = None,
) -> None:
    """Serve the HTTP API."""
    from juru.app import create_app

    settings = Settings()
    bind_host, bind_port = host or settings.host, port or settings.port
    dialect = DatabaseUrl.parse(settings.database_url).dialect
    console.print(
        f"Juru on http://{bind_host}:{bind_port} · database {dialect}"
        f" · default model {settings.default_model}"
        f" · playground {'on' if settings.playground_enabled else 'off'}"
        f" · agent runtime {settings.runtime_agent if settings.runtime_enabled else 'off'}"
    )
    configure_logging()
    # Long-polls (`?wait=` up to 30 s) must not hold a stopping server: 10 s, then they are cut.
    uvicorn.run(
        create_app(settings),
        host=bind_host,
        port=bind_port,
        log_level="info",
        timeout_graceful_shutdown=10,
    )


@cli.command()
def worker(
    concurrency: Annotated[
        int | None, typer.Option(help="Runs executed at once (default $JURU_WORKERS, else 8).")
    ] = None,
) -> None:
    """Execute hosted runs without serving HTTP (scale out on PostgreSQL)."""
    settings = Settings()
    slots = concurrency or settings.workers or 8
    configure_logging()
    console.print(
        f"Juru worker · {slots} slots · database {DatabaseUrl.parse(settings.database_url).dialect}"
    )
    asyncio.run(_work(settings, slots))


async def _work(settings: Settings, slots: int) -> None:
    from juru.context import open_context, running_workers

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with open_context(settings) as context, running_workers(context, slots):
        await stop.wait()


@db_cli.command("upgrade")
def db_upgrade() -> None:
    """Apply the database migrations."""
    settings = Settings()
    upgrade_to_head(DatabaseUrl.parse(settings.database_url))
    console.print("database is at the latest migration")


T = TypeVar("T")


def _administer(action: Callable[[AccountAdmin], Awaitable[T]]) -> T:
    """Run `action` on the configured database (migrating SQLite first); a refusal exits 1."""
    settings = Settings()
    database = DatabaseUrl.parse(settings.database_url)
    if database.is_sqlite:
        upgrade_to_head(database)

    async def run() -> T:
        engine = create_engine(database)
        try:
            admin = AccountAdmin(engine, SystemClock(), settings.tier_rate_limits.keys())
            return await action(admin)
        finally:
            await engine.dispose()

    try:
        return asyncio.run(run())
    except AccountAdminError as error:
        console.print(f"[red]error:[/red] {error}")
        raise typer.Exit(1) from None


def _rupiah(text: str) -> Decimal:
    try:
        return parse_rupiah(text)
    except AccountAdminError as error:
        raise typer.BadParameter(str(error)) from None


@accounts_cli.command("create")
def accounts_create(
    name: str,
    tier: Annotated[str, typer.Option(help="Rate-limit tier: paid or corporate.")] = "paid",
    balance: Annotated[str, typer.Option(help="Opening balance in Rupiah.")] = "0",
) -> None:
    """Create an account."""
    opening = _rupiah(balance)
    account = _administer(lambda admin: admin.create_account(name, tier, opening))
    console.print(f"account {account.name} ({account.tier}) · balance Rp{account.balance_rupiah}")
    print(account.id)


@accounts_cli.command("topup")
def accounts_topup(name: str, rupiah: str) -> None:
    """Add RUPIAH to the account's balance."""
    amount = _rupiah(rupiah)
    account = _administer(lambda admin: admin.top_up(name, amount))
    console.print(f"account {account.name} · new balance in Rupiah:")
    print(account.balance_rupiah)


@keys_cli.command("create")
def keys_create(
    account: Annotated[str, typer.Option(help="Name of the account the key acts for.")],
) -> None:
    """Create an API key; it is printed once, on the last line."""
    issued = _administer(lambda admin: admin.create_key(account))
    console.print(f"key {issued.prefix}… for account {issued.account.name}; it is not shown again")
    print(issued.secret)


@keys_cli.command("revoke")
def keys_revoke(key_prefix: str) -> None:
    """Revoke the key with KEY_PREFIX (as printed at creation) at once."""
    prefix = _administer(lambda admin: admin.revoke_key(key_prefix))
    console.print(f"key {prefix}… revoked")


@runtime_cli.command("class-methods")
def runtime_class_methods() -> None:
    """Print the classMethods list of an Agent Engine deployment spec (JSON)."""
    from juru.runtime.methods import class_methods_json

    print(class_methods_json(), end="")


def main() -> None:
    cli()
