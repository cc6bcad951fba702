"""A hosted agent called as a tool (Juru's MCP server, `/mcp`): which agents can be called
that way, and one call run to its end with progress as its steps finish.

A caller over MCP cannot answer client tool calls, so an agent is offered only when no run of
it can wait for one: it has no client tools, nor has any agent it reaches through
`agent_tools`. A call whose run pauses for client tools all the same (an agent it calls was
given client tools after the list) is cancelled and answered with the reason."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from juru.core.errors import InvalidRequestError, NotFoundError
from juru.core.run_events import RunEventType
from juru.core.states import RunStatus
from juru.hosted.service import HostedService
from juru.store.pages import PageRequest
from juru.store.records import AgentRecord, RunRecord
from juru.store.run_log import RunEventRecord

TOOL_NAME_LENGTH = 64
DESCRIPTION_PROMPT_CHARACTERS = 400
Progress = Callable[[int, int, str], Awaitable[None]]  # steps done, step limit, what happens


@dataclass(frozen=True)
class AgentTool:
    """An agent as a tool: `name` is the agent's name made a tool name (unique per account)."""

    name: str
    agent: AgentRecord

    @property
    def description(self) -> str:
        prompt = " ".join(self.agent.system_prompt.split())
        if len(prompt) > DESCRIPTION_PROMPT_CHARACTERS:
            prompt = prompt[: DESCRIPTION_PROMPT_CHARACTERS - 1] + "…"
        about = f"The Juru agent {self.agent.name!r} ({self.agent.model_id})."
        return f"{about} Its instructions: {prompt}" if prompt else about


@dataclass(frozen=True)
class AgentCall:
    """A call's run, at its end; `stopped` says why Juru ended it (None: it ended alone)."""

    run: RunRecord
    stopped: str | None = None


def callable_agents(agents: Sequence[AgentRecord]) -> list[AgentRecord]:
    """The agents among `agents` (one account's) whose runs never pause for a client tool: no
    client tools of their own, and none in any agent they reach through `agent_tools`, however
    deep. An agent tool naming an agent that is not among them (gone) is an error result when
    called, not a pause; a cycle (refused when saved) adds nothing."""
    by_id = {agent.id: agent for agent in agents}
    verdicts: dict[str, bool] = {}

    def runs_alone(agent_id: str, path: frozenset[str]) -> bool:
        if agent_id in verdicts:
            return verdicts[agent_id]
        agent = by_id.get(agent_id)
        if agent is None or agent_id in path:
            return True
        inner = path | {agent_id}
        verdict = not agent.tools and all(
            runs_alone(tool["agent_id"], inner) for tool in agent.agent_tools or []
        )
        verdicts[agent_id] = verdict
        return verdict

    return [agent for agent in agents if runs_alone(agent.id, frozenset())]


def client_tools_reason(run: RunRecord) -> str:
    names = sorted({call["name"] for call in run.pending_tool_calls or []})
    tools = f" ({', '.join(names)})" if names else ""
    return (
        f"the run paused for client tools{tools} that only the agent's own program can run, "
        "so it was cancelled"
    )


def tool_name(agent_name: str) -> str:
    """Letters, digits, `_` and `-` (what MCP clients accept), at most 64 characters."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", agent_name).strip("_") or "agent"
    return name[:TOOL_NAME_LENGTH]


class AgentCalls:
    def __init__(self, hosted: HostedService) -> None:
        self.hosted = hosted

    async def tools(self, account_id: str) -> list[AgentTool]:
        """The account's agents that never wait for client tools (`callable_agents`: a caller
        over MCP cannot answer them), oldest first; two agents whose names make the same tool
        name are told apart by the end of their ids."""
        agents: list[AgentRecord] = []
        page = PageRequest(limit=100, descending=False)
        while True:
            found = await self.hosted.agents(account_id, page)
            agents.extend(found.items)
            if not found.has_more or not found.items:
                break
            page = PageRequest(limit=100, after=found.items[-1].id, descending=False)
        tools: list[AgentTool] = []
        taken: set[str] = set()
        for agent in callable_agents(agents):
            name = tool_name(agent.name)
            if name in taken:
                suffix = "_" + agent.id[-6:]
                name = name[: TOOL_NAME_LENGTH - len(suffix)] + suffix
            taken.add(name)
            tools.append(AgentTool(name, agent))
        return tools

    async def tool(self, account_id: str, name: str) -> AgentTool:
        for tool in await self.tools(account_id):
            if tool.name == name:
                return tool
        raise NotFoundError(f"no agent tool named {name!r} for this key", "unknown_tool")

    async def call(
        self,
        account_id: str,
        tool: AgentTool,
        text: str,
        thread_id: str | None,
        progress: Progress,
    ) -> AgentCall:
        """Run the agent on `text`, in `thread_id` (one of its threads) or a new thread, to
        the end; `progress` hears of every finished step of the run itself. A caller that goes
        away cancels the run, and so does a pause for client tools (nobody here can answer
        them)."""
        if not text.strip():
            raise InvalidRequestError("input must not be empty", "invalid_request")
        if thread_id is None:
            thread_id = (await self.hosted.create_thread(account_id, tool.agent.id, "mcp", None)).id
        elif (await self.hosted.thread(account_id, thread_id)).agent_id != tool.agent.id:
            raise InvalidRequestError(f"thread {thread_id} belongs to another agent")
        run = await self.hosted.create_run(
            account_id, thread_id, [{"role": "user", "content": text}], None
        )
        stopped: list[str] = []
        try:
            await self._follow(account_id, run, progress)
        finally:
            # Shielded: a caller that went away is cancelled, and its run must be too.
            run = await asyncio.shield(self._ended(account_id, run.id, stopped))
        return AgentCall(run, stopped[0] if stopped else None)

    async def _ended(self, account_id: str, run_id: str, stopped: list[str]) -> RunRecord:
        run = await self.hosted.run(account_id, run_id)
        if RunStatus(run.status).is_terminal:
            return run
        if run.status == RunStatus.REQUIRES_ACTION:
            stopped.append(client_tools_reason(run))
        return await self.hosted.cancel_run(account_id, run_id)

    async def _follow(self, account_id: str, run: RunRecord, progress: Progress) -> None:
        events = await self.hosted.run_events(account_id, run.id)
        if events is None:
            return
        async for item in events:
            if not isinstance(item, RunEventRecord):
                continue
            if item.type == RunEventType.STEP_COMPLETED and "depth" not in item.data:
                # (A child run's steps, copied into this log with their depth, are its own.)
                await progress(int(item.data["step_count"]), run.max_steps, "a step finished")
            elif item.type == RunEventType.STATUS and item.data["status"] == "requires_action":
                return  # a client tool: nobody here can answer it (the run is cancelled)
