"""The `juru` command: serve the API, manage the database, chat and manage agents from the
terminal."""

from __future__ import annotations

import asyncio
import functools
import gc
import importlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console

from juru.billing.accounts import AccountAdmin, AccountAdminError, parse_rupiah
from juru.core.clock import SystemClock
from juru.settings import Settings
from juru.store.database import open_database
from juru.store.migrations import upgrade_to_head
from juru.store.urls import DatabaseUrl

if TYPE_CHECKING:
    from juru.client import Juru

cli = typer.Typer(help="Juru: a self-hosted agent server.", no_args_is_help=True)
db_cli = typer.Typer(help="Database commands.", no_args_is_help=True)
runtime_cli = typer.Typer(help="Agent Runtime contract commands.", no_args_is_help=True)
cli.add_typer(db_cli, name="db")
accounts_cli = typer.Typer(help="Accounts and their Rupiah balances.", no_args_is_help=True)
cli.add_typer(accounts_cli, name="accounts")
keys_cli = typer.Typer(help="API keys of accounts.", no_args_is_help=True)
cli.add_typer(keys_cli, name="keys")
cli.add_typer(runtime_cli, name="runtime")
agents_cli = typer.Typer(
    help="Hosted agents, from YAML files (on any Juru server).", no_args_is_help=True
)
cli.add_typer(agents_cli, name="agents")
console = Console(stderr=True)


def configure_logging() -> None:
    """Juru's own log lines (runs taken, leases lost, crashes) at INFO; others from WARNING."""
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("juru").setLevel(logging.INFO)


def import_for_a_server(*modules: str) -> None:
    """Import a server process's modules with the cyclic collector off: what they build lives
    as long as the process, and collecting it as it grows costs a second of CPU at every start
    (`settle_heap` freezes it once the server has started)."""
    gc.disable()
    try:
        for module in modules:
            importlib.import_module(module)
    finally:
        gc.enable()


@cli.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default $PORT, else 8000).")] = None,
) -> None:
    """Serve the HTTP API, with runs executed by worker processes beside it."""
    import_for_a_server("juru.serving")
    from juru.serving import (
        ApiServer,
        InstanceTakenError,
        WorkerProcesses,
        instance_name,
        owned_instance,
        run_event_loop,
        serve_with_worker_processes,
        server_config,
        set_up_saver_now,
        settle_heap,
        take_back_instance_runs,
        worker_process_count,
    )

    settings = Settings()
    bind_host, bind_port = host or settings.host, port or settings.port
    database = DatabaseUrl.parse(settings.database_url)
    name = instance_name(settings, database)
    processes = worker_process_count(settings)
    if settings.workers <= 0:
        workers = "no workers (API only)"
    elif processes == 0:
        workers = f"{settings.workers} run slots in this process"
    else:
        workers = f"{processes} worker processes of {settings.workers} run slots"
    console.print(
        f"Juru on http://{bind_host}:{bind_port} · database {database.dialect}"
        f" · instance {name} · {workers}"
        f" · default model {settings.default_model}"
        f" · playground {'on' if settings.playground_enabled else 'off'}"
        f" · agent runtime {settings.runtime_agent if settings.runtime_enabled else 'off'}"
    )
    configure_logging()
    if database.is_sqlite:
        upgrade_to_head(database)
    try:
        with owned_instance(database, name) as inherited_fd:
            # The instance is this process's: only now is the whole stack worth importing.
            import_for_a_server("juru.app")
            from juru.app import create_app, stop_long_polls

            if settings.workers > 0:
                # This instance owns its name: runs still leased under it have no live worker.
                for run_id in take_back_instance_runs(database, name):
                    logging.getLogger("juru").info("run %s is taken back at once", run_id)
            if processes == 0:
                app = create_app(settings, worker_name=f"{name}/w0", on_started=settle_heap)
                config = server_config(app, settings, bind_host, bind_port)
                server = ApiServer(config, [functools.partial(stop_long_polls, app)])
                run_event_loop(server.serve(), settings)
                return
            fds = () if inherited_fd is None else (inherited_fd,)
            supervised = WorkerProcesses(name, processes, fds)
            set_up_saver_now(database)
            supervised.fork(functools.partial(_start_worker, settings, settings.workers))
            api_only = settings.model_copy(update={"workers": 0})
            app = create_app(api_only, on_started=settle_heap)
            config = server_config(app, settings, bind_host, bind_port)
            on_stop = [functools.partial(stop_long_polls, app)]
            run_event_loop(serve_with_worker_processes(config, supervised, on_stop), settings)
    except InstanceTakenError as error:
        console.print(f"[red]error:[/red] {error}")
        raise typer.Exit(1) from None


DEFAULT_SLOTS: int = Settings.model_fields["workers"].default


@cli.command()
def worker(
    concurrency: Annotated[
        int | None,
        typer.Option(help=f"Runs executed at once (default $JURU_WORKERS, else {DEFAULT_SLOTS})."),
    ] = None,
    stable_name: Annotated[
        str | None,
        typer.Option(
            help="A name that this worker keeps across restarts and no other live worker uses: "
            "the runs its previous process left are taken back at once, not after their lease."
        ),
    ] = None,
    parent_fd: Annotated[int | None, typer.Option(hidden=True)] = None,
    reaper: Annotated[
        bool,
        typer.Option(
            help="Also expire runs left waiting, fail runs past their wall clock and give back "
            "stale balance holds (one process per machine is enough: `juru serve` has its "
            "first worker do it)."
        ),
    ] = True,
) -> None:
    """Execute hosted runs without serving HTTP (`juru serve` starts these itself)."""
    import_for_a_server("juru.context", "juru.serving")
    settings = Settings()
    configure_logging()
    slots = concurrency or settings.workers or DEFAULT_SLOTS
    _start_worker(settings, slots, stable_name, parent_fd, reaper)


def _start_worker(
    settings: Settings, slots: int, stable_name: str | None, parent_fd: int | None, reaper: bool
) -> None:
    """A worker's life, in a `juru worker` program or in a fork of `juru serve`."""
    from juru.serving import lower_worker_priority, run_event_loop

    if parent_fd is not None:  # started by `juru serve`, beside its API process
        lower_worker_priority(settings)
    console.print(
        f"Juru worker {stable_name or ''}· {slots} slots"
        f" · database {DatabaseUrl.parse(settings.database_url).dialect}"
        f" · nice {os.nice(0)}{' · reaper' if reaper else ''}"
    )

    run_event_loop(_work(settings, slots, stable_name, parent_fd, reaper), settings)


async def _work(
    settings: Settings, slots: int, stable_name: str | None, parent_fd: int | None, reaper: bool
) -> None:
    from juru.context import open_context, running_workers
    from juru.serving import settle_heap, wait_for_parent_exit

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with (
        open_context(settings) as context,
        running_workers(context, slots, stable_name, reaper=reaper),
    ):
        settle_heap()
        if parent_fd is None:
            await stop.wait()
            return
        # Started by `juru serve`: stop too when it has gone, however it went.
        parent_gone = asyncio.create_task(wait_for_parent_exit(parent_fd))
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait([parent_gone, stopped], return_when=asyncio.FIRST_COMPLETED)
        for task in (parent_gone, stopped):
            task.cancel()


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
        engine = open_database(database)
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


# --- the terminal: `juru chat`, `juru agents` (any server, through juru.client) ---------------

BaseUrl = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        help="The Juru server (default $JURU_BASE_URL, else http://127.0.0.1:8000).",
        show_default=False,
    ),
]
ApiKey = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        help="API key (default $JURU_API_KEY, else .juru/local-api-key in this directory).",
        show_default=False,
    ),
]
AgentFile = Annotated[
    Path, typer.Option("--file", "-f", help="YAML file of the agent's fields.", dir_okay=False)
]


def _client(base_url: str | None, api_key: str | None) -> Juru:
    from juru.terminal.connection import choose_api_key, open_client

    key = choose_api_key(api_key)
    if key.note:
        console.print(f"[dim]{key.note}[/dim]")
    return open_client(base_url, key)


def _fail(message: str) -> typer.Exit:
    console.print(message, style="bold red", markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(1)


@cli.command()
def chat(
    agent_id: Annotated[str | None, typer.Argument(help="The hosted agent to talk to.")] = None,
    feature: Annotated[
        str | None, typer.Option(help="Talk to this playground feature instead of an agent.")
    ] = None,
    tools: Annotated[
        str | None,
        typer.Option(
            help="module:attribute of a dict tool name -> function that answers client tools "
            "here (else you type each output)."
        ),
    ] = None,
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
) -> None:
    """Chat with a hosted agent (or a playground feature) in the terminal. Ctrl-C during a run
    cancels it; Ctrl-D or Ctrl-C at the prompt exits."""
    from juru.client import JuruError
    from juru.terminal.chat import (
        ToolsLoadError,
        load_tool_handlers,
        prompt_loop,
        start_hosted_chat,
    )
    from juru.terminal.connection import error_line
    from juru.terminal.feature_chat import start_feature_chat
    from juru.terminal.screen import Screen

    if (agent_id is None) == (feature is None):
        raise typer.BadParameter("give an AGENT_ID or --feature NAME (one of them)")
    try:
        handlers = load_tool_handlers(tools) if tools else {}
    except ToolsLoadError as error:
        raise _fail(f"error: {error}") from None
    screen = Screen()
    with _client(base_url, api_key) as client:
        try:
            if feature is not None:
                session = start_feature_chat(client, feature, screen)
                take_turn = session.turn
            else:
                assert agent_id is not None
                hosted = start_hosted_chat(client, agent_id, handlers, screen)
                take_turn = hosted.turn
        except JuruError as error:
            raise _fail(error_line(error, client.base_url)) from None
        except ValueError as error:
            raise _fail(f"error: {error}") from None
        except KeyboardInterrupt:
            raise typer.Exit(0) from None
        raise typer.Exit(prompt_loop(screen, take_turn))


def _agent_command(base_url: str | None, api_key: str | None, file: Path, apply: bool) -> None:
    from juru.client import JuruError
    from juru.terminal.agent_files import AgentFileError, apply_agent, create_agent, read_agent_file
    from juru.terminal.connection import error_line

    try:
        fields = read_agent_file(file)
    except AgentFileError as error:
        raise _fail(f"error: {error}") from None
    with _client(base_url, api_key) as client:
        try:
            if apply:
                applied = apply_agent(client, fields)
                agent, created = applied.agent, applied.created
            else:
                agent, created = create_agent(client, fields), True
        except AgentFileError as error:
            raise _fail(f"error: {error}") from None
        except JuruError as error:
            raise _fail(error_line(error, client.base_url)) from None
    console.print(f"{'created' if created else 'updated'} agent {agent.name} ({agent.model_id})")
    print(agent.id)


@agents_cli.command("create")
def agents_create(file: AgentFile, base_url: BaseUrl = None, api_key: ApiKey = None) -> None:
    """Create an agent from a YAML file; its id is printed on the last line."""
    _agent_command(base_url, api_key, file, apply=False)


@agents_cli.command("apply")
def agents_apply(file: AgentFile, base_url: BaseUrl = None, api_key: ApiKey = None) -> None:
    """Update the agent with the file's `name` to the file's fields, or create it."""
    _agent_command(base_url, api_key, file, apply=True)


@agents_cli.command("list")
def agents_list(base_url: BaseUrl = None, api_key: ApiKey = None) -> None:
    """The account's agents, as a table."""
    from juru.client import JuruError
    from juru.terminal.agent_files import agents_table
    from juru.terminal.connection import error_line

    with _client(base_url, api_key) as client:
        try:
            agents = list(client.agents.list(limit=100))
        except JuruError as error:
            raise _fail(error_line(error, client.base_url)) from None
    Console().print(agents_table(agents))


def main() -> None:
    cli()
