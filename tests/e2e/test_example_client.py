"""The documented example client against a real server process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.server import REPO, ServerProcess, api_key, free_port, juru_command

pytestmark = pytest.mark.e2e


def test_the_example_client_executes_its_tool_until_the_run_succeeds(tmp_path: Path) -> None:
    # The example talks to the API only: the database behind it is the other tests' concern.
    database_url = f"sqlite:///{tmp_path}/juru.db"
    env: dict[str, str | None] = {"JURU_DATABASE_URL": database_url}
    port = free_port()
    with ServerProcess([*juru_command(), "serve"], port, env, tmp_path / "server.log") as server:
        done = subprocess.run(
            [sys.executable, str(REPO / "examples" / "weather_client.py"), "Cuaca di Jakarta?"],
            env={
                "JURU_BASE_URL": server.base_url,
                "JURU_API_KEY": api_key(database_url),
                "PATH": "/usr/bin:/bin",
            },
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "executed get_weather(city='Jakarta')"
    assert lines[1] == "status: succeeded, steps: 2, cost: Rp0"
    assert '"city": "Jakarta"' in lines[2] and '"temp_c": 31' in lines[2]
