"""The documentation site's Playground page in Chromium: the panel, served by the site on one
origin, talks to a `juru serve` on another (the CORS rule `PLAYGROUND_ORIGINS` exists for
this), in English and Indonesian, and says so plainly when the server is down or refuses the
origin."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.test_console import SCREENSHOTS
from tests.e2e.test_docs_site import mkdocs_build
from tests.e2e.test_hosted_runs import juru_serve
from tests.support.server import REPO, free_port

pytestmark = pytest.mark.e2e
expect.set_options(timeout=60_000)


class QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serving(site: Path) -> Iterator[str]:
    """`site` over HTTP on a port (an origin) of its own."""
    handler = functools.partial(QuietFiles, directory=str(site))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built_site = tmp_path_factory.mktemp("docs") / "site"
    built = mkdocs_build(REPO / "mkdocs.yml", built_site)
    assert built.returncode == 0, built.stderr
    return built_site


@pytest.fixture(scope="module")
def docs_origin(site: Path) -> Iterator[str]:
    with serving(site) as origin:
        yield origin


@pytest.fixture(scope="module")
def juru_url(docs_origin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server whose PLAYGROUND_ORIGINS allows the documentation's origin, and no other."""
    folder = tmp_path_factory.mktemp("juru")
    with juru_serve(
        f"sqlite:///{folder}/juru.db",
        folder / "serve.log",
        PLAYGROUND_ENABLED="true",
        PLAYGROUND_ORIGINS=docs_origin,
    ) as server:
        yield server.base_url


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    opened = context.new_page()
    try:
        yield opened
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        opened.screenshot(path=SCREENSHOTS / f"docs-{request.node.name}.png", full_page=True)
    finally:
        context.close()


def test_the_playground_page_answers_from_another_origin(
    page: Page, docs_origin: str, juru_url: str
) -> None:
    page.goto(f"{docs_origin}/id/playground-panel/?server={juru_url}")
    expect(page.locator("#feature")).to_be_visible()  # the Indonesian page mounts it too
    page.goto(f"{docs_origin}/playground-panel/?server={juru_url}")
    page.select_option("#feature", "ReAct")
    page.locator(".example").first.click()
    turn = page.locator(".timeline .turn").last
    expect(turn.locator(".answer")).to_be_visible()
    expect(turn.locator(".event.call")).to_have_count(1)
    expect(turn.locator(".event.result")).to_have_count(1)


def test_the_playground_page_says_when_the_server_is_down(page: Page, docs_origin: str) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    page.goto(f"{docs_origin}/playground-panel/?server={nobody}")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text(f"Cannot reach the Juru server at {nobody}")
    expect(alert).to_contain_text("PLAYGROUND_ORIGINS")
    expect(page.locator("button:has-text('Try again')")).to_be_visible()


def test_the_playground_page_is_refused_by_a_server_that_does_not_allow_its_origin(
    page: Page, site: Path, juru_url: str
) -> None:
    with serving(site) as other_origin:  # the same site on another port: not allowed
        page.goto(f"{other_origin}/playground-panel/?server={juru_url}")
        expect(page.get_by_role("alert")).to_contain_text("PLAYGROUND_ORIGINS")
        expect(page.locator("#feature")).to_have_count(0)
