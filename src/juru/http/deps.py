"""Dependencies shared by the routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from juru.context import AppContext
from juru.playground import Playground


def get_context(request: Request) -> AppContext:
    context: AppContext = request.app.state.context
    return context


def get_playground(request: Request) -> Playground:
    return get_context(request).playground


Context = Annotated[AppContext, Depends(get_context)]
PlaygroundService = Annotated[Playground, Depends(get_playground)]
