"""Dependencies shared by the routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from juru.context import AppContext
from juru.hosted.chat import ChatCompletions
from juru.hosted.documents import DocumentLibrary
from juru.hosted.files import FileService
from juru.hosted.service import HostedService
from juru.playground import Playground
from juru.runtime.service import RuntimeService


# The dependencies are coroutines, even where they only look something up: FastAPI runs a
# plain function in its thread pool, a thread hop per request (a test keeps every dependency
# and route a coroutine).
def context_of(request: Request) -> AppContext:
    context: AppContext = request.app.state.context
    return context


async def get_context(request: Request) -> AppContext:
    return context_of(request)


async def get_playground(request: Request) -> Playground:
    return context_of(request).playground


async def get_hosted(request: Request) -> HostedService:
    return context_of(request).hosted


async def get_runtime(request: Request) -> RuntimeService:
    return context_of(request).runtime


async def get_chat(request: Request) -> ChatCompletions:
    return context_of(request).chat


async def get_files(request: Request) -> FileService:
    return context_of(request).files


async def get_documents(request: Request) -> DocumentLibrary:
    return context_of(request).documents


RATE_LIMIT_HEADERS = "rate_limit_headers"
# Declares the scheme in the OpenAPI description; `Access.admit` reads and checks the header.
BEARER = HTTPBearer(
    auto_error=False, scheme_name="bearer", description="An API key: `juru_live_...`."
)


async def current_account(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)],
) -> str:
    """The account a `/v1` request acts for: the owner of its Bearer key (401 without a live
    key, 429 past the account's rate limit)."""
    authorization = request.headers.get("authorization")
    caller = await context_of(request).access.admit(authorization)
    setattr(request.state, RATE_LIMIT_HEADERS, caller.rate_limit.headers())
    return caller.account_id


async def streaming_account(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)],
) -> str:
    """The account a run's stream is read for: a Bearer key as on every `/v1` route or, for a
    client that cannot send headers (EventSource), `?token=` from `POST .../stream_token`."""
    context = context_of(request)
    token = request.query_params.get("token")
    if token is not None and request.headers.get("authorization") is None:
        caller = await context.access.admit_stream_token(token, request.path_params["run_id"])
    else:
        caller = await context.access.admit(request.headers.get("authorization"))
    setattr(request.state, RATE_LIMIT_HEADERS, caller.rate_limit.headers())
    return caller.account_id


Context = Annotated[AppContext, Depends(get_context)]
PlaygroundService = Annotated[Playground, Depends(get_playground)]
Hosted = Annotated[HostedService, Depends(get_hosted)]
Chat = Annotated[ChatCompletions, Depends(get_chat)]
Files = Annotated[FileService, Depends(get_files)]
Documents = Annotated[DocumentLibrary, Depends(get_documents)]
Account = Annotated[str, Depends(current_account)]
StreamingAccount = Annotated[str, Depends(streaming_account)]
Runtime = Annotated[RuntimeService, Depends(get_runtime)]
