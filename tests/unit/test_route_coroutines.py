"""Every route and dependency of the app is a coroutine: FastAPI runs a plain function in its
thread pool, a thread hop (and a wait for a free thread) per request."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from juru.app import create_app
from tests.conftest import make_settings


def _calls(dependant: Dependant) -> Iterator[tuple[str, Any]]:
    for dependency in dependant.dependencies:
        yield dependency.name or "?", dependency.call
        yield from _calls(dependency)


def _is_coroutine(call: Any) -> bool:
    # A class instance (`HTTPBearer`) is called through its `__call__`.
    target = call if inspect.isfunction(call) or inspect.ismethod(call) else call.__call__
    return inspect.iscoroutinefunction(target)


def _routes(app: FastAPI) -> Iterator[Any]:
    """The app's API routes, with those of its included routers (FastAPI includes a router
    as one route that stands for its routes: `effective_route_contexts`)."""
    for route in app.routes:
        if isinstance(route, APIRoute):
            yield route
        elif hasattr(route, "effective_route_contexts"):
            yield from route.effective_route_contexts()


def test_no_route_or_dependency_runs_in_the_thread_pool(tmp_path: Path) -> None:
    app = create_app(make_settings(f"sqlite:///{tmp_path}/juru.db"))
    routes = [route for route in _routes(app) if route.dependant is not None]
    assert len(routes) >= 40
    plain = [
        f"{sorted(route.methods)} {route.path}: {name}"
        for route in routes
        for name, call in [("endpoint", route.endpoint), *_calls(route.dependant)]
        if call is not None and not _is_coroutine(call)
    ]
    assert plain == []
