"""`JURU_ACCESS_LOG`: a real `juru serve` logs a line per request by default, none when off."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.server import ServerProcess, free_port, juru_command

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(("setting", "logged"), [(None, True), ("false", False)])
def test_request_lines_follow_the_setting(
    tmp_path: Path, setting: str | None, logged: bool
) -> None:
    env: dict[str, str | None] = {
        "JURU_DATABASE_URL": f"sqlite:///{tmp_path}/juru.db",
        "JURU_ACCESS_LOG": setting,
    }
    log = tmp_path / "server.log"
    with ServerProcess([*juru_command(), "serve"], free_port(), env, log) as server:
        answer = httpx.get(f"{server.base_url}/v1/models/not-a-model", timeout=10)
        assert answer.status_code == 401
    output = log.read_text(errors="replace")
    assert "Application startup complete" in output
    assert ('"GET /v1/models/not-a-model HTTP/1.1" 401' in output) is logged
