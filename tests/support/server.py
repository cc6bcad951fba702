"""A real Juru server process for end-to-end tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import httpx

REPO = Path(__file__).resolve().parents[2]
STARTUP_DEADLINE_SECONDS = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def juru_command() -> list[str]:
    return [sys.executable, "-m", "juru"]


class ServerProcess:
    """Starts a command that serves Juru on `port` and waits until /health answers."""

    def __init__(
        self,
        command: Sequence[str],
        port: int,
        env: Mapping[str, str | None],
        log: Path,
        cwd: Path = REPO,
    ) -> None:
        self.command = list(command)
        self.port = port
        merged = {**os.environ, **env, "PORT": str(port)}
        self.env = {name: value for name, value in merged.items() if value is not None}
        self.cwd = cwd
        self.process: subprocess.Popen[bytes] | None = None
        self.log = log

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServerProcess:
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                self.command,
                cwd=self.cwd,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + STARTUP_DEADLINE_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.output()}")
            try:
                if httpx.get(f"{self.base_url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)  # polling the health check with a deadline, not synchronising
        raise RuntimeError(f"server not ready in {STARTUP_DEADLINE_SECONDS}s:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """Kill the whole process group at once (SIGKILL): no shutdown code runs."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def run_juru(database_url: str, *args: str, cwd: Path = REPO) -> str:
    """Run a `juru` command on `database_url`; its standard output (RuntimeError if it fails)."""
    done = subprocess.run(
        [*juru_command(), *args],
        env={**os.environ, "JURU_DATABASE_URL": database_url},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"juru {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def api_key(
    database_url: str, balance: str = "1000000", account: str = "e2e", cwd: Path = REPO
) -> str:
    """A funded key for a server on `database_url`: on SQLite, the local key the server wrote
    at its first start (then topped up); on PostgreSQL, an account and key made with the CLI."""
    if database_url.startswith("sqlite"):
        key_file = Path(database_url.removeprefix("sqlite:///")).parent / "local-api-key"
        run_juru(database_url, "accounts", "topup", "local", balance, cwd=cwd)
        return key_file.read_text().strip()
    run_juru(database_url, "accounts", "create", account, "--balance", balance, cwd=cwd)
    created = run_juru(database_url, "keys", "create", "--account", account, cwd=cwd)
    return created.splitlines()[-1]
