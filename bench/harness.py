"""Processes of a benchmark: the fake model, a database, `juru serve`, and what they cost.

Everything runs on this machine on free loopback ports; every process is started by the bench
and stopped by it (by its own process group), whatever happens in between.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.server import ServerProcess, api_key, free_port, run_juru

REPO = Path(__file__).resolve().parents[1]


def with_repo_path() -> str:
    """A PYTHONPATH that imports the bench's modules from this checkout, after the caller's
    (so that an A/B run of other code, put first on the caller's PYTHONPATH, keeps it)."""
    paths = [os.environ.get("PYTHONPATH", ""), str(REPO)]
    return os.pathsep.join(path for path in paths if path)


POSTGRES_URL = os.environ.get("JURU_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432")
BENCH_MODEL = "openai/gpt-4o"
TOOL_NAME = "bench_tool"
# Rate limits lifted: the bench is one account sending thousands of requests a minute.
NO_RATE_LIMITS = json.dumps({"paid": "100000000/minute", "corporate": "100000000/minute"})
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def process_tree(pid: int) -> list[int]:
    """A process and its live descendants (a server and its worker processes), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # the process ended meanwhile
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        pending.extend(children.get(current, []))
    return tree


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of a process and of all its live descendants, plus what its reaped children
    used, from /proc."""
    total = 0.0
    for current in process_tree(pid):
        try:
            stat = Path(f"/proc/{current}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        total += sum(int(value) for value in fields[11:15]) / CLOCK_TICKS
    return total


def tree_rss_bytes(pid: int) -> int:
    """Resident set size of a process and its live descendants."""
    total = 0
    for current in process_tree(pid):
        try:
            total += rss_bytes(current)
        except (OSError, RuntimeError):
            continue
    return total


def rss_bytes(pid: int) -> int:
    """Resident set size of a process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def _stop_group(process: subprocess.Popen[bytes], deadline: float = 10.0) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=deadline)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


class FakeModel:
    """`python -m bench.fake_model` as its own process."""

    def __init__(
        self,
        log: Path,
        latency: float = 0.2,
        tool_calls: int = 4,
        tool_name: str = TOOL_NAME,
        answer_words: int = 0,
    ) -> None:
        self.log, self.latency, self.tool_calls = log, latency, tool_calls
        self.tool_name, self.answer_words = tool_name, answer_words
        self.process: subprocess.Popen[bytes] | None = None
        self.base_url = ""

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/v1")

    def start(self) -> FakeModel:
        command = [sys.executable, "-m", "bench.fake_model", "--port", "0"]
        command += ["--latency", str(self.latency), "--tool-calls", str(self.tool_calls)]
        command += ["--tool-name", self.tool_name, "--answer-words", str(self.answer_words)]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                command, cwd=REPO, stdout=subprocess.PIPE, stderr=log, start_new_session=True
            )
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            ready = selector.select(30)
        line = self.process.stdout.readline().decode() if ready else ""
        if not line.startswith("LISTENING "):
            self.stop()
            raise RuntimeError(f"the fake model did not start: {line!r} {self.log.read_text()}")
        self.base_url = line.split(maxsplit=1)[1].strip()
        return self

    def stats(self) -> dict[str, float]:
        answer: dict[str, float] = httpx.get(f"{self.root}/_stats", timeout=10).json()
        return answer

    def stamps(self) -> list[tuple[float, float]]:
        """The last calls' arrival and answer times (monotonic seconds)."""
        calls = httpx.get(f"{self.root}/_stamps", timeout=10).json()
        return [(float(arrived), float(answered)) for arrived, answered in calls]

    def set_latency(self, seconds: float) -> None:
        httpx.post(f"{self.root}/_control", json={"latency": seconds}, timeout=10)

    def stop(self) -> None:
        if self.process is not None:
            _stop_group(self.process)
            if self.process.stdout is not None:
                self.process.stdout.close()


# A PostgreSQL backend reports its statistics when it goes idle, but at most once a second: one
# that reported less than a second before waits for its idle timer, 10 s (PostgreSQL 15's
# PGSTAT_IDLE_INTERVAL). So the counts of some work are complete only 10 s after it. Read at
# once, the tail of the work before a measured block lands in it (a quick overhead run: 14.2
# transactions per step against 6.9; bench/RESULTS.md, eighteenth round). Waiting until two
# readings agree does not work either: an idle Juru server's workers look for runs every few
# seconds, each look a transaction, so the readings never agreed and every wait ran to its
# 60 s limit (nineteenth round).
STATS_SETTLE_SECONDS = 10.5


def settled_pg_stats(
    database: str, settle: bool = True, sleep: Callable[[float], None] = time.sleep
) -> dict[str, int] | None:
    """`xact_commit`, `xact_rollback` and `sessions` of `database` (pg_stat_database), read
    STATS_SETTLE_SECONDS after the call, once every backend has reported the work done before
    it. The counts then include what the server did meanwhile: its idle work for that long.
    Under a steady load (`settle=False`) a plain reading is as good at either end.

    The wait is idle time: a caller that also reads the server's CPU reads it after this at
    the start of a block and before this at its end, so the wait is never in the block."""
    import psycopg

    if settle:
        sleep(STATS_SETTLE_SECONDS)
    with psycopg.connect(f"{POSTGRES_URL}/postgres", autocommit=True) as connection:
        connection.execute("SELECT pg_stat_clear_snapshot()")
        row = connection.execute(
            "SELECT xact_commit, xact_rollback, sessions FROM pg_stat_database WHERE datname = %s",
            (database,),
        ).fetchone()
    if row is None:
        return None
    return {"commits": int(row[0]), "rollbacks": int(row[1]), "sessions": int(row[2])}


def create_postgres_database(prefix: str) -> str:
    """A new database on the bench's PostgreSQL, named `prefix` and a random tail: its name."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(f"{POSTGRES_URL}/postgres", autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_postgres_database(name: str) -> None:
    import psycopg

    with psycopg.connect(f"{POSTGRES_URL}/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass
class Database:
    """A fresh database for one server: a SQLite file, or a new PostgreSQL database."""

    dialect: str
    workdir: Path
    url: str = ""
    _pg_name: str = ""

    def create(self) -> Database:
        if self.dialect == "sqlite":
            self.url = f"sqlite:///{self.workdir / 'juru.db'}"
            return self
        self._pg_name = create_postgres_database("juru_bench")
        self.url = f"{POSTGRES_URL}/{self._pg_name}"
        run_juru(self.url, "db", "upgrade", cwd=self.workdir)
        return self

    def pg_stats(self, settle: bool = True) -> dict[str, int] | None:
        """Transactions committed and sessions opened in this database so far (PostgreSQL's
        statistics, see `settled_pg_stats`; None on SQLite)."""
        return settled_pg_stats(self._pg_name, settle) if self._pg_name else None

    def workers_that_ran(self) -> set[str]:
        """The workers (one name per process) that have claimed a run of this database."""
        query = "SELECT DISTINCT last_worker FROM runs WHERE last_worker IS NOT NULL"
        if self.dialect == "sqlite":
            import sqlite3

            with contextlib.closing(sqlite3.connect(self.workdir / "juru.db")) as connection:
                return {str(row[0]) for row in connection.execute(query)}
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as connection:
            return {str(row[0]) for row in connection.execute(query)}

    def commits(self) -> int | None:
        stats = self.pg_stats()
        return None if stats is None else stats["commits"]

    def drop(self) -> None:
        if self._pg_name:
            drop_postgres_database(self._pg_name)


class JuruServer:
    """`juru serve` on a free port, pointed at the fake model, rate limits lifted."""

    def __init__(
        self,
        database: Database,
        model: FakeModel,
        workers: int | None,
        env: Mapping[str, str],
        under: Sequence[str] = (),
    ) -> None:
        self.database, self.model, self.workers = database, model, workers
        # Juru's own default concurrency unless a scenario needs another (`workers`).
        chosen = {} if workers is None else {"JURU_WORKERS": str(workers)}
        self.env = {
            **os.environ,
            "JURU_DATABASE_URL": database.url,
            **chosen,
            "JURU_TIER_RATE_LIMITS": NO_RATE_LIMITS,
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "bench",
            **env,
        }
        # JURU_BENCH_SERVE_MODULE runs the server through another module, for experiments
        # (it must accept `serve --port P`, as `juru` and `bench.sql_census` do).
        module = os.environ.get("JURU_BENCH_SERVE_MODULE") or (
            "bench.sql_census" if self.census_file else "juru"
        )
        if self.census_file:
            self.env["JURU_BENCH_SQL_CENSUS"] = str(self.census_file)
            self.env["PYTHONPATH"] = with_repo_path()
        port = free_port()
        # `under`: a program the server runs under (the instructions scenario's callgrind).
        command = [*under, sys.executable, "-m", module, "serve", "--port", str(port)]
        log = database.workdir / "juru-serve.log"
        self.process = ServerProcess(command, port, self.env, log, cwd=database.workdir)

    @property
    def base_url(self) -> str:
        return self.process.base_url

    @property
    def pid(self) -> int:
        assert self.process.process is not None
        return self.process.process.pid

    @property
    def census_file(self) -> Path | None:
        """Where the SQL census is written (JURU_BENCH_SQL=1 only; see bench/sql_census.py)."""
        if self.env.get("JURU_BENCH_SQL") != "1":
            return None
        return self.database.workdir / "sql-census.json"

    def sql_census(self) -> dict[str, int] | None:
        """Statements run so far by verb and table, or None when the census is off."""
        base = self.census_file
        if base is None:
            return None
        from bench.sql_census import census_file

        targets = {pid: census_file(base, pid) for pid in process_tree(self.pid)}
        for pid, target in targets.items():
            target.unlink(missing_ok=True)
            os.kill(pid, signal.SIGUSR1)
        counts: Counter[str] = Counter()
        deadline = time.monotonic() + 10
        for target in targets.values():
            while not target.exists():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the server wrote no SQL census {target.name}")
                time.sleep(0.01)  # polling for the file against a deadline
            counts.update(json.loads(target.read_text()))
        return dict(counts)

    def start(self) -> JuruServer:
        self.process.start()
        return self

    def api_key(self) -> str:
        """A key of an account with a large balance (paid models need one)."""
        return api_key(self.database.url, "1000000000", "bench", cwd=self.database.workdir)

    def cpu_seconds(self) -> float:
        """The API process and its worker processes together."""
        return tree_cpu_seconds(self.pid)

    def api_cpu_seconds(self) -> float:
        """The API process alone (`juru serve`'s own, which serves HTTP)."""
        return cpu_seconds(self.pid)

    def rss_bytes(self) -> int:
        """The API process and its worker processes together."""
        return tree_rss_bytes(self.pid)

    def stop(self) -> None:
        self.process.stop()


@dataclass
class Stack:
    """A fake model, a fresh database and a Juru server on it, with a funded key."""

    dialect: str
    workdir: Path
    model: FakeModel
    database: Database
    server: JuruServer
    key: str
    logs: list[Path] = field(default_factory=list)


@contextlib.contextmanager
def stack(
    dialect: str,
    *,
    workers: int | None = None,
    latency: float = 0.2,
    tool_calls: int = 4,
    tool_name: str = TOOL_NAME,
    env: Mapping[str, str] | None = None,
    under: Sequence[str] = (),
) -> Iterator[Stack]:
    """Start everything a scenario needs; stop it all and drop the database on exit. `under`:
    a command the server runs under (its arguments before the server's own)."""
    workdir = Path(tempfile.mkdtemp(prefix=f"juru-bench-{dialect}-"))
    model = FakeModel(workdir / "fake-model.log", latency, tool_calls, tool_name)
    database = Database(dialect, workdir)
    server: JuruServer | None = None
    try:
        model.start()
        database.create()
        server = JuruServer(database, model, workers, env or {}, under).start()
        yield Stack(dialect, workdir, model, database, server, server.api_key())
    finally:
        if server is not None:
            server.stop()
        model.stop()
        database.drop()
        if not os.environ.get("JURU_BENCH_KEEP"):
            shutil.rmtree(workdir, ignore_errors=True)


def postgres_reachable() -> bool:
    try:
        import psycopg

        with psycopg.connect(f"{POSTGRES_URL}/postgres", connect_timeout=3):
            return True
    except Exception:
        return False


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kb = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "ram_gib": round(mem_kb / 1024 / 1024, 1),
        "python": sys.version.split()[0],
        "load_average": os.getloadavg(),
        # Settings the servers took from the bench's environment rather than their defaults.
        "juru_settings": {
            name: value
            for name, value in sorted(os.environ.items())
            if name.startswith("JURU_") and not name.startswith("JURU_BENCH_")
        },
    }
