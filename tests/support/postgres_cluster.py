"""A PostgreSQL cluster of a test's own (initdb on a free port), to stop and start at will.

initdb and postgres refuse to run as root: as root (tests and CI) they run as the `postgres`
user, in a directory of their own that this user can write.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import psycopg

from tests.support.server import free_port

SERVICE_USER = "postgres"


def postgres_binaries() -> Path | None:
    """The directory of initdb and pg_ctl (the newest installed version), if any."""
    found = shutil.which("initdb")
    if found is not None:
        return Path(found).parent
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda path: int(Path(path).parts[-3]) if Path(path).parts[-3].isdigit() else 0,
    )
    return Path(candidates[-1]).parent if candidates else None


def unavailable_reason() -> str | None:
    """Why a cluster cannot be made here, or None."""
    if postgres_binaries() is None:
        return "no PostgreSQL server binaries (initdb, pg_ctl) are installed"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVICE_USER)
        except KeyError:
            return f"running as root and there is no {SERVICE_USER!r} user to run PostgreSQL"
        if shutil.which("runuser") is None:
            return "running as root and runuser is not installed"
    return None


class PostgresCluster:
    """initdb'd in a temporary directory, listening on 127.0.0.1 at a free port."""

    def __init__(self) -> None:
        binaries = postgres_binaries()
        assert binaries is not None
        self.bin = binaries
        self.root = Path(tempfile.mkdtemp(prefix="juru-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self.port = free_port()
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam(SERVICE_USER)
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as_user = ["runuser", "-u", SERVICE_USER, "--"]

    def url(self, database: str = "juru") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *command: str, timeout: float = 120) -> None:
        done = subprocess.run(
            [*self._as_user, *command],
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{command[0]} failed:\n{done.stdout}{done.stderr}\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def init(self) -> PostgresCluster:
        self._run(
            str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "-N"
        )
        self.start()
        with psycopg.connect(self.url("postgres"), autocommit=True) as connection:
            connection.execute("CREATE DATABASE juru")
        return self

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off"
        self._run(
            str(self.bin / "pg_ctl"),
            *("-D", str(self.data), "-l", str(self.log), "-o", options),
            *("-w", "-t", "60", "start"),
        )

    def stop(self) -> None:
        """`pg_ctl stop -m fast`: every session is disconnected, then the server exits."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def destroy(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
