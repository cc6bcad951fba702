"""Routes of `/v1`: each one validates its body and makes one service call."""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Query
from fastapi.responses import JSONResponse

from juru.http.deps import Account, Context, Hosted, current_account
from juru.http.hosted.schemas import (
    AgentIn,
    AgentOut,
    AgentPatch,
    ListOut,
    MessageOut,
    ModelOut,
    RunIn,
    RunOut,
    ThreadIn,
    ThreadOut,
    ToolOutputsIn,
    UsageOut,
)
from juru.http.limits import check_input_size
from juru.store.pages import PageRequest

router = APIRouter(prefix="/v1", tags=["hosted agents"], dependencies=[Depends(current_account)])
Limit = Annotated[int, Query(ge=1, le=100, description="Items per page.")]
After = Annotated[str | None, Query(description="Cursor: the id after which the page starts.")]


def page(limit: int, after: str | None) -> PageRequest:
    return PageRequest(limit=limit, after=after)


@router.get("/models")
async def list_models(context: Context) -> dict[str, Any]:
    """The model catalog: prices in Rupiah per million tokens, and which models drive agents."""
    data = [ModelOut.of(model).model_dump(mode="json") for model in context.catalog.models()]
    return {"object": "list", "data": data}


@router.get("/usage")
async def usage(
    account: Account,
    hosted: Hosted,
    since: Annotated[date | None, Query(alias="from", description="First day (UTC).")] = None,
    until: Annotated[date | None, Query(alias="to", description="Last day (UTC).")] = None,
) -> UsageOut:
    """The account's charges summed by day, source (`agent` or `chat`) and model."""
    return UsageOut.of(await hosted.usage(account, since, until))


@router.post("/agents", status_code=201)
async def create_agent(body: AgentIn, account: Account, hosted: Hosted) -> AgentOut:
    """Define an agent: model, system prompt, client tools, built-in tools, step limit."""
    return AgentOut.of(await hosted.create_agent(account, body.model_dump()))


@router.get("/agents")
async def list_agents(
    account: Account, hosted: Hosted, limit: Limit = 20, after: After = None
) -> ListOut[AgentOut]:
    found = await hosted.agents(account, page(limit, after))
    return ListOut.of(found, [AgentOut.of(a) for a in found.items], lambda a: a.id)


@router.get("/agents/{agent_id}")
async def get_agent(agent_id: str, account: Account, hosted: Hosted) -> AgentOut:
    return AgentOut.of(await hosted.agent(account, agent_id))


@router.patch("/agents/{agent_id}")
async def update_agent(
    agent_id: str, body: AgentPatch, account: Account, hosted: Hosted
) -> AgentOut:
    changes = body.model_dump(exclude_unset=True)
    return AgentOut.of(await hosted.update_agent(account, agent_id, changes))


@router.delete("/agents/{agent_id}")
async def delete_agent(agent_id: str, account: Account, hosted: Hosted) -> dict[str, Any]:
    """Delete the agent with its threads, runs and their conversation state."""
    await hosted.delete_agent(account, agent_id)
    return {"id": agent_id, "deleted": True}


@router.post("/agents/{agent_id}/threads", status_code=201)
async def create_thread(
    agent_id: str,
    account: Account,
    hosted: Hosted,
    body: Annotated[ThreadIn | None, Body()] = None,
) -> ThreadOut:
    body = body or ThreadIn()
    return ThreadOut.of(await hosted.create_thread(account, agent_id, body.title, body.metadata))


@router.get("/agents/{agent_id}/threads")
async def list_threads(
    agent_id: str, account: Account, hosted: Hosted, limit: Limit = 20, after: After = None
) -> ListOut[ThreadOut]:
    found = await hosted.threads(account, agent_id, page(limit, after))
    return ListOut.of(found, [ThreadOut.of(t) for t in found.items], lambda t: t.id)


@router.get("/threads/{thread_id}")
async def get_thread(thread_id: str, account: Account, hosted: Hosted) -> ThreadOut:
    return ThreadOut.of(await hosted.thread(account, thread_id))


@router.get("/threads/{thread_id}/messages")
async def list_messages(
    thread_id: str, account: Account, hosted: Hosted, limit: Limit = 100, after: After = None
) -> ListOut[MessageOut]:
    """The thread's transcript in the order it was said, with the run behind each message."""
    found = await hosted.messages(account, thread_id, limit, after)
    return ListOut.of(found, [MessageOut.of(m) for m in found.items], lambda m: m.message_id)


@router.get("/threads/{thread_id}/runs")
async def list_runs(
    thread_id: str, account: Account, hosted: Hosted, limit: Limit = 20, after: After = None
) -> ListOut[dict[str, Any]]:
    found = await hosted.runs(account, thread_id, page(limit, after))
    return ListOut.of(found, [RunOut.of(run) for run in found.items], lambda run: run.id)


@router.post("/threads/{thread_id}/runs", status_code=202)
async def create_run(
    thread_id: str,
    body: RunIn,
    account: Account,
    hosted: Hosted,
    context: Context,
    idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
) -> JSONResponse:
    """Start a background run. The same Idempotency-Key on the thread within 24 hours returns
    the same run (422 `idempotency_key_reused` if the body differs)."""
    messages = body.messages()
    check_input_size(messages, context.settings, "input")
    run = await hosted.create_run(account, thread_id, messages, idempotency_key)
    return JSONResponse(RunOut.of(run), status_code=202)


@router.get("/runs/{run_id}")
async def get_run(
    run_id: str,
    account: Account,
    hosted: Hosted,
    wait: Annotated[
        float,
        Query(
            description="Seconds (at most 30) to wait while the run is queued or running: the "
            "answer comes as soon as it needs your tool outputs or has ended."
        ),
    ] = 0,
) -> dict[str, Any]:
    if wait:
        return RunOut.of(await hosted.wait_while_working(account, run_id, wait))
    return RunOut.of(await hosted.run(account, run_id))


@router.post("/runs/{run_id}/tool_outputs")
async def submit_tool_outputs(
    run_id: str, body: ToolOutputsIn, account: Account, hosted: Hosted
) -> dict[str, Any]:
    """Answer every pending tool call of a run in `requires_action`, in one request."""
    outputs = [item.model_dump() for item in body.outputs]
    return RunOut.of(await hosted.submit_tool_outputs(account, run_id, outputs))


@router.post("/runs/{run_id}/cancel")
async def cancel_run(run_id: str, account: Account, hosted: Hosted) -> dict[str, Any]:
    """Cancel an active run; a run that already ended is returned unchanged."""
    return RunOut.of(await hosted.cancel_run(account, run_id))
