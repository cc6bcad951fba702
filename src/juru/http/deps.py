"""Dependencies shared by the routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from juru.context import AppContext
from juru.hosted.service import HostedService
from juru.playground import Playground
from juru.runtime.service import RuntimeService


def get_context(request: Request) -> AppContext:
    context: AppContext = request.app.state.context
    return context


def get_playground(request: Request) -> Playground:
    return get_context(request).playground


def get_hosted(request: Request) -> HostedService:
    return get_context(request).hosted


def get_runtime(request: Request) -> RuntimeService:
    return get_context(request).runtime


def current_account(request: Request) -> str:
    """The account a `/v1` request acts for (every request uses the local account until API
    keys arrive)."""
    return get_context(request).local_account_id


Context = Annotated[AppContext, Depends(get_context)]
PlaygroundService = Annotated[Playground, Depends(get_playground)]
Hosted = Annotated[HostedService, Depends(get_hosted)]
Account = Annotated[str, Depends(current_account)]
Runtime = Annotated[RuntimeService, Depends(get_runtime)]
