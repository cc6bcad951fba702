"""The runner: the one place that drives LangGraph graphs.

Every face of Juru (playground, hosted runs, the Agent Runtime contract) sends messages,
resumes interrupts and reads pending reviews through these functions. A turn streams the graph
with `stream_mode="updates"` and `subgraphs=True`, so steps of subagents (graphs called from
inside a tool) arrive too, with their depth. `TurnStream.with_text()` also asks for the
`"messages"` mode, so the text models write arrives as `TextDelta`s while they write it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel
from langgraph.types import Command, Durability, StreamMode

from juru.review import InvalidReviewError, is_review_request, validate_review

DEFAULT_MAX_STEPS = 25
# The key under which a stream update carries the interrupts the graph paused on.
INTERRUPT = "__interrupt__"

__all__ = [
    "DEFAULT_MAX_STEPS",
    "Event",
    "InvalidReviewError",
    "NothingToResumeError",
    "RunOptions",
    "Step",
    "TextDelta",
    "ThreadAwaitingReviewError",
    "ThreadState",
    "Turn",
    "TurnError",
    "TurnStream",
    "pending_review_of",
    "resume",
    "send_message",
    "stream_continuation",
    "stream_message",
    "stream_resume",
    "submit_review",
    "thread_messages",
    "thread_state",
]


class ThreadAwaitingReviewError(RuntimeError):
    """A new message was sent to a thread that is waiting for a decision."""


class NothingToResumeError(RuntimeError):
    """Resume was asked of a thread that is not waiting."""


@dataclass(frozen=True)
class Event:
    """What a step did, in the playground's terms: a tool call, a tool result or model text."""

    type: str
    name: str | None = None
    args: dict[str, Any] | None = None
    content: str | None = None
    failed: bool = False


def events_of(message: BaseMessage) -> list[Event]:
    """The events one message stands for (user and system messages stand for none)."""
    if isinstance(message, AIMessage):
        events = [Event("text", content=message.text)] if message.text else []
        events.extend(
            Event("tool_call", name=call["name"], args=dict(call["args"]))
            for call in message.tool_calls
        )
        return events
    if isinstance(message, ToolMessage):
        return [
            Event(
                "tool_result",
                name=message.name,
                content=message.text,
                failed=message.status == "error",
            )
        ]
    return []


@dataclass(frozen=True)
class Step:
    """One node that finished: its name, the messages it produced, and its depth."""

    node: str
    messages: tuple[BaseMessage, ...]
    depth: int

    @property
    def events(self) -> list[Event]:
        return [event for message in self.messages for event in events_of(message)]


@dataclass(frozen=True)
class TextDelta:
    """A piece of text a model is writing, streamed before its step finishes (or a whole
    message's text when the model does not stream)."""

    text: str
    depth: int


@dataclass(frozen=True)
class TurnError:
    """What stopped the agent: the exception's class name and message."""

    type: str
    message: str
    cause: BaseException | None = field(default=None, compare=False, repr=False)


@dataclass
class Turn:
    """The outcome of one message or resume."""

    thread_id: str
    steps: list[Step] = field(default_factory=list)
    pending_review: Any | None = None
    error: TurnError | None = None
    seconds: float = 0.0

    @property
    def answer(self) -> str | None:
        """The agent's final text, or None while it waits for a decision or after a failure."""
        if self.pending_review is not None or self.error is not None:
            return None
        top_level = [m for step in self.steps if step.depth == 0 for m in step.messages]
        if not top_level:
            return None
        last = top_level[-1]
        if isinstance(last, AIMessage) and not last.tool_calls:
            return last.text
        return None


def _config(thread_id: str, max_steps: int, options: RunOptions | None = None) -> RunnableConfig:
    options = options or RunOptions()
    return {
        "configurable": {**options.configurable, "thread_id": thread_id},
        "metadata": dict(options.metadata),
        "recursion_limit": max_steps,
    }


@dataclass(frozen=True)
class RunOptions:
    """Extra config for a turn: `configurable` values for the graph's nodes, checkpoint metadata,
    whether a new message may replace a pause left over from an ended run, and whether the
    caller has checked the thread's state already.
    """

    configurable: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    replace_pending: bool = False
    # The caller read the thread's state just before (`thread_state`) and decided from it.
    state_checked: bool = False
    # When LangGraph saves checkpoints: after every step ("async", the default), or only when
    # the turn pauses or ends ("exit": a crash then redoes the turn's steps since the last one).
    durability: Durability = "async"


def messages_in_update(update: Any) -> tuple[BaseMessage, ...]:
    """The messages a node's state update adds (tolerating any update shape)."""
    if not isinstance(update, dict):
        return ()
    raw = update.get("messages")
    if raw is None:
        return ()
    # Like LangGraph's `add_messages`, only a list is a list: a tuple is one message-like,
    # such as ("ai", "Hello").
    items = raw if isinstance(raw, list) else [raw]
    try:
        messages = convert_to_messages(items)
    except (ValueError, TypeError, NotImplementedError):
        return ()
    return tuple(m for m in messages if not isinstance(m, RemoveMessage))


async def pending_review_of(agent: Pregel[Any, Any, Any, Any], thread_id: str) -> Any | None:
    """The value the thread's paused `interrupt()` offered, or None if it is not waiting."""
    state = await agent.aget_state(_config(thread_id, DEFAULT_MAX_STEPS))
    for interrupt in state.interrupts:
        return interrupt.value
    return None


@dataclass(frozen=True)
class ThreadState:
    """Where a thread's latest checkpoint stands."""

    values: dict[str, Any]
    interrupts: tuple[Any, ...]
    next_nodes: tuple[str, ...]
    metadata: dict[str, Any]

    @property
    def messages(self) -> list[BaseMessage]:
        return list(self.values.get("messages", []))


async def thread_state(agent: Pregel[Any, Any, Any, Any], thread_id: str) -> ThreadState:
    """The thread's state values, pending interrupt values, next nodes and checkpoint metadata."""
    state = await agent.aget_state(_config(thread_id, DEFAULT_MAX_STEPS))
    return ThreadState(
        values=state.values if isinstance(state.values, dict) else {},
        interrupts=tuple(interrupt.value for interrupt in state.interrupts),
        next_nodes=tuple(state.next),
        metadata=dict(state.metadata or {}),
    )


async def thread_messages(agent: Pregel[Any, Any, Any, Any], thread_id: str) -> list[BaseMessage]:
    """The messages of the thread's conversation as its latest checkpoint holds them."""
    state = await agent.aget_state(_config(thread_id, DEFAULT_MAX_STEPS))
    values = state.values if isinstance(state.values, dict) else {}
    return list(values.get("messages", []))


class TurnStream:
    """An async iterator of a turn's steps; `turn` holds the whole outcome once it ends."""

    def __init__(
        self,
        agent: Pregel[Any, Any, Any, Any],
        graph_input: Any,
        thread_id: str,
        max_steps: int,
        resume_value: Any = None,
        options: RunOptions | None = None,
    ) -> None:
        self.agent = agent
        self.graph_input = graph_input
        self.thread_id = thread_id
        self.max_steps = max_steps
        self.resume_value = resume_value
        self.options = options or RunOptions()
        self.turn = Turn(thread_id=thread_id)
        self._checked = False

    async def check_preconditions(self) -> None:
        """Raise what starting the turn would raise about the thread's state (a message to a
        thread waiting for a review, a resume of one that is not waiting, an invalid review),
        before anything runs; the stream then does not check again."""
        if self._checked:
            return
        self._checked = True
        if self.graph_input is None or self.options.state_checked:
            return
        pending = await pending_review_of(self.agent, self.thread_id)
        if not isinstance(self.graph_input, Command):
            if pending is not None and not self.options.replace_pending:
                raise ThreadAwaitingReviewError(
                    f"thread {self.thread_id} is waiting for a review decision; resume it first"
                )
            return
        if pending is None:
            raise NothingToResumeError(f"thread {self.thread_id} is not waiting for anything")
        if is_review_request(pending):
            validate_review(pending, self.resume_value)

    async def __aiter__(self) -> AsyncIterator[Step]:
        async for item in self._stream(["updates"]):
            if isinstance(item, Step):
                yield item

    def with_text(self) -> AsyncIterator[Step | TextDelta]:
        """The steps, and before each model step the text deltas of its model call.

        Models stream their tokens when a graph is streamed this way (if they can); a model
        that cannot gives its whole text as one delta when its call ends.
        """
        return self._stream(["updates", "messages"])

    async def _stream(self, modes: list[StreamMode]) -> AsyncIterator[Step | TextDelta]:
        await self.check_preconditions()
        started = time.perf_counter()
        config = _config(self.thread_id, self.max_steps, self.options)
        # The graph reports its pause in the stream (`__interrupt__`): no state read after it.
        interrupted: tuple[Any, ...] = ()
        try:
            async for namespace, mode, data in self.agent.astream(
                self.graph_input,
                config,
                stream_mode=modes,
                subgraphs=True,
                durability=self.options.durability,
            ):
                if mode == "messages":
                    message = data[0]
                    if isinstance(message, AIMessage) and message.text:
                        yield TextDelta(message.text, depth=len(namespace))
                    continue
                if not isinstance(data, dict):
                    continue
                if not interrupted and data.get(INTERRUPT):
                    interrupted = tuple(data[INTERRUPT])
                for node, value in data.items():
                    if node.startswith("__"):
                        continue
                    step = Step(node, messages_in_update(value), depth=len(namespace))
                    self.turn.steps.append(step)
                    yield step
        except Exception as error:
            self.turn.error = TurnError(type(error).__name__, str(error), error)
        if self.turn.error is None and interrupted:
            self.turn.pending_review = interrupted[0].value
        self.turn.seconds = time.perf_counter() - started

    async def run(self) -> Turn:
        """Run the turn to its end and return it."""
        async for _ in self:
            pass
        return self.turn


def stream_message(
    agent: Pregel[Any, Any, Any, Any],
    message: str | Sequence[BaseMessage] | dict[str, Any],
    thread_id: str,
    max_steps: int = DEFAULT_MAX_STEPS,
    options: RunOptions | None = None,
) -> TurnStream:
    """Send a user message (explicit messages, or a whole graph input) and stream the steps."""
    if isinstance(message, dict):
        graph_input = message
    else:
        messages = [HumanMessage(message)] if isinstance(message, str) else list(message)
        graph_input = {"messages": messages}
    return TurnStream(agent, graph_input, thread_id, max_steps, options=options)


def stream_resume(
    agent: Pregel[Any, Any, Any, Any],
    value: Any,
    thread_id: str,
    max_steps: int = DEFAULT_MAX_STEPS,
    options: RunOptions | None = None,
) -> TurnStream:
    """Resume a paused thread with `value` (checked first if the pause is a review)."""
    return TurnStream(
        agent, Command(resume=value), thread_id, max_steps, resume_value=value, options=options
    )


def stream_continuation(
    agent: Pregel[Any, Any, Any, Any],
    thread_id: str,
    max_steps: int = DEFAULT_MAX_STEPS,
    options: RunOptions | None = None,
) -> TurnStream:
    """Carry on from the thread's last checkpoint (after a crash between two steps)."""
    return TurnStream(agent, None, thread_id, max_steps, options=options)


async def send_message(
    agent: Pregel[Any, Any, Any, Any],
    message: str | Sequence[BaseMessage],
    thread_id: str,
    max_steps: int = DEFAULT_MAX_STEPS,
    options: RunOptions | None = None,
) -> Turn:
    """Send a user message and run the agent until it answers, pauses or fails."""
    return await stream_message(agent, message, thread_id, max_steps, options).run()


async def resume(
    agent: Pregel[Any, Any, Any, Any],
    value: Any,
    thread_id: str,
    max_steps: int = DEFAULT_MAX_STEPS,
    options: RunOptions | None = None,
) -> Turn:
    """Resume a paused thread with any value (the result of its `interrupt()`)."""
    return await stream_resume(agent, value, thread_id, max_steps, options).run()


async def submit_review(
    agent: Pregel[Any, Any, Any, Any],
    decisions: Sequence[Any],
    thread_id: str,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> Turn:
    """Resume a paused review with one decision per action request."""
    return await resume(agent, {"decisions": list(decisions)}, thread_id, max_steps)
