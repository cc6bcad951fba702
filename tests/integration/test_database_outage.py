"""A database that stops answering: told apart from real errors by the store, answered with 503
at the HTTP edge, and not the run's failure in the engine. Every error here is a real one,
raised by a real driver (a closed port, a locked or read-only SQLite file)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import psycopg_pool
import pytest
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from juru.app import create_app
from juru.core.clock import ManualClock
from juru.http.errors import install_error_handlers
from juru.store.outage import OUTAGE_ERRORS, is_outage
from juru.store.runs import get_run
from tests.conftest import make_settings, start_client
from tests.support.hosted import HostedHarness, api_error
from tests.support.server import free_port

LEASE_SECONDS = 30.0


def closed_port_url(driver: str = "postgresql+psycopg") -> str:
    return f"{driver}://postgres@127.0.0.1:{free_port()}/nowhere"


def caught(action: object) -> BaseException:
    """The exception `action()` raises (it must raise)."""
    assert callable(action)
    try:
        action()
    except Exception as error:
        return error
    raise AssertionError("expected an error")


@contextlib.contextmanager
def write_lock(path: Path) -> Iterator[None]:
    """Hold the SQLite file's write lock from another connection (readers go on, in WAL)."""
    locker = sqlite3.connect(path, isolation_level=None)
    try:
        locker.execute("BEGIN EXCLUSIVE")
        yield
        locker.execute("ROLLBACK")
    finally:
        locker.close()


# --- the classification ----------------------------------------------------------------------


def test_a_locked_or_read_only_sqlite_file_is_an_outage(tmp_path: Path) -> None:
    path = tmp_path / "file.db"
    with sqlite3.connect(path) as setup:
        setup.execute("CREATE TABLE t (x INTEGER)")
    with write_lock(path):
        writer = sqlite3.connect(path, timeout=0, isolation_level=None)
        locked = caught(lambda: writer.execute("BEGIN IMMEDIATE"))
        writer.close()
    read_only = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    readonly = caught(lambda: read_only.execute("INSERT INTO t VALUES (1)"))
    read_only.close()
    missing = caught(lambda: sqlite3.connect(tmp_path / "no" / "such" / "dir.db"))
    assert "database is locked" in str(locked)
    assert "readonly database" in str(readonly)
    assert "unable to open database file" in str(missing)
    assert all(is_outage(error) for error in (locked, readonly, missing))

    wrong = sqlite3.connect(path)
    no_table = caught(lambda: wrong.execute("SELECT * FROM no_such_table"))
    bad_sql = caught(lambda: wrong.execute("SELEC 1"))
    wrong.close()
    assert isinstance(no_table, sqlite3.OperationalError)
    assert not is_outage(no_table)
    assert not is_outage(bad_sql)


async def test_a_closed_postgresql_port_is_an_outage_through_every_driver() -> None:
    url = closed_port_url("postgresql")
    refused = caught(lambda: psycopg.connect(url, connect_timeout=2))
    assert isinstance(refused, psycopg.OperationalError)
    assert is_outage(refused)

    engine = create_async_engine(closed_port_url())
    try:
        async with engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    except SQLAlchemyError as error:
        wrapped: BaseException = error
    finally:
        await engine.dispose()
    assert is_outage(wrapped)
    assert isinstance(wrapped, OUTAGE_ERRORS)

    pool = psycopg_pool.AsyncConnectionPool(url, min_size=0, max_size=1, open=False, timeout=0.2)
    await pool.open()
    try:
        async with pool.connection():
            pass
    except psycopg_pool.PoolTimeout as error:
        timed_out: BaseException = error
    finally:
        await pool.close()
    assert is_outage(timed_out)

    # An error raised from an outage is one too; a plain mistake is not.
    try:
        raise RuntimeError("the step could not be saved") from refused
    except RuntimeError as error:
        assert is_outage(error)
    assert not is_outage(ValueError("bad input"))
    assert not is_outage(FileNotFoundError("no such file"))


async def test_a_constraint_violation_is_not_an_outage(tmp_path: Path) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/c.db")
    try:
        async with engine.begin() as connection:
            await connection.execute(text("CREATE TABLE t (x INTEGER PRIMARY KEY)"))
            await connection.execute(text("INSERT INTO t VALUES (1)"))
            try:
                await connection.execute(text("INSERT INTO t VALUES (1)"))
            except SQLAlchemyError as error:
                duplicate: BaseException = error
    finally:
        await engine.dispose()
    assert not is_outage(duplicate)


# --- the HTTP edge ---------------------------------------------------------------------------


def app_on(engine: AsyncEngine) -> FastAPI:
    """A bare app with Juru's error handlers whose routes query `engine`."""
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/v1/query")
    async def query() -> dict[str, int]:
        async with engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
        return {"ok": 1}

    @app.get("/v1/mistake")
    async def mistake() -> dict[str, int]:
        async with engine.connect() as connection:
            await connection.execute(text("SELECT * FROM no_such_table"))
        return {"ok": 1}

    return app


async def test_a_route_on_a_closed_port_answers_503_without_the_address() -> None:
    url = closed_port_url()
    engine = create_async_engine(url)
    transport = ASGITransport(app=app_on(engine))
    try:
        async with AsyncClient(transport=transport, base_url="http://juru.test") as client:
            response = await client.get("/v1/query")
    finally:
        await engine.dispose()
    message = api_error(response, 503, "database_unavailable")
    assert response.headers["retry-after"] == "3"
    port = url.split(":")[-1].split("/")[0]
    for secret in (port, "127.0.0.1", "SELECT", "psycopg"):
        assert secret not in response.text
    assert "try again" in message


async def test_a_real_database_error_is_still_a_500(tmp_path: Path) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/e.db")
    transport = ASGITransport(app=app_on(engine), raise_app_exceptions=False)
    try:
        async with AsyncClient(transport=transport, base_url="http://juru.test") as client:
            response = await client.get("/v1/mistake")
    finally:
        await engine.dispose()
    assert response.status_code == 500


# --- the engine, on a SQLite file locked for a moment ----------------------------------------


@pytest.fixture
async def locked_hosted(tmp_path: Path) -> AsyncIterator[HostedHarness]:
    """The API on a SQLite file whose writes give up after 100 ms; no background workers."""
    clock = ManualClock()
    settings = make_settings(
        f"sqlite:///{tmp_path}/juru.db",
        workers=0,
        files_dir=tmp_path / "files",
        sqlite_busy_timeout_ms=100,
        lease_seconds=LEASE_SECONDS,
    )
    app = create_app(settings, clock=clock)
    async for client in start_client(app):
        harness = HostedHarness(app, client, clock)
        await harness.sign_in()
        try:
            yield harness
        finally:
            await harness.stop_workers()


async def test_requests_that_write_answer_503_while_the_file_is_locked(
    locked_hosted: HostedHarness, tmp_path: Path
) -> None:
    hosted = locked_hosted
    with write_lock(tmp_path / "juru.db"):
        refused = await hosted.client.post(
            "/v1/agents", json={"name": "x", "model_id": "juru/demo"}
        )
        listed = await hosted.client.get("/v1/agents")  # readers go on in WAL mode
    api_error(refused, 503, "database_unavailable")
    assert refused.headers["retry-after"] == "3"
    assert str(tmp_path) not in refused.text
    assert listed.status_code == 200
    created = await hosted.client.post("/v1/agents", json={"name": "x", "model_id": "juru/demo"})
    assert created.status_code == 201, created.text


async def test_an_execution_stopped_by_the_database_leaves_its_run_running(
    locked_hosted: HostedHarness, tmp_path: Path
) -> None:
    hosted = locked_hosted
    run = await hosted.new_run()
    worker = hosted.worker()
    assert await worker.fill_slots() == 1  # claimed; its execution starts at the next await
    with write_lock(tmp_path / "juru.db"):
        await worker.drain()
        stopped = await hosted.get_run(run["id"])
    assert stopped["status"] == "running"
    assert stopped["error"] is None
    assert stopped["step_count"] == 0

    # The lease still holds: no worker takes the run until it lapses.
    assert await hosted.worker("second").fill_slots() == 0
    hosted.clock.advance(LEASE_SECONDS + 1)
    await hosted.work()
    paused = await hosted.get_run(run["id"])
    assert paused["status"] == "requires_action", paused
    assert (await hosted.answer(paused)).status_code == 200
    await hosted.work()
    done = await hosted.get_run(run["id"])
    assert done["status"] == "succeeded", done
    assert done["step_count"] == 2
    record = await get_run(hosted.context.engine, run["id"])
    assert record is not None and record.attempts == 3  # stopped, re-claimed, resumed

    messages = (await hosted.client.get(f"/v1/threads/{run['thread_id']}/messages")).json()
    roles = [message["role"] for message in messages["data"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
