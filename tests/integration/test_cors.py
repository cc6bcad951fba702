"""CORS from PLAYGROUND_ORIGINS covers the whole app while the playground is on."""

from __future__ import annotations

from collections.abc import Callable

from httpx import AsyncClient

from juru.app import create_app
from juru.settings import Settings
from tests.conftest import start_client

ALLOWED = "http://127.0.0.1:8001"


def preflight(origin: str, method: str = "POST") -> dict[str, str]:
    return {
        "Origin": origin,
        "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": "Content-Type",
    }


async def test_default_origins_may_call_any_path(client: AsyncClient) -> None:
    for path in ("/playground/messages", "/health"):
        response = await client.options(path, headers=preflight(ALLOWED))
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == ALLOWED
        assert set(response.headers["access-control-allow-methods"].split(", ")) == {"GET", "POST"}
        assert "content-type" in response.headers["access-control-allow-headers"].lower()
    simple = await client.get("/health", headers={"Origin": "http://localhost:8001"})
    assert simple.headers["access-control-allow-origin"] == "http://localhost:8001"


async def test_other_origins_methods_and_headers_are_refused(client: AsyncClient) -> None:
    stranger = await client.options("/playground/messages", headers=preflight("http://evil.test"))
    assert stranger.status_code == 400
    assert "access-control-allow-origin" not in stranger.headers
    delete = await client.options("/health", headers=preflight(ALLOWED, "DELETE"))
    assert delete.status_code == 400
    auth = await client.options(
        "/health",
        headers={**preflight(ALLOWED), "Access-Control-Request-Headers": "Authorization"},
    )
    assert auth.status_code == 400


async def test_curl_style_requests_are_not_affected(client: AsyncClient) -> None:
    response = await client.get("/playground/features")
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


async def test_configured_origins_replace_the_defaults(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(playground_origins=["https://app.example"])
    async for client in start_client(create_app(settings)):
        ok = await client.options("/health", headers=preflight("https://app.example"))
        assert ok.headers["access-control-allow-origin"] == "https://app.example"
        old = await client.options("/health", headers=preflight(ALLOWED))
        assert old.status_code == 400


async def test_no_cors_while_the_playground_is_off(
    settings_factory: Callable[..., Settings],
) -> None:
    async for client in start_client(create_app(settings_factory(playground_enabled=False))):
        response = await client.get("/health", headers={"Origin": ALLOWED})
        assert "access-control-allow-origin" not in response.headers
