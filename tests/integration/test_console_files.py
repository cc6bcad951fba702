"""`/console`: its files come from the package with the right types, and the local key is
offered only to a page of this server opened on this machine, on SQLite."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from httpx import ASGITransport, AsyncClient

from juru.app import create_app
from juru.http.console import CONSOLE_FILES
from juru.settings import Settings

SERVER = "http://127.0.0.1:8000"


@pytest.fixture
async def console(
    settings_factory: Callable[..., Settings],
) -> AsyncIterator[Callable[[str], AsyncClient]]:
    """Clients of one app, each from the peer address given."""
    app = create_app(settings_factory(workers=0))
    clients: list[AsyncClient] = []

    def client_from(peer: str) -> AsyncClient:
        transport = ASGITransport(app=app, client=(peer, 50000))
        clients.append(AsyncClient(transport=transport, base_url=SERVER))
        return clients[-1]

    async with app.router.lifespan_context(app):
        yield client_from
        for client in clients:
            await client.aclose()


async def test_the_console_is_served_from_the_package(
    console: Callable[[str], AsyncClient],
) -> None:
    http = console("127.0.0.1")
    moved = await http.get("/console")
    assert moved.status_code == 308 and moved.headers["location"] == "/console/"
    page = await http.get("/console/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="app.js">' in page.text
    for name in ("app.js", "playground-panel.js", "console.css"):
        asset = await http.get(f"/console/{name}")
        assert asset.status_code == 200, name
        assert asset.content == (CONSOLE_FILES / name).read_bytes()
    script_type = (await http.get("/console/app.js")).headers["content-type"]
    assert script_type.startswith(("text/javascript", "application/javascript"))
    assert (await http.get("/console/nothing.js")).status_code == 404
    # Every asset the page loads comes from this server: no CDN, no fonts from elsewhere.
    for path in CONSOLE_FILES.iterdir():
        assert "https://" not in path.read_text(), path.name


async def test_the_local_key_goes_to_this_machine_only(
    console: Callable[[str], AsyncClient], database_url: str
) -> None:
    here = console("127.0.0.1")
    offered = await here.get("/console/local-key")
    if not database_url.startswith("sqlite"):
        assert offered.status_code == 404  # PostgreSQL has no local account
        return
    key_file = Path(database_url.removeprefix("sqlite:///")).parent / "local-api-key"
    assert offered.status_code == 200, offered.text
    assert offered.json() == {"api_key": key_file.read_text().strip()}
    assert offered.headers["cache-control"] == "no-store"
    same_page = await here.get("/console/local-key", headers={"Origin": SERVER})
    assert same_page.status_code == 200
    assert (await console("::1").get("/console/local-key")).status_code == 200

    refusals = {
        "another machine": (console("192.168.1.20"), {}),
        "a page of another origin": (here, {"Origin": "http://127.0.0.1:8001"}),
        "a rebound DNS name": (here, {"Host": "attacker.example:8000"}),
    }
    for why, (client, headers) in refusals.items():
        refused = await client.get("/console/local-key", headers=headers)
        assert refused.status_code == 404, why
        assert "juru_" not in refused.text, why
