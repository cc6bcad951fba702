"""Agents calling agents: what a call of another agent starts (a child run on a thread of its
own) and what its end tells the calling model (the tool result)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from juru.core.ids import new_id
from juru.core.states import RunStatus
from juru.engine.machine import RunMachine
from juru.store import hosted as hosted_store
from juru.store.records import AgentRecord, RunRecord
from juru.store.run_tree import children_of


def child_result(child: RunRecord) -> str:
    """The tool result of a call whose child run ended: its answer, or an error the model can
    react to."""
    if child.status == RunStatus.SUCCEEDED:
        return child.output or ""
    if child.status == RunStatus.FAILED:
        return f"Error: the agent's run {child.id} failed: {child.error}"
    if child.status == RunStatus.EXPIRED:
        return f"Error: the agent's run {child.id} expired waiting for tool outputs."
    return f"Error: the agent's run {child.id} was cancelled."


def child_values(
    machine: RunMachine, parent: RunRecord, call: dict[str, str], callee: AgentRecord
) -> dict[str, Any]:
    """The thread and the queued run of one call (the run keyed by the call's id)."""
    now = machine.clock.now()
    thread_id = new_id("thr")
    thread = {
        "id": thread_id,
        "account_id": parent.account_id,
        "agent_id": callee.id,
        "title": f"{call['name']} for run {parent.id}",
        "metadata": {"parent_run_id": parent.id, "tool_call_id": call["id"]},
        "created_at": now,
    }
    run = {
        "id": new_id("run"),
        "account_id": parent.account_id,
        "thread_id": thread_id,
        "agent_id": callee.id,
        "status": RunStatus.QUEUED.value,
        "step_count": 0,
        "max_steps": callee.max_steps,
        "cost_rupiah": 0,
        "input": [{"role": "user", "content": call["input"]}],
        "pause_count": 0,
        "attempts": 0,
        "idempotency_key": call["id"],
        **machine.new_run_values(),
    }
    return {"thread": thread, "run": run}


class AgentCallPlan:
    """What a run's calls of other agents need now: the results known already, the child runs
    to start, and whether any child is still working."""

    def __init__(self) -> None:
        self.outputs: dict[str, str] = {}
        self.to_start: list[dict[str, Any]] = []
        self.working = False

    @property
    def complete(self) -> bool:
        return not self.to_start and not self.working


async def plan_agent_calls(
    machine: RunMachine,
    run: RunRecord,
    calls: Sequence[dict[str, str]],
    depth: int,
    max_depth: int,
) -> AgentCallPlan:
    """Match each call with its child run (keyed by the call's id): ended children give their
    results; calls past `max_depth`, or of an agent that is gone, get an error result; the
    others need a child run started."""
    plan = AgentCallPlan()
    children = {child.idempotency_key: child for child in await children_of(machine.engine, run.id)}
    for call in calls:
        child = children.get(call["id"])
        if child is not None:
            if RunStatus(child.status).is_terminal:
                plan.outputs[call["id"]] = child_result(child)
            else:
                plan.working = True
            continue
        if depth + 1 > max_depth:
            plan.outputs[call["id"]] = (
                f"Error: agents may call other agents at most {max_depth} deep; "
                f"{call['name']} was not called."
            )
            continue
        callee = await hosted_store.get_agent(machine.engine, run.account_id, call["agent_id"])
        if callee is None:
            plan.outputs[call["id"]] = f"Error: the agent behind {call['name']} no longer exists."
            continue
        plan.to_start.append(child_values(machine, run, call, callee))
    return plan
