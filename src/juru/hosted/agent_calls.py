"""A hosted agent called as a tool (Juru's MCP server, `/mcp`): which agents can be called
that way, and one call run to its end with progress as its steps finish."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
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


def tool_name(agent_name: str) -> str:
    """Letters, digits, `_` and `-` (what MCP clients accept), at most 64 characters."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", agent_name).strip("_") or "agent"
    return name[:TOOL_NAME_LENGTH]


class AgentCalls:
    def __init__(self, hosted: HostedService) -> None:
        self.hosted = hosted

    async def tools(self, account_id: str) -> list[AgentTool]:
        """The account's agents without client tools (a caller over MCP cannot answer them),
        oldest first; two agents whose names make the same tool name are told apart by the
        end of their ids."""
        agents: list[AgentRecord] = []
        page = PageRequest(limit=100, descending=False)
        while True:
            found = await self.hosted.agents(account_id, page)
            agents.extend(agent for agent in found.items if not agent.tools)
            if not found.has_more or not found.items:
                break
            page = PageRequest(limit=100, after=found.items[-1].id, descending=False)
        tools: list[AgentTool] = []
        taken: set[str] = set()
        for agent in agents:
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
    ) -> RunRecord:
        """Run the agent on `text`, in `thread_id` (one of its threads) or a new thread, to
        the end; `progress` hears of every finished step. A caller that goes away cancels the
        run."""
        if not text.strip():
            raise InvalidRequestError("input must not be empty", "invalid_request")
        if thread_id is None:
            thread_id = (await self.hosted.create_thread(account_id, tool.agent.id, "mcp", None)).id
        elif (await self.hosted.thread(account_id, thread_id)).agent_id != tool.agent.id:
            raise InvalidRequestError(f"thread {thread_id} belongs to another agent")
        run = await self.hosted.create_run(
            account_id, thread_id, [{"role": "user", "content": text}], None
        )
        try:
            await self._follow(account_id, run, progress)
        finally:
            # Shielded: a caller that went away is cancelled, and its run must be too.
            run = await asyncio.shield(self._ended(account_id, run.id))
        return run

    async def _ended(self, account_id: str, run_id: str) -> RunRecord:
        run = await self.hosted.run(account_id, run_id)
        if RunStatus(run.status).is_terminal:
            return run
        return await self.hosted.cancel_run(account_id, run_id)

    async def _follow(self, account_id: str, run: RunRecord, progress: Progress) -> None:
        events = await self.hosted.run_events(account_id, run.id)
        if events is None:
            return
        async for item in events:
            if not isinstance(item, RunEventRecord):
                continue
            if item.type == RunEventType.STEP_COMPLETED:
                await progress(int(item.data["step_count"]), run.max_steps, "a step finished")
            elif item.type == RunEventType.STATUS and item.data["status"] == "requires_action":
                return  # a client tool: nobody here can answer it (the run is cancelled)
