"""Aegra (`aegra-api` from PyPI) as a peer: its own virtual environment, database and server.

The virtual environment is `bench/.aegra-venv` (git-ignored), made on first use with
`python -m venv` and pip, with the shared libraries pinned by the repository's
`constraints.txt` (so LangGraph, LangChain and the openai client are the versions Juru runs).
`AEGRA_VERSION` is the newest `aegra-api` that installs on Python 3.11: later releases
(0.7.0 on) require Python >= 3.12. Besides `aegra-api` it gets `langchain-openai` (the
graph's model client), `greenlet` (which SQLAlchemy's asyncio needs and aegra-api 0.6.0 does
not declare) and `uvloop` + `httptools` (uvicorn's fast loop and parser, which Juru's server
uses too, so the HTTP stack is the same on both sides).

The server is `uvicorn aegra_api.main:app` on 127.0.0.1, with `AUTH_TYPE=noop`, on a fresh
PostgreSQL database `juru_bench_aegra`, serving `bench/graphs.py:aegra_graph` as graph `react`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from bench.harness import POSTGRES_URL, REPO, FakeModel, settled_pg_stats, tree_cpu_seconds
from tests.support.server import ServerProcess, free_port

AEGRA_VERSION = "0.6.0"
VENV = REPO / "bench" / ".aegra-venv"
REQUIREMENTS = [f"aegra-api=={AEGRA_VERSION}", "langchain-openai", "greenlet", "uvloop"]
REQUIREMENTS += ["httptools"]
DATABASE = "juru_bench_aegra"
GRAPH_ID = "react"


class AegraUnavailableError(RuntimeError):
    """Aegra cannot run here; the message says what is missing."""


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def ensure_venv() -> Path:
    """The Aegra environment's Python, installing it first if needed."""
    python = VENV / "bin" / "python"
    stamp = VENV / ".bench-requirements"
    wanted = " ".join(REQUIREMENTS)
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    if not python.exists():
        made = subprocess.run(
            [sys.executable, "-m", "venv", str(VENV)], capture_output=True, text=True, check=False
        )
        if made.returncode != 0:
            raise AegraUnavailableError(f"python -m venv failed: {_tail(made.stderr)}")
    pip = [str(python), "-m", "pip", "install", "--quiet", "-c", str(REPO / "constraints.txt")]
    installed = subprocess.run(
        [*pip, *REQUIREMENTS], capture_output=True, text=True, timeout=1200, check=False
    )
    if installed.returncode != 0:
        errors = [line for line in installed.stderr.splitlines() if "is ignored" not in line]
        raise AegraUnavailableError(
            f"pip install {wanted} failed (Python {sys.version.split()[0]}): "
            + _tail("\n".join(errors))
        )
    stamp.write_text(wanted)
    return python


def installed_version(python: Path) -> str:
    done = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('aegra-api'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _admin(statement: str) -> None:
    import psycopg

    with psycopg.connect(f"{POSTGRES_URL}/postgres", autocommit=True) as connection:
        connection.execute(statement)


def pg_commits() -> int | None:
    """Transactions committed in Aegra's database so far (pg_stat_database, settled)."""
    stats = settled_pg_stats(DATABASE)
    return None if stats is None else stats["commits"]


class AegraServer:
    """Aegra serving the bench graph, on a fresh database, pointed at the fake model."""

    def __init__(self, python: Path, workdir: Path, model: FakeModel) -> None:
        self.python, self.workdir, self.model = python, workdir, model
        self.process: ServerProcess | None = None

    def start(self) -> AegraServer:
        _admin(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        _admin(f'CREATE DATABASE "{DATABASE}"')
        config = self.workdir / "aegra.json"
        graphs = {GRAPH_ID: f"{REPO / 'bench' / 'graphs.py'}:aegra_graph"}
        config.write_text(json.dumps({"graphs": graphs}))
        port = free_port()
        env: dict[str, str | None] = {
            "DATABASE_URL": f"{POSTGRES_URL}/{DATABASE}",
            "AEGRA_CONFIG": str(config),
            "AUTH_TYPE": "noop",
            "OPENAI_BASE_URL": self.model.base_url,
            "OPENAI_API_KEY": "bench",
            # Nothing of the bench's own environment leaks into Aegra's.
            "PYTHONPATH": None,
            "VIRTUAL_ENV": None,
        }
        command = [str(self.python), "-m", "uvicorn", "aegra_api.main:app"]
        command += ["--host", "127.0.0.1", "--port", str(port)]
        self.process = ServerProcess(command, port, env, self.workdir / "aegra.log", self.workdir)
        self.process.start()
        return self

    @property
    def base_url(self) -> str:
        assert self.process is not None
        return self.process.base_url

    def cpu_seconds(self) -> float:
        assert self.process is not None and self.process.process is not None
        return tree_cpu_seconds(self.process.process.pid)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
        _admin(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')


async def one_run(http: httpx.AsyncClient) -> None:
    """Create a thread, then run the graph on it and wait for the end (the SDK's
    `threads.create` + `runs.wait`); raise unless the run answered."""
    created = await http.post("/threads", json={})
    created.raise_for_status()
    thread_id = created.json()["thread_id"]
    body: dict[str, Any] = {
        "assistant_id": GRAPH_ID,
        "input": {"messages": [{"role": "user", "content": "go"}]},
    }
    response = await http.post(f"/threads/{thread_id}/runs/wait", json=body)
    response.raise_for_status()
    messages = response.json().get("messages") or []
    if not messages or messages[-1].get("content") != "done":
        raise RuntimeError(f"an Aegra run did not answer: {response.text[:300]}")


VERSION_NOTE = "the newest aegra-api for Python 3.11; 0.7.0 and later require Python >= 3.12"
