"""`juru serve`'s process counts and instance names, from settings alone; its forked workers,
and their supervisor once the server is stopping."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import socket
import threading
from typing import Any

import httpx
import pytest
import uvicorn

from juru import serving
from juru.serving import (
    GC_YOUNG_THRESHOLD,
    ForkedProcess,
    WorkerProcesses,
    default_worker_processes,
    instance_name,
    run_event_loop,
    server_config,
    settle_heap,
    supervising_server,
    worker_process_count,
)
from juru.store.urls import DatabaseUrl
from tests.conftest import make_settings

# aiohttp's `TCPConnector(keepalive_timeout=...)` default.
AIOHTTP_KEEPALIVE_SECONDS = 15

SQLITE = "sqlite:///juru.db"
POSTGRES = "postgresql://postgres@127.0.0.1:5432/juru"


@pytest.mark.parametrize(("cpus", "expected"), [(2, 2), (8, 8), (None, 1)])
def test_the_default_is_one_worker_process_per_cpu(
    monkeypatch: pytest.MonkeyPatch, cpus: int | None, expected: int
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)
    assert default_worker_processes() == expected
    assert worker_process_count(make_settings(SQLITE)) == expected


def test_worker_processes_yield_the_cpu_to_the_api_by_default() -> None:
    assert make_settings(SQLITE).worker_nice == 10
    assert make_settings(SQLITE, worker_nice=0).worker_nice == 0
    with pytest.raises(ValueError, match="worker_nice"):
        make_settings(SQLITE, worker_nice=20)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"worker_processes": 3}, 3),
        ({"worker_processes": 0}, 0),  # the workers run inside the API process
        ({"workers": 0, "worker_processes": 3}, 0),  # API only
    ],
)
def test_worker_processes_follow_the_settings(overrides: dict[str, int], expected: int) -> None:
    assert worker_process_count(make_settings(SQLITE, **overrides)) == expected


def test_the_first_worker_process_alone_runs_the_reaper() -> None:
    workers = WorkerProcesses("local", 3, ())
    assert [workers.reaps(index) for index in range(3)] == [True, False, False]
    assert [workers.command(index)[-1] for index in range(3)] == [
        "--reaper",
        "--no-reaper",
        "--no-reaper",
    ]


def test_a_run_slot_default_fits_runs_that_mostly_wait() -> None:
    assert make_settings(SQLITE).workers == 256


def test_instance_names() -> None:
    assert instance_name(make_settings(SQLITE), DatabaseUrl.parse(SQLITE)) == "local"
    postgres = DatabaseUrl.parse(POSTGRES)
    assert instance_name(make_settings(POSTGRES), postgres) == socket.gethostname()
    named = make_settings(POSTGRES, instance_name="api-1")
    assert instance_name(named, postgres) == "api-1"


def test_an_instance_name_cannot_hold_a_slash() -> None:
    with pytest.raises(ValueError, match="instance_name"):
        make_settings(SQLITE, instance_name="a/b")


def test_a_started_server_settles_its_heap() -> None:
    """What start-up built is out of later collections, and young ones come less often."""
    threshold = gc.get_threshold()
    try:
        settle_heap()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *threshold[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_idle_connections_outlive_the_pools_of_common_clients() -> None:
    # httpx's pool (the Python client's, the bench's) reuses a connection for 5 s, uvicorn's
    # default keep-alive: at equal times a request can meet a connection being closed.
    config = server_config(object(), make_settings(SQLITE), "127.0.0.1", 8000)
    expiry = httpx.Limits().keepalive_expiry
    assert expiry is not None
    assert config.timeout_keep_alive > 2 * expiry
    assert config.timeout_keep_alive > AIOHTTP_KEEPALIVE_SECONDS

    chosen = make_settings(SQLITE, keep_alive_seconds=7)
    assert server_config(object(), chosen, "127.0.0.1", 8000).timeout_keep_alive == 7


async def loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


@pytest.mark.parametrize(
    ("choice", "module"), [("auto", "uvloop"), ("uvloop", "uvloop"), ("asyncio", "asyncio")]
)
def test_server_processes_run_on_the_chosen_event_loop(choice: str, module: str) -> None:
    settings = make_settings(SQLITE, event_loop=choice)
    assert run_event_loop(loop_module(), settings).split(".")[0] == module


def test_an_unknown_event_loop_is_refused() -> None:
    with pytest.raises(ValueError, match="event_loop"):
        make_settings(SQLITE, event_loop="trio")


def test_workers_are_never_forked_from_a_process_with_threads() -> None:
    """A fork keeps only the forking thread: a lock another thread held stays locked for good.
    Such a server starts its workers as programs instead."""
    release = threading.Event()
    thread = threading.Thread(target=release.wait)
    thread.start()
    try:
        workers = WorkerProcesses("local", 2, ())
        assert workers.fork(lambda name, parent_fd, reaper: None) is False
        assert workers.forked_pids() == []
    finally:
        release.set()
        thread.join()


def test_a_forked_worker_is_waited_for_by_everyone_who_asks() -> None:
    # The supervisor's restart loop and its stop both wait for the same child.
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os._exit(3)
    forked = ForkedProcess(pid)

    async def both() -> list[int]:
        return await asyncio.gather(forked.wait(), forked.wait())

    assert asyncio.run(both()) == [3, 3]
    assert forked.returncode == 3
    forked.send_signal(signal.SIGTERM)  # an exited child is not signalled (its pid is free)


class ExitingProcess:
    """A worker process that exits when told to (`exit`), for the supervisor's loop."""

    def __init__(self) -> None:
        self.returncode: int | None = None
        self.exited = asyncio.Event()

    def send_signal(self, signum: int) -> None:
        self.exit(-signum)

    def kill(self) -> None:
        self.exit(-signal.SIGKILL)

    def exit(self, code: int) -> None:
        self.returncode = code
        self.exited.set()

    async def wait(self) -> int:
        await self.exited.wait()
        assert self.returncode is not None
        return self.returncode


def stopping_only(server: uvicorn.Server, sig: int, frame: Any) -> None:
    server.should_exit = True


class Restarted(Exception):
    """The supervisor started a worker process again."""


@pytest.mark.parametrize("stopping", [True, False])
def test_a_worker_that_exits_once_the_server_is_stopping_is_not_started_again(
    stopping: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stop signal sent to the process group reaches the workers too: they exit while the
    # API still answers its open requests, and were started again meanwhile.
    async def start_again(*command: str, **options: Any) -> None:
        raise Restarted(command)

    monkeypatch.setattr(asyncio, "create_subprocess_exec", start_again)
    monkeypatch.setattr(serving, "RESTART_PAUSE_SECONDS", 0.0)
    # uvicorn's own handler, as sse-starlette replaces it, would also tell every event stream
    # of this process (the other tests') that the server stops.
    monkeypatch.setattr(uvicorn.Server, "handle_exit", stopping_only)
    workers = WorkerProcesses("local", 1, ())
    worker = ExitingProcess()
    workers._processes[0] = worker

    async def supervise() -> None:
        supervising = asyncio.create_task(workers._keep_running(0))
        if stopping:
            told: list[str] = []
            server = supervising_server(
                uvicorn.Config(app=None), workers, [lambda: told.append("")]
            )
            server.handle_exit(signal.SIGTERM, None)
            assert server.should_exit and told == [""]  # and the app's own stop is called
        worker.exit(0)
        await supervising

    if stopping:
        asyncio.run(supervise())  # it returns, with nothing started again
    else:
        with pytest.raises(Restarted):
            asyncio.run(supervise())
