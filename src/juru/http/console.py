"""`/console`: the browser console's files, and the local key it offers on the same machine.

The console is static (HTML, CSS and ES modules in `juru/console/static`, no build step) and
talks to the API like any other client, with the key the user signs in with.
"""

from __future__ import annotations

from ipaddress import ip_address
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from juru.billing.accounts import local_key_path
from juru.http.deps import Context

CONSOLE_FILES = Path(__file__).resolve().parent.parent / "console" / "static"
NO_STORE = {"Cache-Control": "no-store"}
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})

router = APIRouter(include_in_schema=False)


@router.get("/console")
async def console_root() -> RedirectResponse:
    return RedirectResponse("/console/", status_code=308)


@router.get("/console/local-key")
async def local_key(request: Request, context: Context) -> JSONResponse:
    """The key of a fresh SQLite install's `local` account, to a page of this server opened
    on this machine; 404 to anyone else, as if there were none."""
    path = local_key_path(context.database)
    if path is None or not _from_this_machine(request) or not path.is_file():
        return JSONResponse({"api_key": None}, 404, NO_STORE)
    return JSONResponse({"api_key": path.read_text().strip()}, 200, NO_STORE)


def _from_this_machine(request: Request) -> bool:
    """A loopback peer that asked for a loopback name (not a rebound DNS name) from a page of
    this server itself (a page of another origin sends its `Origin`)."""
    client = request.client
    if client is None or not _is_loopback(client.host):
        return False
    host = request.headers.get("host", "")
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    if name.lower() not in LOOPBACK_NAMES:
        return False
    origin = request.headers.get("origin")
    return origin is None or origin == f"{request.url.scheme}://{host}"


def _is_loopback(address: str) -> bool:
    try:
        return ip_address(address).is_loopback
    except ValueError:
        return False


def install_console(app: FastAPI) -> None:
    app.include_router(router)
    app.mount("/console/", StaticFiles(directory=CONSOLE_FILES, html=True), name="console")
