"""`create_app(settings)`: the FastAPI app; its lifespan owns every open resource."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from starlette.routing import Route

import juru
from juru.context import open_context, running_workers
from juru.core.clock import Clock
from juru.engine.machine import RunLimits
from juru.http import health, playground, reasoning_engine
from juru.http.console import install_console
from juru.http.edges import BodyLimits, EdgeMiddleware
from juru.http.errors import install_error_handlers
from juru.http.hosted import chat as hosted_chat
from juru.http.hosted import library as hosted_library
from juru.http.hosted import routes as hosted_routes
from juru.http.hosted.chat_schemas import ChatCompletionChunk
from juru.http.hosted.schemas import MessageDeltaOut, StepEventOut
from juru.http.mcp import MCP_PATH, McpEndpoint
from juru.http.openapi import install_docs, install_openapi
from juru.http.rate_limit_headers import RateLimitHeadersMiddleware
from juru.settings import Settings


def create_app(
    settings: Settings,
    *,
    clock: Clock | None = None,
    limits: RunLimits | None = None,
    worker_name: str | None = None,
    on_started: Callable[[], None] | None = None,
) -> FastAPI:
    """Build the app for `settings`; nothing is opened until the app starts.

    The lifespan opens the database and, with `settings.workers` > 0, runs workers in-process
    (under the stable `worker_name` if one is given: see `context.running_workers`).
    """

    mcp = McpEndpoint()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with (
            open_context(settings, clock, limits) as context,
            running_workers(context, settings.workers, worker_name) as worker,
        ):
            app.state.context = context
            app.state.worker = worker
            if on_started is not None:
                on_started()
            yield

    app = FastAPI(
        title="Juru",
        version=juru.__version__,
        description="Self-hosted agent server: playground API, hosted agents, Agent Runtime.",
        lifespan=lifespan,
        docs_url=None,  # served by install_docs, from Juru's own copy of the assets
        redoc_url=None,
    )
    install_openapi(app, ChatCompletionChunk, StepEventOut, MessageDeltaOut)
    install_docs(app)
    install_error_handlers(app)
    app.add_middleware(RateLimitHeadersMiddleware)
    # Outside the routes, inside CORS: refusals at the edge carry the CORS headers too.
    body_limits = BodyLimits(settings.max_body_bytes, settings.documents_max_bytes)
    app.add_middleware(EdgeMiddleware, limits=body_limits)
    app.include_router(health.router)
    install_console(app)
    # An ASGI app at exactly /mcp (a Mount would redirect /mcp to /mcp/).
    app.router.routes.append(Route(MCP_PATH, mcp, methods=["GET", "POST", "DELETE"]))
    app.include_router(hosted_routes.router)
    app.include_router(hosted_routes.streams)
    app.include_router(hosted_chat.router)
    app.include_router(hosted_library.router)
    if settings.runtime_enabled:
        app.include_router(reasoning_engine.router)
    if settings.playground_enabled:
        app.include_router(playground.router)
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.playground_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type"],
        )
    return app


def stop_long_polls(app: FastAPI) -> None:
    """The server is stopping: the app's `?wait=` long-polls answer now with their runs as they
    stand (`HostedService.stop_waiting`); nothing to do before its lifespan has started."""
    context = getattr(app.state, "context", None)
    if context is not None:
        context.hosted.stop_waiting()
