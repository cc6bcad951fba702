"""Fixtures of the end-to-end tests: the fake OpenAI-compatible model as a process of its own,
a direct look at the server's database, and Debian's Chromium driven by Playwright."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

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


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = shutil.which("chromium")
    if executable is None:
        if os.environ.get("JURU_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium is not installed (scripts/test installs it with apt-get)")
        pytest.skip("chromium is not installed: apt-get install chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True)
        try:
            yield launched
        finally:
            launched.close()
