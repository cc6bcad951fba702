"""`juru serve`: the API in this process, the runs in worker processes it supervises.

HTTP never waits behind run execution: the API process has no workers; each worker process
(stable name `<instance>/w<i>`) runs up to JURU_WORKERS runs. The first workers are forks of the
server, made once its imports are done and before it has a thread or an event loop, so a start
imports Juru once; a worker that dies is started again as `juru worker` (a fresh program: the
server has threads by then), until a stop signal: SIGTERM or SIGINT stops the API, then the
workers. The instance owns its name (an flock on `<db>.serve.lock` on SQLite, an advisory lock
on PostgreSQL), so at start it knows the runs leased under that name are orphans and takes them
back at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import gc
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Protocol, TypeVar

import psycopg
import uvicorn

from juru.core.clock import SystemClock
from juru.settings import Settings
from juru.store.checkpointer import set_up_saver
from juru.store.database import open_database
from juru.store.leases import release_leases_of
from juru.store.urls import DatabaseUrl

logger = logging.getLogger(__name__)
STOP_WAIT_SECONDS = 20.0
# A worker that dies sooner than this after its start is restarted after a pause, not at once.
QUICK_DEATH_SECONDS = 5.0
RESTART_PAUSE_SECONDS = 2.0
INSTANCE_LOCK_TIMEOUT = "15s"


T = TypeVar("T")


def event_loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """The event loop a server process runs on (JURU_EVENT_LOOP): uvloop, which uvicorn's
    standard extra installs, unless `asyncio` is asked for; `auto` falls back to asyncio's
    loop where uvloop cannot be imported. `uvicorn` alone picks uvloop too; here the API and
    worker processes use it however they are started (docs/deployment.md)."""
    if choice == "asyncio":
        return asyncio.new_event_loop
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def run_event_loop(main: Coroutine[Any, Any, T], settings: Settings) -> T:
    """`asyncio.run(main)` on the loop that the settings choose."""
    with asyncio.Runner(loop_factory=event_loop_factory(settings.event_loop)) as runner:
        return runner.run(main)


class InstanceTakenError(RuntimeError):
    """Another `juru serve` holds this database (SQLite) or this instance name (PostgreSQL)."""


def default_worker_processes() -> int:
    """One worker process per CPU: at a lower priority than the API process
    (`lower_worker_priority`), they use every core without delaying its answers."""
    return os.cpu_count() or 1


def lower_worker_priority(settings: Settings) -> None:
    """A worker process of `juru serve` yields the CPU to the API process (and to a database
    on the same machine): its nice value goes up by `JURU_WORKER_NICE`. Called before the
    process starts a thread, since Linux keeps a nice value per thread and new threads copy
    their creator's."""
    if settings.worker_nice > 0:
        os.nice(settings.worker_nice)


# Allocations between two collections of the youngest generation (Python's default is 700).
GC_YOUNG_THRESHOLD = 10_000


def settle_heap() -> None:
    """For a long-running server process, once it has started: what imports and start-up
    built lives as long as the process, so `gc.freeze()` keeps it out of every later
    collection, and the young generation is collected less often. Full collections over the
    whole start-up heap (LangChain, LangGraph, pydantic models) were pauses of a few hundred
    milliseconds under load."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


def worker_process_count(settings: Settings) -> int:
    """How many worker processes `juru serve` starts (0: workers run in the API process)."""
    if settings.workers <= 0:
        return 0
    if settings.worker_processes is None:
        return default_worker_processes()
    return settings.worker_processes


def instance_name(settings: Settings, database: DatabaseUrl) -> str:
    """This instance's stable name: JURU_INSTANCE_NAME, else `local` on SQLite (one `juru
    serve` owns the file), else the host name."""
    if settings.instance_name is not None:
        return settings.instance_name
    return "local" if database.is_sqlite else socket.gethostname()


@contextlib.contextmanager
def owned_instance(database: DatabaseUrl, name: str) -> Iterator[int | None]:
    """Hold the instance for the block; yields a file descriptor that worker processes inherit
    (SQLite: the lock lasts until the last of them has exited), or None."""
    if database.is_sqlite:
        database.ensure_directory()
        path = database.sqlite_path.with_name(database.sqlite_path.name + ".serve.lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise InstanceTakenError(
                    f"another `juru serve` is using {database.sqlite_path} (it holds {path}); "
                    "stop it first, or use PostgreSQL to run several"
                ) from None
            yield fd
        finally:
            os.close(fd)
        return
    # The lock is the session's: it goes when this process (and its connection) does.
    with psycopg.connect(database.libpq_dsn(), autocommit=True) as connection:
        connection.execute(f"SET lock_timeout = '{INSTANCE_LOCK_TIMEOUT}'")
        try:
            connection.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"juru:{name}",))
        except psycopg.errors.LockNotAvailable:
            raise InstanceTakenError(
                f"another `juru serve` runs as instance {name!r} on this database; give each "
                "its own JURU_INSTANCE_NAME"
            ) from None
        yield None


def set_up_saver_now(database: DatabaseUrl) -> None:
    """Set LangGraph's saver up before the worker processes and the API open it together."""
    asyncio.run(set_up_saver(database))


def take_back_instance_runs(database: DatabaseUrl, name: str) -> list[str]:
    """Free every run leased under the instance `name` (its processes are all gone)."""

    async def release() -> list[str]:
        engine = open_database(database)
        try:
            return await release_leases_of(engine, f"{name}/", SystemClock().now())
        finally:
            await engine.dispose()

    return asyncio.run(release())


def program() -> list[str]:
    """How to start this same program again: the `python -m` module or the script this
    process was started as (so a wrapper of `juru`'s command line gets wrapped workers too),
    else `python -m juru`."""
    started_as = list(getattr(sys, "orig_argv", []))
    if "-m" in started_as[:-1]:
        return [sys.executable, "-m", started_as[started_as.index("-m") + 1]]
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.is_file() and script.name != "__main__.py":
        return [sys.executable, str(script)]
    return [sys.executable, "-m", "juru"]


class WorkerProcess(Protocol):
    """A worker process as the supervisor sees it: `asyncio.subprocess.Process` or a fork."""

    @property
    def returncode(self) -> int | None: ...

    def send_signal(self, signum: int) -> None: ...

    def kill(self) -> None: ...

    async def wait(self) -> int: ...


@dataclass
class ForkedProcess:
    """A child forked from this process, waited for on the event loop through its pidfd."""

    pid: int
    returncode: int | None = None
    _exit: asyncio.Future[int] | None = field(default=None, repr=False)

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def wait(self) -> int:
        """The exit code, once the child has exited (any number of callers may wait)."""
        if self._exit is None:
            self._exit = self._watch_exit()
        return await asyncio.shield(self._exit)

    def _watch_exit(self) -> asyncio.Future[int]:
        loop = asyncio.get_running_loop()
        exit_code: asyncio.Future[int] = loop.create_future()
        pidfd = os.pidfd_open(self.pid)

        def exited() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
            exit_code.set_result(self.returncode)

        loop.add_reader(pidfd, exited)
        return exit_code


# What a forked worker runs: given its stable name, the read end of the parent's pipe and
# whether it runs the reaper, the worker's whole life (the child exits 0 when it returns, 1
# when it raises).
WorkerMain = Callable[[str, int, bool], None]


@dataclass
class WorkerProcesses:
    """N worker processes, each started again (as `juru worker`) when it dies, until stopped."""

    instance: str
    count: int
    inherited_fds: tuple[int, ...]
    _stopping: bool = False
    _processes: dict[int, WorkerProcess] = field(default_factory=dict)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _parent_write_fd: int = -1
    _parent_read_fd: int = -1

    def stable_name(self, index: int) -> str:
        return f"{self.instance}/w{index}"

    @staticmethod
    def reaps(index: int) -> bool:
        """Whether worker `index` runs the reaper: the first does, for the whole instance (its
        sweeps are the same in every process, and each costs queries)."""
        return index == 0

    def command(self, index: int) -> list[str]:
        return [
            *program(),
            "worker",
            "--stable-name",
            self.stable_name(index),
            "--parent-fd",
            str(self._parent_read_fd),
            "--reaper" if self.reaps(index) else "--no-reaper",
        ]

    def forked_pids(self) -> list[int]:
        return [p.pid for p in self._processes.values() if isinstance(p, ForkedProcess)]

    def _open_parent_pipe(self) -> None:
        # Workers read this pipe: its end of file means this process has gone, even by SIGKILL.
        if self._parent_read_fd < 0:
            self._parent_read_fd, self._parent_write_fd = os.pipe()
            os.set_inheritable(self._parent_read_fd, True)

    def fork(self, worker_main: WorkerMain) -> bool:
        """Start every worker now as a fork of this process, which must have no thread but its
        main one and no event loop yet (False, and nothing forked, otherwise: `running` then
        starts them as programs). The child runs `worker_main` and exits without unwinding
        this process's stack: the objects on it (the PostgreSQL connection that holds the
        instance's advisory lock) are never closed or used by the child, whose copy of their
        descriptors keeps the instance owned until the last worker has exited, as the
        inherited flock does on SQLite."""
        if threading.active_count() > 1 or _has_running_loop():
            logger.warning("this process has threads already: worker processes are programs")
            return False
        self._open_parent_pipe()
        # What start-up built is shared with the children: no collection should copy it.
        settle_heap()
        # Output still buffered here would be written twice, by the parent and by the child.
        sys.stdout.flush()
        sys.stderr.flush()
        for index in range(self.count):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child, measured through the e2e tests
                code = 1
                try:
                    os.close(self._parent_write_fd)
                    worker_main(self.stable_name(index), self._parent_read_fd, self.reaps(index))
                    code = 0
                except BaseException:
                    logger.exception("worker process %d failed", index)
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            self._processes[index] = ForkedProcess(pid)
        return True

    async def _keep_running(self, index: int) -> None:
        forked = self._processes.get(index)
        while not self._stopping:
            started = time.monotonic()
            if forked is not None:
                process, forked = forked, None
            else:
                process = await asyncio.create_subprocess_exec(
                    *self.command(index), pass_fds=(self._parent_read_fd, *self.inherited_fds)
                )
                self._processes[index] = process
            code = await process.wait()
            if self._stopping:
                return
            logger.warning("worker process %d exited with %s; starting it again", index, code)
            if time.monotonic() - started < QUICK_DEATH_SECONDS:
                await asyncio.sleep(RESTART_PAUSE_SECONDS)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        self._open_parent_pipe()
        self._tasks = [
            asyncio.create_task(self._keep_running(index), name=f"juru-worker-process-{index}")
            for index in range(self.count)
        ]
        try:
            yield
        finally:
            await self.stop()

    def begin_stopping(self) -> None:
        """The server is stopping: a worker process that exits from now on is not started
        again. A stop signal sent to the process group (Ctrl-C, a service manager) reaches the
        workers too, and they exit while the API still answers the requests it has (up to
        `GRACEFUL_SHUTDOWN_SECONDS`); started again, they would take runs back from a server
        on its way out."""
        self._stopping = True

    async def stop(self) -> None:
        self.begin_stopping()
        for process in self._processes.values():
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
        waits = [asyncio.create_task(p.wait()) for p in self._processes.values()]
        if waits:
            _, late = await asyncio.wait(waits, timeout=STOP_WAIT_SECONDS)
            for process in self._processes.values():
                if process.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
            if late:
                await asyncio.wait(late, timeout=STOP_WAIT_SECONDS)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for fd in (self._parent_read_fd, self._parent_write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def _has_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


# Requests and streams must not hold a stopping server: 10 s, then cut (the `?wait=` long-polls,
# up to 30 s, answer at the signal: `ApiServer`, `HostedService.stop_waiting`).
GRACEFUL_SHUTDOWN_SECONDS = 10


def server_config(app: Any, settings: Settings, host: str, port: int) -> uvicorn.Config:
    """uvicorn's configuration for the API. Idle connections are kept for
    JURU_KEEP_ALIVE_SECONDS rather than uvicorn's 5 s, the idle expiry of httpx's pool too: at
    equal times a client reuses a connection just as the server closes it, and the request
    fails with a reset (seen with 500 requests at once from one pool, about one in four
    tries)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="info",
        access_log=settings.access_log,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        timeout_keep_alive=settings.keep_alive_seconds,
    )


class ApiServer(uvicorn.Server):
    """uvicorn's server, telling the rest of the process of a stop signal the moment it
    arrives, not once the API has stopped: `on_stop` (the worker processes' supervisor, whose
    workers are not started again; the app's long-polls, which answer at once) is called in the
    signal's handler."""

    def __init__(self, config: uvicorn.Config, on_stop: Sequence[Callable[[], None]]) -> None:
        super().__init__(config)
        self.on_stop = on_stop

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        for stop in self.on_stop:
            stop()
        super().handle_exit(sig, frame)


def supervising_server(
    config: uvicorn.Config, workers: WorkerProcesses, on_stop: Sequence[Callable[[], None]] = ()
) -> ApiServer:
    """The API's server in a process that supervises `workers`: a stop signal stops their
    restarts, then does `on_stop`."""
    return ApiServer(config, [workers.begin_stopping, *on_stop])


async def serve_with_worker_processes(
    config: uvicorn.Config, workers: WorkerProcesses, on_stop: Sequence[Callable[[], None]] = ()
) -> None:
    """Serve HTTP here while the worker processes run; stop them after the server stops."""
    server = supervising_server(config, workers, on_stop)
    # uvicorn re-raises the stop signal once it is done: this handler takes it instead of the
    # default one, which would end the process before the workers are stopped.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: None)
    async with workers.running():
        await server.serve()


async def wait_for_parent_exit(fd: int) -> None:
    """Return when the supervisor that holds the pipe's other end has exited."""
    loop = asyncio.get_running_loop()
    gone = asyncio.Event()

    def readable() -> None:
        if not os.read(fd, 1):
            gone.set()

    loop.add_reader(fd, readable)
    try:
        await gone.wait()
    finally:
        loop.remove_reader(fd)
