"""`juru serve` as a supervisor: the API in its own process, runs in worker processes.

Runs created through the API are executed by a worker process, the API answers while every
run slot is busy, a worker process that dies is started again and takes its run back, a
restarted server takes its runs back at once (the lease is 600 s here: waiting for it would
time the test out), and a second `juru serve` on one SQLite file refuses to start.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, select

from juru.store.tables import runs
from juru.store.urls import DatabaseUrl
from tests.e2e.test_hosted_runs import FAKE_MODEL, Api, FakeOpenAIProcess, juru_serve, until
from tests.support.server import REPO, api_key, free_port, juru_command

pytestmark = pytest.mark.e2e
LONG_LEASE = {"JURU_LEASE_SECONDS": "600"}


def lease_owner(database_url: str, run_id: str) -> str | None:
    engine = create_engine(DatabaseUrl.parse(database_url).sync_url())
    try:
        with engine.connect() as connection:
            owner = connection.scalar(select(runs.c.lease_owner).where(runs.c.id == run_id))
    finally:
        engine.dispose()
    return None if owner is None else str(owner)


def attempts(database_url: str, run_id: str) -> int:
    engine = create_engine(DatabaseUrl.parse(database_url).sync_url())
    try:
        with engine.connect() as connection:
            count = connection.scalar(select(runs.c.attempts).where(runs.c.id == run_id))
    finally:
        engine.dispose()
    return int(count or 0)


def stat_fields(stat: Path) -> list[str]:
    """The fields of a /proc `stat` file after the parenthesised command name, which may hold
    spaces: index 0 is field 3 (the state)."""
    return stat.read_text().rsplit(")", 1)[1].split()


def parent_of(pid: int) -> int:
    """The parent process id (field 4)."""
    return int(stat_fields(Path(f"/proc/{pid}/stat"))[1])


def command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().rstrip("\0").split("\0")


def children_of(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def runs_on_uvloop(pid: int) -> bool:
    """Whether the process has loaded uvloop's extension (a process on asyncio's own loop never
    imports it)."""
    return "/uvloop/" in Path(f"/proc/{pid}/maps").read_text()


def nice_values(pid: int) -> list[int]:
    """The nice value of each of the process's threads (Linux keeps one per thread; field
    19)."""
    return [int(stat_fields(task / "stat")[16]) for task in Path(f"/proc/{pid}/task").iterdir()]


def instance_of(database_url: str) -> str:
    return "local" if database_url.startswith("sqlite") else socket.gethostname()


def worker_pid(owner: str | None, instance: str) -> int | None:
    """The pid in a lease owner `<instance>/w0/<pid>`, if the run is leased so."""
    found = re.fullmatch(rf"{re.escape(instance)}/w0/(\d+)", owner or "")
    return int(found.group(1)) if found else None


def test_runs_execute_in_a_worker_process_that_is_restarted_when_it_dies(
    database_url: str, tmp_path: Path, fake_openai_process: FakeOpenAIProcess
) -> None:
    fake = fake_openai_process
    fake.script([{"content": "never arrives", "delay": 60}])
    env = {**fake.env(), **LONG_LEASE, "JURU_WORKERS": "1"}
    instance = instance_of(database_url)
    with (
        juru_serve(database_url, tmp_path / "serve.log", None, **env) as server,
        Api(server.base_url, api_key(database_url)) as api,
    ):
        assert server.process is not None
        agent = api.create_agent(model_id=FAKE_MODEL, max_steps=5)
        first_thread, second_thread = api.create_thread(agent["id"]), api.create_thread(agent["id"])
        first = api.create_run(first_thread["id"], "Satu")
        until(fake.requests, "the first run's model call")

        # The run is leased by a worker in a child process of the server, not by the server.
        owner = lease_owner(database_url, first["id"])
        pid = worker_pid(owner, instance)
        assert pid is not None, owner
        assert pid != server.process.pid
        assert parent_of(pid) == server.process.pid
        # The first worker is a fork of the server (it imported nothing again).
        assert command_line(pid) == command_line(server.process.pid)
        # Both run on uvloop, JURU_EVENT_LOOP's default.
        assert runs_on_uvloop(server.process.pid) and runs_on_uvloop(pid)
        # The worker, every thread of it, yields the CPU to the API (JURU_WORKER_NICE=10).
        [api_nice] = set(nice_values(server.process.pid))
        worker_nice = min(api_nice + 10, 19)
        assert len(nice_values(pid)) > 1  # its threads (SQL, the saver) are there by now
        assert set(nice_values(pid)) == {worker_nice}

        # Its one run slot is busy with a model call; the API still answers.
        second = api.create_run(second_thread["id"], "Dua")
        assert api.run(second["id"])["status"] == "queued"
        assert api.run(first["id"])["status"] == "running"
        assert httpx.get(f"{server.base_url}/health", timeout=30).status_code == 200

        # The worker process dies; the server starts another, which takes the run back at once.
        fake.script([{"content": "Satu selesai."}, {"content": "Dua selesai."}])
        subprocess.run(["kill", "-KILL", str(pid)], check=True)
        assert api.wait_for(first["id"], "succeeded")["output"] == "Satu selesai."
        assert api.wait_for(second["id"], "succeeded")["output"] == "Dua selesai."
        assert attempts(database_url, first["id"]) == 2
        assert "starting it again" in server.output()
        # The server has threads by now: the worker started again is a program of its own.
        [restarted] = children_of(server.process.pid)
        arguments = command_line(restarted)
        assert arguments[-6:-3] == ["worker", "--stable-name", f"{instance}/w0"]
        assert arguments[-1] == "--reaper"  # the first worker reaps for the instance
        assert set(nice_values(restarted)) == {worker_nice}
    assert server.process.returncode == 0, server.output()


def test_a_restarted_server_takes_its_runs_back_at_once(
    database_url: str, tmp_path: Path, fake_openai_process: FakeOpenAIProcess
) -> None:
    fake = fake_openai_process
    fake.script([{"content": "never arrives", "delay": 60}])
    env = {**fake.env(), **LONG_LEASE}
    port = free_port()
    first = juru_serve(database_url, tmp_path / "first.log", port, **env).start()
    try:
        key = api_key(database_url)
        with Api(first.base_url, key) as api:
            agent = api.create_agent(model_id=FAKE_MODEL, max_steps=5)
            thread = api.create_thread(agent["id"])
            run = api.create_run(thread["id"], "Ceritakan sesuatu tentang Jakarta.")
            until(fake.requests, "the model call of the first server")
    finally:
        first.kill()

    fake.script([{"content": "Jakarta ramai."}])
    second = juru_serve(database_url, tmp_path / "second.log", port, **env)
    with second, Api(second.base_url, key) as api:
        # With a 600 s lease, only taking the run back at start gets it done in time.
        done = api.wait_for(run["id"], "succeeded")
        assert done["output"] == "Jakarta ramai."
        assert "taken back at once" in second.output()
    assert attempts(database_url, run["id"]) == 2


def test_a_second_serve_on_one_sqlite_file_refuses(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path}/juru.db"
    with juru_serve(database_url, tmp_path / "first.log"):
        second = subprocess.run(
            [*juru_command(), "serve", "--port", str(free_port())],
            cwd=REPO,
            env={**juru_serve(database_url, tmp_path / "unused.log").env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert second.returncode == 1, second.stdout + second.stderr
    assert "another `juru serve` is using" in " ".join((second.stdout + second.stderr).split())


def _health_over(connection: socket.socket) -> bytes:
    """One `GET /health` on an open connection, read to the end of its body."""
    connection.sendall(b"GET /health HTTP/1.1\r\nHost: juru\r\nConnection: keep-alive\r\n\r\n")
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += connection.recv(65536)
    head, _, body = answer.partition(b"\r\n\r\n")
    length = re.search(rb"(?i)content-length: *(\d+)", head)
    assert length, head
    while len(body) < int(length.group(1)):
        body += connection.recv(65536)
    return head


def test_an_idle_connection_is_kept_for_the_keep_alive_time_then_closed(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path}/juru.db"
    with (
        juru_serve(database_url, tmp_path / "serve.log", JURU_KEEP_ALIVE_SECONDS="3") as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=30) as connection,
    ):
        assert _health_over(connection).startswith(b"HTTP/1.1 200")

        # Idle for a second: the server has not closed it, and it serves the next request.
        connection.settimeout(1.0)
        with pytest.raises(TimeoutError):
            connection.recv(1)
        assert _health_over(connection).startswith(b"HTTP/1.1 200")

        # Then, idle for JURU_KEEP_ALIVE_SECONDS (uvicorn's own default would be 5 s), it is
        # closed by the server.
        connection.settimeout(30.0)
        idle_since = time.monotonic()
        assert connection.recv(1) == b""
        assert 1.5 < time.monotonic() - idle_since < 4.5
