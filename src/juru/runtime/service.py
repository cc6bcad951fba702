"""What the class methods do: turns of the served agent through the runner, and sessions.

A session is a Juru thread (checkpoint thread `runtime:<session id>`) owned by a user; `query`
and `stream_query` without a session run on a temporary thread deleted after the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from datetime import datetime
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from juru import runner
from juru.core.ids import new_id
from juru.core.text import public_message
from juru.runtime import adk
from juru.runtime.agents import RuntimeAgents, ServedAgent
from juru.runtime.errors import (
    AgentFailedError,
    ReviewNotPendingError,
    RuntimeInputError,
    SessionNotFoundError,
    SessionTakenError,
)
from juru.runtime.inputs import (
    AdkQueryInput,
    CreateSessionInput,
    QueryInput,
    SessionInput,
    UserInput,
)
from juru.store import runtime_sessions as store
from juru.store.database import Database
from juru.store.pruning import prune_checkpoints
from juru.store.runtime_sessions import RuntimeSessionRecord

THREAD_PREFIX = "runtime:"


def session_thread(session_id: str) -> str:
    """Runtime sessions keep their state apart from every other face's threads."""
    return f"{THREAD_PREFIX}{session_id}"


def checked_answer(turn: runner.Turn) -> str:
    """The turn's answer ("" while it waits for a review); AgentFailedError when it failed."""
    if turn.error is not None:
        failure = public_message(f"{turn.error.type}: {turn.error.message}")
        raise AgentFailedError(f"the agent failed: {failure}")
    return turn.answer or ""


@contextlib.contextmanager
def review_errors(session_id: str | None) -> Iterator[None]:
    """Decisions that do not answer the pending review are 400; no review pending is 409."""
    try:
        yield
    except runner.InvalidReviewError as error:
        raise RuntimeInputError(f"input.decisions: {error}") from None
    except runner.NothingToResumeError:
        raise ReviewNotPendingError(
            f"session {session_id} is not waiting for a review decision"
        ) from None


class RuntimeService:
    """The operations behind the class methods (each method calls one of these)."""

    def __init__(
        self,
        agents: RuntimeAgents,
        engine: Database,
        checkpointer: BaseCheckpointSaver[Any],
        clock: Callable[[], datetime],
    ) -> None:
        self.agents = agents
        self.engine = engine
        self.checkpointer = checkpointer
        self.clock = clock
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    @property
    def app_name(self) -> str:
        return self.agents.name

    def _lock(self, session_id: str) -> asyncio.Lock:
        # One turn at a time per session in this process; idle locks go with their users.
        lock = self._locks.get(session_id)
        if lock is None:
            lock = self._locks[session_id] = asyncio.Lock()
        return lock

    # Sessions

    async def _session(self, user_id: str, session_id: str) -> RuntimeSessionRecord:
        record = await store.get_session(self.engine, self.app_name, user_id, session_id)
        if record is None:
            raise SessionNotFoundError(f"session {session_id} not found for user {user_id}")
        return record

    async def _create(
        self, user_id: str, session_id: str | None, state: dict[str, Any] | None
    ) -> RuntimeSessionRecord:
        now = self.clock()
        record = RuntimeSessionRecord(
            id=session_id or new_id("ses"),
            app_name=self.app_name,
            user_id=user_id,
            state=state or {},
            created_at=now,
            updated_at=now,
        )
        if not await store.insert_session(self.engine, dataclasses.asdict(record)):
            raise SessionTakenError(f"session id {record.id} is already taken")
        return record

    async def create_session(self, data: CreateSessionInput) -> dict[str, Any]:
        record = await self._create(data.user_id, data.session_id, data.state)
        return adk.session_dict(record)

    async def get_session(self, data: SessionInput) -> dict[str, Any]:
        """The session with its events, rebuilt from its thread's messages."""
        record = await self._session(data.user_id, data.session_id)
        agent = await self.agents.served()
        messages = await runner.thread_messages(agent.graph, session_thread(record.id))
        return adk.session_dict(record, adk.events_of(messages, agent.author))

    async def list_sessions(self, data: UserInput) -> dict[str, Any]:
        """The user's sessions, oldest first, without their events (like ADK's list)."""
        records = await store.list_sessions(self.engine, self.app_name, data.user_id)
        return {"sessions": [adk.session_dict(record) for record in records]}

    async def delete_session(self, data: SessionInput) -> None:
        async with self._lock(data.session_id):
            deleted = await store.delete_session(
                self.engine, self.app_name, data.user_id, data.session_id
            )
            if not deleted:
                raise SessionNotFoundError(
                    f"session {data.session_id} not found for user {data.user_id}"
                )
            await self.checkpointer.adelete_thread(session_thread(data.session_id))

    # Turns

    @contextlib.asynccontextmanager
    async def _turn_thread(self, user_id: str | None, session_id: str | None) -> AsyncIterator[str]:
        """The checkpoint thread of one turn: the session's (locked, pruned and touched after),
        or, without a session, a temporary thread deleted after the turn."""
        if session_id is None or user_id is None:
            thread = f"{THREAD_PREFIX}tmp-{uuid.uuid4().hex}"
            try:
                yield thread
            finally:
                await asyncio.shield(self.checkpointer.adelete_thread(thread))
            return
        await self._session(user_id, session_id)
        thread = session_thread(session_id)
        async with self._lock(session_id):
            try:
                yield thread
            finally:
                await asyncio.shield(self._settle(session_id, thread))

    async def _settle(self, session_id: str, thread: str) -> None:
        await prune_checkpoints(self.engine, thread)
        await store.touch_session(self.engine, session_id, self.clock())

    def _start(
        self, agent: ServedAgent, data: QueryInput | AdkQueryInput, thread: str
    ) -> tuple[runner.TurnStream, str, float]:
        """The turn's stream (a new message, or the resume of a pending review with the
        input's decisions), its invocation id and its start time (epoch seconds)."""
        invocation_id, timestamp = new_id("inv"), self.clock().timestamp()
        review = data.review
        if review is not None:
            stream = runner.stream_resume(
                agent.graph, review, thread, agent.max_steps, agent.options
            )
            return stream, invocation_id, timestamp
        message = adk.user_message(data.text, invocation_id, timestamp)
        graph_input = agent.graph_input([message])
        stream = runner.stream_message(
            agent.graph, graph_input, thread, agent.max_steps, agent.options
        )
        return stream, invocation_id, timestamp

    async def query(self, data: QueryInput) -> str | dict[str, Any]:
        """Run one turn and return the agent's final answer, or `{"pending_review": ...}`
        when it paused for a human decision."""
        agent = await self.agents.served()
        async with self._turn_thread(data.user_id, data.session_id) as thread:
            stream, _, _ = self._start(agent, data, thread)
            with review_errors(data.session_id):
                turn = await stream.run()
        answer = checked_answer(turn)
        if turn.pending_review is not None:
            return {"pending_review": turn.pending_review}
        return answer

    async def stream_query(self, data: QueryInput) -> AsyncGenerator[dict[str, Any], None]:
        """`{"output": chunk}` for each piece of text the agent's model writes at the top level."""
        agent = await self.agents.served()
        async with self._turn_thread(data.user_id, data.session_id) as thread:
            stream, _, _ = self._start(agent, data, thread)
            wrote = False
            with review_errors(data.session_id):
                async for item in stream.with_text():
                    if isinstance(item, runner.TextDelta) and item.depth == 0:
                        wrote = True
                        yield {"output": item.text}
            answer = checked_answer(stream.turn)
            if not wrote and answer:
                yield {"output": answer}
            if stream.turn.pending_review is not None:
                yield {"pending_review": stream.turn.pending_review}

    async def async_stream_query(self, data: AdkQueryInput) -> AsyncGenerator[dict[str, Any], None]:
        """ADK events of the turn: model text and function calls, then function responses."""
        agent = await self.agents.served()
        session_id = data.session_id
        if session_id is None:
            session_id = (await self._create(data.user_id, None, None)).id
        async with self._turn_thread(data.user_id, session_id) as thread:
            stream, invocation_id, timestamp = self._start(agent, data, thread)
            with review_errors(session_id):
                async for step in stream:
                    if step.depth != 0:
                        continue
                    for message in step.messages:
                        event = adk.event_of(message, agent.author, invocation_id, timestamp)
                        if event is not None:
                            yield event
            checked_answer(stream.turn)
            pending = stream.turn.pending_review
            if pending is not None:
                yield adk.review_event(pending, agent.author, invocation_id, timestamp)
