"""A hosted agent (model, system prompt, client and built-in tools, step limit) as a graph.

`llm_call` asks the model; calls to built-in tools run first in `builtin_tools` (at most
`MAX_BUILTIN_CALLS_PER_TURN` per model turn, within the run's built-in spending ceiling), with
the calls to the tools of the agent's MCP servers (a `ServerTools` in the run's config); calls
to other agents go next to `agent_tools`, which pauses with `interrupt({"agent_calls": [...]})`
until the engine resumes it with the child runs' results (`{"outputs": {id: text}}`); then
the rest go to `client_tools`, which pauses the run with
`interrupt({"pending_tool_calls": [...]})` until the caller's outputs arrive as the resume
value `{"outputs": {tool_call_id: output}}`. The step limit, loop detection and built-in spend
live in the graph state, so they survive a worker's crash like the conversation does.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    SystemMessage,
    ToolMessage,
    message_chunk_to_message,
)
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt

from juru.agents.tool_agent import close_dangling_calls, error_result, unanswered_calls
from juru.core.money import MICRO, to_micro
from juru.models.streams import joined, until_silent
from juru.store.outage import is_outage
from juru.tools.errors import BuiltinToolError
from juru.tools.runtime import BUILTIN_SCHEMAS, BuiltinRuntime

LLM_NODE = "llm_call"
CLIENT_TOOLS_NODE = "client_tools"
BUILTIN_TOOLS_NODE = "builtin_tools"
AGENT_TOOLS_NODE = "agent_tools"
# The key of the interrupt value that asks the engine to run child runs.
AGENT_CALLS = "agent_calls"
MAX_BUILTIN_CALLS_PER_TURN = 3
BUILTIN_RUN_CEILING_RUPIAH = Decimal(20_000)
BUILTIN_KEY = "juru_builtin_tools"
LOOP_REPEATS = 3
MAX_STEPS_KEY = "juru_max_steps"
# A `CallFunds` that pays for the graph's model calls.
FUNDS_KEY = "juru_funds"
# With it, a model call whose text someone is following streams it (`TextSink`).
TEXT_KEY = "juru_text"
# With it, message ids derive from it and the step (`<prefix>_s3`, `<prefix>_s3_<call id>`):
# a step redone after a crash writes the same ids, so nothing is recorded twice.
MESSAGE_IDS_KEY = "juru_message_ids"
# With it, the tools of the agent's MCP servers join the model's tools and run in the graph.
MCP_KEY = "juru_mcp_tools"


class StepLimitError(RuntimeError):
    """The next model call would exceed the run's `max_steps`."""


class LoopDetectedError(RuntimeError):
    """The model asked for the same tool call several times in a row; `reply` is the model's
    last answer (its call was made, so it is billed)."""

    def __init__(self, message: str, reply: AIMessage) -> None:
        super().__init__(message)
        self.reply = reply


class CallFunds(Protocol):
    """What pays for a graph's model calls: `hold` sets aside the most the call of `step` can
    cost before it is made (raising `InsufficientBalanceError` when that does not fit), and
    `settle` is told how the call ended (`reply` None: it failed or was cancelled)."""

    async def hold(
        self, history: Sequence[BaseMessage], tools: Sequence[dict[str, Any]], step: int
    ) -> str | None: ...

    async def settle(self, hold_id: str | None, reply: AIMessage | None, step: int) -> None: ...


class TextSink(Protocol):
    """Who follows the text of a graph's model calls: asked before each call whether anyone
    is listening (a call then streams), and given each piece of text of step `step`."""

    def wants_text(self) -> bool: ...

    async def text(self, step: int, piece: str) -> None: ...

    async def call_ended(self, step: int) -> None: ...


class ServerTools(Protocol):
    """Tools that the server runs for one run beyond the built-in ones (an agent's MCP
    servers): their schemas (fetched once and kept), whether a name is theirs (once fetched),
    and one call made, every failure an error result (a database outage raises)."""

    async def schemas(self) -> list[dict[str, Any]]: ...

    def owns(self, name: str) -> bool: ...

    async def call(self, call: dict[str, Any]) -> ToolMessage: ...


class HostedState(MessagesState):
    run_steps: int
    call_streak: list[str]
    # List price of the run's built-in calls so far, in micro-rupiah (exact, serialisable).
    builtin_spend_micros: int


def run_input(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """The graph input that starts a run: its messages, with the run's counters reset."""
    return {
        "messages": list(messages),
        "run_steps": 0,
        "call_streak": [],
        "builtin_spend_micros": 0,
    }


def _micros(amount: Decimal) -> int:
    return int(to_micro(amount) / MICRO)


def call_signature(tool_calls: Sequence[Any]) -> str:
    # Each call is made text before sorting: two calls to one tool would compare dicts.
    calls = sorted(
        json.dumps([call["name"], call["args"]], sort_keys=True, default=str) for call in tool_calls
    )
    return json.dumps(calls)


def step_message_id(prefix: str, step: int, call_id: str | None = None) -> str:
    """The stable id of step `step`'s reply (`<prefix>_s3`), or of its result for a call."""
    return f"{prefix}_s{step}" if call_id is None else f"{prefix}_s{step}_{call_id}"


def step_of_message(prefix: str, message_id: str | None) -> int | None:
    """The step whose model call wrote the message with this id (`<prefix>_s<step>`), if any."""
    marker = f"{prefix}_s"
    if not message_id or not message_id.startswith(marker):
        return None
    step = message_id.removeprefix(marker)
    return int(step) if step.isdigit() else None


def message_id(config: RunnableConfig, step: int | None, call_id: str | None = None) -> str:
    """The id of a message a node writes: derived from the run and step where the engine asks
    for stable ids, else random."""
    prefix = config.get("configurable", {}).get(MESSAGE_IDS_KEY)
    if prefix is None or step is None:
        return f"msg_{uuid.uuid4().hex}"
    return step_message_id(prefix, step, call_id)


def pending_call(call: dict[str, Any]) -> dict[str, str]:
    """A tool call as the API shows it: arguments as a JSON string."""
    return {"id": call["id"], "name": call["name"], "arguments": json.dumps(call["args"])}


def agent_tool_schema(tool: dict[str, Any]) -> dict[str, Any]:
    """How the model sees another agent it may call: a function of one string, `input`."""
    description = tool.get("description") or f"Ask the agent {tool['name']} to do something."
    return {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    "input": {"type": "string", "description": "What to ask the agent."}
                },
                "required": ["input"],
            },
        },
    }


def bound_tool_schemas(
    tools: Sequence[dict[str, Any]],
    builtin_tools: Sequence[str],
    agent_tools: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    """The tools a hosted agent's model is given: its client tools, the agents it may call,
    then its built-in tools."""
    builtins = sorted(name for name in set(builtin_tools) if name in BUILTIN_SCHEMAS)
    agents = [agent_tool_schema(tool) for tool in agent_tools]
    return [*tools, *agents, *(BUILTIN_SCHEMAS[name] for name in builtins)]


def agent_call(call: dict[str, Any], agent_id: str) -> dict[str, str] | None:
    """A call of another agent as the engine runs it, or None if its arguments are not
    `{"input": "<text>"}`."""
    text = call["args"].get("input") if isinstance(call["args"], dict) else None
    if not isinstance(text, str) or not text.strip():
        return None
    return {"id": call["id"], "name": call["name"], "agent_id": agent_id, "input": text}


def first_prompt(system_prompt: str, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """What the model is sent for a run's first step on a new thread."""
    return [SystemMessage(system_prompt), *messages] if system_prompt else list(messages)


class HostedAgent:
    """The nodes of one hosted agent."""

    def __init__(
        self,
        model: BaseChatModel,
        tools: Sequence[dict[str, Any]],
        system_prompt: str,
        builtin_tools: Sequence[str] = (),
        agent_tools: Sequence[dict[str, Any]] = (),
    ) -> None:
        self.client_tools = {tool["function"]["name"] for tool in tools}
        self.builtin_tools = {name for name in builtin_tools if name in BUILTIN_SCHEMAS}
        self.agent_tools = {tool["name"]: str(tool["agent_id"]) for tool in agent_tools}
        # The model sees every kind alike; only the graph knows which ones the server runs.
        bound = bound_tool_schemas(tools, builtin_tools, agent_tools)
        self.tool_schemas = bound
        self.base_model = model
        self.model = model.bind_tools(bound) if bound else model
        self.system_prompt = system_prompt

    async def llm_call(self, state: HostedState, config: RunnableConfig) -> dict[str, Any]:
        configurable = config.get("configurable", {})
        max_steps = int(configurable.get(MAX_STEPS_KEY, 20))
        steps = state.get("run_steps", 0)
        if steps >= max_steps:
            raise StepLimitError(f"the run reached its limit of {max_steps} model calls")
        prompt = first_prompt(self.system_prompt, close_dangling_calls(state["messages"]))
        funds, sink = configurable.get(FUNDS_KEY), configurable.get(TEXT_KEY)
        server_tools: ServerTools | None = configurable.get(MCP_KEY)
        extra = [] if server_tools is None else await server_tools.schemas()
        schemas = [*self.tool_schemas, *extra]
        model = self.base_model.bind_tools(schemas) if extra else self.model
        reply = await self._paid_call(model, schemas, prompt, funds, sink, steps + 1)
        if reply.id is None or MESSAGE_IDS_KEY in configurable:
            reply.id = message_id(config, steps + 1)
        streak = [*state.get("call_streak", []), call_signature(reply.tool_calls)]
        if not reply.tool_calls:
            streak = []
        streak = streak[-LOOP_REPEATS:]
        if len(streak) == LOOP_REPEATS and len(set(streak)) == 1:
            raise LoopDetectedError(
                f"the model requested the same tool call {LOOP_REPEATS} times in a row", reply
            )
        return {"messages": [reply], "run_steps": steps + 1, "call_streak": streak}

    async def _paid_call(
        self,
        model: Any,
        schemas: list[dict[str, Any]],
        prompt: list[BaseMessage],
        funds: CallFunds | None,
        sink: TextSink | None,
        step: int,
    ) -> AIMessage:
        """The model call, with its hold taken before it and settled after it."""
        hold_id = None if funds is None else await funds.hold(prompt, schemas, step)
        try:
            if sink is not None and sink.wants_text():
                reply = await self._streamed_call(model, prompt, sink, step)
            else:
                reply = await model.ainvoke(prompt)
        except BaseException:
            if funds is not None:
                await asyncio.shield(funds.settle(hold_id, None, step))
            raise
        assert isinstance(reply, AIMessage)
        if funds is not None:
            await funds.settle(hold_id, reply, step)
        return reply

    async def _streamed_call(
        self, model: Any, prompt: list[BaseMessage], sink: TextSink, step: int
    ) -> AIMessage:
        """The call streamed: each piece of text to the sink as it arrives, the pieces joined
        into the one reply (tool calls and usage included) at the end."""
        chunks: list[AIMessageChunk] = []
        try:
            async for chunk in until_silent(model.astream(prompt)):
                assert isinstance(chunk, AIMessageChunk)
                chunks.append(chunk)
                if chunk.text:
                    await sink.text(step, chunk.text)
        finally:
            await sink.call_ended(step)
        whole = joined(chunks)
        reply = message_chunk_to_message(whole) if whole is not None else AIMessage("")
        assert isinstance(reply, AIMessage)
        return reply

    def server_runs(self, name: str, config: RunnableConfig) -> bool:
        """Whether the server runs calls of tool `name` (built-in, or of an MCP server)."""
        server_tools: ServerTools | None = config.get("configurable", {}).get(MCP_KEY)
        return name in self.builtin_tools or (server_tools is not None and server_tools.owns(name))

    # Nodes and routes are coroutines: LangGraph runs a plain function in a thread of the
    # executor (a hop there and back at every step).
    async def after_llm(self, state: HostedState, config: RunnableConfig) -> str:
        calls = unanswered_calls(state["messages"])
        if any(self.server_runs(call["name"], config) for call in calls):
            return BUILTIN_TOOLS_NODE
        return self._after_server_calls(calls) if calls else END

    async def after_builtins(self, state: HostedState) -> str:
        calls = unanswered_calls(state["messages"])
        return self._after_server_calls(calls) if calls else LLM_NODE

    def _after_server_calls(self, calls: Sequence[dict[str, Any]]) -> str:
        """Where unanswered calls go once the server's own have run: other agents first."""
        if any(call["name"] in self.agent_tools for call in calls):
            return AGENT_TOOLS_NODE
        return CLIENT_TOOLS_NODE

    async def after_agents(self, state: HostedState) -> str:
        return CLIENT_TOOLS_NODE if unanswered_calls(state["messages"]) else LLM_NODE

    async def agent_tools_node(self, state: HostedState, config: RunnableConfig) -> dict[str, Any]:
        """Hand the turn's calls of other agents to the engine, which runs each as a child run
        and resumes this node with their results (an error result when one could not run)."""
        calls = [c for c in unanswered_calls(state["messages"]) if c["name"] in self.agent_tools]
        asked = [agent_call(call, self.agent_tools[call["name"]]) for call in calls]
        results = [
            error_result(call, 'Error: call this agent with {"input": "<what to ask it>"}.')
            for call, ask in zip(calls, asked, strict=True)
            if ask is None
        ]
        runnable = [ask for ask in asked if ask is not None]
        if runnable:
            answer = interrupt({AGENT_CALLS: runnable})
            outputs: dict[str, str] = answer["outputs"]
            results.extend(
                ToolMessage(outputs[ask["id"]], tool_call_id=ask["id"], name=ask["name"])
                for ask in runnable
            )
        for result in results:
            result.id = message_id(config, state.get("run_steps"), result.tool_call_id)
        return {"messages": results}

    async def builtin_tools_node(
        self, state: HostedState, config: RunnableConfig
    ) -> dict[str, Any]:
        """Run the turn's built-in and MCP calls in order; every refusal or failure is an error
        result for the model, never an exception (the run goes on)."""
        configurable = config.get("configurable", {})
        runtime: BuiltinRuntime | None = configurable.get(BUILTIN_KEY)
        server_tools: ServerTools | None = configurable.get(MCP_KEY)
        if server_tools is not None:
            await server_tools.schemas()  # kept: only a run resumed here lists them now
        calls = [
            c for c in unanswered_calls(state["messages"]) if self.server_runs(c["name"], config)
        ]
        spent = state.get("builtin_spend_micros", 0)
        results: list[ToolMessage] = []
        for index, call in enumerate(calls):
            if index >= MAX_BUILTIN_CALLS_PER_TURN:
                results.append(
                    error_result(
                        call,
                        f"Error: at most {MAX_BUILTIN_CALLS_PER_TURN} built-in tool calls run "
                        "per model turn (MCP tool calls count too); this one was not run. Call "
                        "it again in a later turn.",
                    )
                )
                continue
            if call["name"] not in self.builtin_tools and server_tools is not None:
                results.append(await server_tools.call(call))
                continue
            if runtime is None:
                results.append(error_result(call, "Error: built-in tools are not available here."))
                continue
            result, cost = await self._run_builtin(runtime, call, spent, state.get("run_steps"))
            results.append(result)
            spent += cost
        for result in results:
            result.id = message_id(config, state.get("run_steps"), result.tool_call_id)
        return {"messages": results, "builtin_spend_micros": spent}

    async def _run_builtin(
        self, runtime: BuiltinRuntime, call: dict[str, Any], spent: int, step: int | None
    ) -> tuple[ToolMessage, int]:
        """One built-in call's result and the micro-rupiah it adds to the run's spend."""
        try:
            priced = runtime.price(call["name"], call["args"])
            cost = _micros(priced.list_cost)
            ceiling = _micros(BUILTIN_RUN_CEILING_RUPIAH)
            if spent + cost > ceiling:
                raise BuiltinToolError(
                    f"this call (Rp{priced.list_cost}) would take the run's built-in tool "
                    f"charges past the ceiling of Rp{BUILTIN_RUN_CEILING_RUPIAH}; it was not run"
                )
            content = await runtime.run(priced, step)
        except BuiltinToolError as error:
            return error_result(call, f"Error: {error}"), 0
        except Exception as error:
            if is_outage(error):
                raise  # not the tool's failure: the run stops and redoes the step later
            # A built-in that breaks must not end the run: the model hears about it instead.
            return error_result(call, f"Error: {type(error).__name__}: {error}"), 0
        return ToolMessage(content, tool_call_id=call["id"], name=call["name"]), cost

    async def client_tools_node(self, state: HostedState, config: RunnableConfig) -> dict[str, Any]:
        calls = unanswered_calls(state["messages"])
        unknown = [
            error_result(call, f"Error: this agent has no tool named {call['name']!r}.")
            for call in calls
            if call["name"] not in self.client_tools
        ]
        known = [call for call in calls if call["name"] in self.client_tools]
        results: list[ToolMessage] = [*unknown]
        if known:
            answer = interrupt({"pending_tool_calls": [pending_call(call) for call in known]})
            outputs: dict[str, str] = answer["outputs"]
            results.extend(
                ToolMessage(
                    outputs[call["id"]],
                    tool_call_id=call["id"],
                    name=call["name"],
                )
                for call in known
            )
        for result in results:
            result.id = message_id(config, state.get("run_steps"), result.tool_call_id)
        return {"messages": results}

    def compile(self) -> CompiledStateGraph[Any, Any, Any, Any]:
        graph = StateGraph(HostedState)
        graph.add_node(LLM_NODE, self.llm_call)
        graph.add_node(CLIENT_TOOLS_NODE, self.client_tools_node)
        graph.add_node(BUILTIN_TOOLS_NODE, self.builtin_tools_node)
        graph.add_node(AGENT_TOOLS_NODE, self.agent_tools_node)
        graph.add_edge(START, LLM_NODE)
        graph.add_conditional_edges(
            LLM_NODE,
            self.after_llm,
            [BUILTIN_TOOLS_NODE, AGENT_TOOLS_NODE, CLIENT_TOOLS_NODE, END],
        )
        graph.add_conditional_edges(
            BUILTIN_TOOLS_NODE, self.after_builtins, [AGENT_TOOLS_NODE, CLIENT_TOOLS_NODE, LLM_NODE]
        )
        graph.add_conditional_edges(
            AGENT_TOOLS_NODE, self.after_agents, [CLIENT_TOOLS_NODE, LLM_NODE]
        )
        graph.add_edge(CLIENT_TOOLS_NODE, LLM_NODE)
        return graph.compile(name="hosted_agent")


def build_hosted_agent(
    model: BaseChatModel,
    tools: Sequence[dict[str, Any]],
    system_prompt: str,
    builtin_tools: Sequence[str] = (),
    agent_tools: Sequence[dict[str, Any]] = (),
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile a hosted agent's graph (the engine attaches the checkpointer)."""
    return HostedAgent(model, tools, system_prompt, builtin_tools, agent_tools).compile()
