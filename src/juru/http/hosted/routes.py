"""Routes of `/v1`: each one validates its body and makes one service call."""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Header, Path, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BeforeValidator

from juru.core.errors import NotFoundError, invalid
from juru.hosted.service import MAX_WAIT_SECONDS
from juru.http.deps import Account, Context, Hosted, StreamingAccount, current_account
from juru.http.hosted.run_streams import EVENT_ID_PATTERN, event_stream
from juru.http.hosted.run_streams import RESPONSE as RUN_STREAM
from juru.http.hosted.schemas import (
    AccountOut,
    AgentIn,
    AgentList,
    AgentOut,
    AgentPatch,
    DeletedOut,
    MessageList,
    MessageOut,
    ModelListOut,
    ModelOut,
    RunIn,
    RunList,
    RunOut,
    StreamTokenOut,
    ThreadIn,
    ThreadList,
    ThreadOut,
    ToolOutputsIn,
    UsageOut,
)
from juru.http.limits import check_input_size
from juru.http.openapi import ADMISSION_ERRORS, errors
from juru.models.catalog import UnknownModelError
from juru.store.pages import PageRequest

router = APIRouter(
    prefix="/v1",
    tags=["hosted agents"],
    dependencies=[Depends(current_account)],
    responses=ADMISSION_ERRORS,
)
ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _iso_day(value: object) -> object:
    # pydantic alone would also read `0` or `1700000000` as a day (a Unix time).
    if isinstance(value, str) and not ISO_DAY.fullmatch(value):
        raise ValueError("must be a day written YYYY-MM-DD")
    return value


Day = Annotated[date, BeforeValidator(_iso_day)]
Limit = Annotated[int, Query(ge=1, le=100, description="Items per page.")]
After = Annotated[str | None, Query(description="Cursor: the id after which the page starts.")]
Wait = Annotated[
    float,
    Query(
        ge=0,
        le=MAX_WAIT_SECONDS,
        description="Seconds (at most 30) to wait while the run is queued or running: the "
        "answer comes as soon as it needs your tool outputs or has ended.",
    ),
]


def page(limit: int, after: str | None) -> PageRequest:
    return PageRequest(limit=limit, after=after)


@router.get("/models")
async def list_models(context: Context) -> ModelListOut:
    """The model catalog: prices in Rupiah per million tokens, and which models drive agents."""
    return ModelListOut(data=[ModelOut.of(model) for model in context.catalog.models()])


# `:path` because ids hold a slash (`juru/demo`), which OpenAI's SDKs send unescaped.
@router.get("/models/{model_id:path}", responses=errors(404))
async def get_model(
    model_id: Annotated[str, Path(examples=["juru/demo"])], context: Context
) -> ModelOut:
    """One catalog model (404 `model_not_found` for an id the catalog does not hold)."""
    try:
        return ModelOut.of(context.catalog.get(model_id))
    except UnknownModelError:
        raise NotFoundError(
            f"model {model_id!r} is not in the catalog", "model_not_found"
        ) from None


@router.get("/account")
async def get_account(account: Account, hosted: Hosted, context: Context) -> AccountOut:
    """The key's account: balance, what paid calls in flight hold, and its rate limit."""
    record = await hosted.account(account)
    return AccountOut.of(record, context.access.limiter.limit_of(record.tier))


@router.get("/usage", responses=errors(400))
async def usage(
    account: Account,
    hosted: Hosted,
    since: Annotated[Day | None, Query(alias="from", description="First day (UTC).")] = None,
    until: Annotated[Day | None, Query(alias="to", description="Last day (UTC).")] = None,
) -> UsageOut:
    """The account's charges summed by day, source (`agent` or `chat`) and model."""
    return UsageOut.of(await hosted.usage(account, since, until))


@router.post("/agents", status_code=201, responses=errors(400, 413))
async def create_agent(body: AgentIn, account: Account, hosted: Hosted) -> AgentOut:
    """Define an agent: model, system prompt, client tools, built-in tools, step limit."""
    return AgentOut.of(await hosted.create_agent(account, body.model_dump()))


@router.get("/agents", responses=errors(400))
async def list_agents(
    account: Account, hosted: Hosted, limit: Limit = 20, after: After = None
) -> AgentList:
    found = await hosted.agents(account, page(limit, after))
    return AgentList.of(found, [AgentOut.of(a) for a in found.items], lambda a: a.id)


@router.get("/agents/{agent_id}", responses=errors(404))
async def get_agent(agent_id: str, account: Account, hosted: Hosted) -> AgentOut:
    return AgentOut.of(await hosted.agent(account, agent_id))


@router.patch("/agents/{agent_id}", responses=errors(400, 404, 413))
async def update_agent(
    agent_id: str, body: AgentPatch, account: Account, hosted: Hosted
) -> AgentOut:
    changes = body.model_dump(exclude_unset=True)
    return AgentOut.of(await hosted.update_agent(account, agent_id, changes))


@router.delete("/agents/{agent_id}", responses=errors(404))
async def delete_agent(agent_id: str, account: Account, hosted: Hosted) -> DeletedOut:
    """Delete the agent with its threads, runs and their conversation state."""
    await hosted.delete_agent(account, agent_id)
    return DeletedOut(id=agent_id)


@router.post("/agents/{agent_id}/threads", status_code=201, responses=errors(400, 404, 413))
async def create_thread(
    agent_id: str,
    account: Account,
    hosted: Hosted,
    body: Annotated[ThreadIn | None, Body()] = None,
) -> ThreadOut:
    body = body or ThreadIn()
    return ThreadOut.of(await hosted.create_thread(account, agent_id, body.title, body.metadata))


@router.get("/agents/{agent_id}/threads", responses=errors(400, 404))
async def list_threads(
    agent_id: str, account: Account, hosted: Hosted, limit: Limit = 20, after: After = None
) -> ThreadList:
    found = await hosted.threads(account, agent_id, page(limit, after))
    return ThreadList.of(found, [ThreadOut.of(t) for t in found.items], lambda t: t.id)


@router.get("/threads/{thread_id}", responses=errors(404))
async def get_thread(thread_id: str, account: Account, hosted: Hosted) -> ThreadOut:
    return ThreadOut.of(await hosted.thread(account, thread_id))


@router.get("/threads/{thread_id}/messages", responses=errors(400, 404))
async def list_messages(
    thread_id: str, account: Account, hosted: Hosted, limit: Limit = 100, after: After = None
) -> MessageList:
    """The thread's transcript in the order it was said, with the run behind each message."""
    found = await hosted.messages(account, thread_id, limit, after)
    return MessageList.of(found, [MessageOut.of(m) for m in found.items], lambda m: m.message_id)


@router.get("/threads/{thread_id}/runs", responses=errors(400, 404))
async def list_runs(
    thread_id: str, account: Account, hosted: Hosted, limit: Limit = 20, after: After = None
) -> RunList:
    found = await hosted.runs(account, thread_id, page(limit, after))
    return RunList.of(found, [RunOut.of(run) for run in found.items], lambda run: run.id)


@router.post(
    "/threads/{thread_id}/runs",
    status_code=202,
    response_model=RunOut,
    responses={200: RUN_STREAM, **errors(400, 404, 409, 413, 422)},
)
async def create_run(
    thread_id: str,
    body: RunIn,
    account: Account,
    hosted: Hosted,
    context: Context,
    idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
    wait: Wait = 0,
) -> RunOut | StreamingResponse:
    """Start a background run (409 `thread_busy` while another run of the thread is active).
    The same Idempotency-Key on the thread within 24 hours returns the same run (422
    `idempotency_key_reused` if the body differs). With `"stream": true` the answer is the
    run's event stream (`GET /v1/runs/{run_id}/events`) from its first event; with `wait`,
    the run once it needs tool outputs or has ended (`GET /v1/runs/{run_id}?wait=`)."""
    messages = body.messages()
    check_input_size(messages, context.settings, "input")
    if body.stream and wait:
        raise invalid('wait and "stream": true are two ways to follow a run: ask for one')
    run = await hosted.create_run(account, thread_id, messages, idempotency_key, wait)
    if body.stream:
        items = await hosted.run_events(account, run.id)
        assert items is not None  # from the first event: a run's log is never empty
        return event_stream(items)
    return RunOut.of(run)


@router.get("/runs", responses=errors(400, 404))
async def list_account_runs(
    account: Account,
    hosted: Hosted,
    parent_run_id: Annotated[
        str | None,
        Query(description="Only the child runs this run started (agents called as tools)."),
    ] = None,
    limit: Limit = 20,
    after: After = None,
) -> RunList:
    """The account's runs, newest first (404 when `parent_run_id` names no run of it)."""
    found = await hosted.account_runs(account, parent_run_id, page(limit, after))
    return RunList.of(found, [RunOut.of(run) for run in found.items], lambda run: run.id)


@router.get("/runs/{run_id}", responses=errors(400, 404))
async def get_run(
    run_id: str,
    account: Account,
    hosted: Hosted,
    wait: Wait = 0,
) -> RunOut:
    if wait:
        return RunOut.of(await hosted.wait_while_working(account, run_id, wait))
    return RunOut.of(await hosted.run(account, run_id))


@router.post("/runs/{run_id}/stream_token", status_code=201, responses=errors(404))
async def create_stream_token(
    run_id: str, account: Account, hosted: Hosted, request: Request
) -> StreamTokenOut:
    """A token that reads this run's stream without a header (the browser's EventSource):
    `GET url` until `expires_at`, signed with the calling key (revoking the key revokes it)."""
    authorization = request.headers.get("authorization")
    return StreamTokenOut.of(await hosted.stream_token(account, run_id, authorization))


@router.post("/runs/{run_id}/tool_outputs", responses=errors(400, 404, 409, 413))
async def submit_tool_outputs(
    run_id: str, body: ToolOutputsIn, account: Account, hosted: Hosted, wait: Wait = 0
) -> RunOut:
    """Answer every pending tool call of a run in `requires_action`, in one request (409
    `run_not_waiting` otherwise). With `wait`, the answer is the run once it needs tool
    outputs again or has ended, as `GET /v1/runs/{run_id}?wait=` would give it: a client that
    executes tools needs one request per model step."""
    outputs = [item.model_dump() for item in body.outputs]
    return RunOut.of(await hosted.submit_tool_outputs(account, run_id, outputs, wait))


@router.post("/runs/{run_id}/cancel", responses=errors(404))
async def cancel_run(run_id: str, account: Account, hosted: Hosted) -> RunOut:
    """Cancel an active run; a run that already ended is returned unchanged."""
    return RunOut.of(await hosted.cancel_run(account, run_id))


# A run's stream: its own router, because a stream token may stand in for the Bearer key.
streams = APIRouter(prefix="/v1", tags=["hosted agents"], responses=ADMISSION_ERRORS)


@streams.get(
    "/runs/{run_id}/events",
    response_class=StreamingResponse,
    responses={
        200: RUN_STREAM,
        204: {"description": "The run ended and every event after the given id was sent."},
        **errors(400, 404, 410),
    },
)
async def run_events(
    run_id: str,
    account: StreamingAccount,
    hosted: Hosted,
    after: Annotated[
        int | None, Query(ge=0, description="Send the events after this id (as Last-Event-ID).")
    ] = None,
    token: Annotated[
        str | None,
        Query(
            description="A stream token (`POST /v1/runs/{run_id}/stream_token`) instead "
            "of the Authorization header, for clients that cannot send one."
        ),
    ] = None,
    last_event_id: Annotated[
        str | None,
        Header(
            pattern=EVENT_ID_PATTERN,
            description="The last event id the client received; it wins over `after`.",
        ),
    ] = None,
) -> Response:
    """The run's events as server-sent events: the durable ones after the given id, then live
    ones as they happen; open across `requires_action`, closed right after the terminal
    status. A run that ended more than JURU_RUN_EVENTS_DAYS ago: 410 `run_events_pruned`."""
    start = int(last_event_id) if last_event_id is not None else after or 0
    items = await hosted.run_events(account, run_id, start)
    if items is None:
        # The run ended and the client has every event: 204 tells an EventSource to stop.
        return Response(status_code=204)
    return event_stream(items)
