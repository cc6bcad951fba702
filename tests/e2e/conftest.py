"""Fixtures of the end-to-end tests: the fake OpenAI-compatible model as a process of its own,
and a direct look at the server's database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_hosted_runs import Database, FakeOpenAIProcess


@pytest.fixture
def fake_openai_process(tmp_path: Path) -> Iterator[FakeOpenAIProcess]:
    fake = FakeOpenAIProcess(tmp_path / "fake_openai.log").start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    opened = Database(database_url)
    try:
        yield opened
    finally:
        opened.close()
