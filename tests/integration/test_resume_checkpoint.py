"""A paused run's checkpoint kept in memory for its resume (`HeldSaves.keep_for_resume`,
`resuming`): what is kept is what the database answers, and it answers only the read it was
kept for."""

from __future__ import annotations

import asyncio
import contextvars
import operator
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt
from sqlalchemy import Connection

from juru.store.checkpointer import (
    CheckpointSaves,
    HeldSaves,
    holding_saves,
    resuming,
    write_saves,
)
from juru.store.database import Database
from juru.store.transactions import write
from tests.support.savers import savers

__all__ = ["savers"]  # a pytest fixture: the tests ask for it by name

THREAD: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


class AskingState(MessagesState):
    topic: str
    asked: Annotated[int, operator.add]


def ask(state: AskingState) -> dict[str, Any]:
    """Asks its caller twice, then answers: each question is a pause."""
    question = AIMessage(f"question {state['asked'] + 1} on {state['topic']}")
    answer = interrupt({"question": question.text})
    return {"messages": [question, HumanMessage(str(answer))], "asked": 1}


def graph_on(saver: Any) -> Any:
    builder = StateGraph(AskingState)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_conditional_edges("ask", lambda state: "ask" if state["asked"] < 2 else END)
    return builder.compile(checkpointer=saver)


async def stored(saver: Any) -> CheckpointTuple:
    """The thread's latest checkpoint as another process reads it from the database."""
    found = await asyncio.create_task(saver.aget_tuple(THREAD), context=contextvars.Context())
    assert found is not None
    return found


async def pause(store_database: Database, graph: Any, payload: Any) -> CheckpointSaves:
    """Run the graph to its next pause with its saves held, then write them in a store
    transaction, as a run's pausing write does; the saves it wrote."""
    async with holding_saves("t") as held:
        await graph.ainvoke(payload, THREAD)
        saves = held.take()
        assert saves is not None

        def work(connection: Connection) -> None:
            write_saves(connection, saves)

        await write(store_database, work)
    return saves


@pytest.fixture
async def first_pause(
    savers: tuple[Any, Any], store_database: Database
) -> tuple[Any, Any, CheckpointSaves]:
    """The graph on the store's saver, paused once; the saves of that pause."""
    graph = graph_on(savers[0])
    saves = await pause(store_database, graph, {"messages": [], "topic": "rain", "asked": 0})
    return savers[0], graph, saves


def assert_same(kept: CheckpointTuple, found: CheckpointTuple) -> None:
    assert kept.config == found.config
    assert kept.checkpoint == found.checkpoint
    assert kept.metadata == found.metadata
    assert kept.parent_config == found.parent_config
    assert kept.pending_writes == found.pending_writes


async def test_the_checkpoint_kept_is_the_one_the_database_answers(
    savers: tuple[Any, Any], first_pause: tuple[Any, Any, CheckpointSaves], store_database: Database
) -> None:
    theirs = savers[1]
    _, graph, first = first_pause
    kept = first.latest()
    assert kept is not None
    assert_same(kept, await stored(theirs))
    assert kept.parent_config is not None and kept.pending_writes  # the pause's interrupt
    # The second pause: `topic` is not written again, its value is in an older checkpoint.
    second = await pause(store_database, graph, Command(resume="drizzle"))
    kept = second.latest()
    assert kept is not None and kept.checkpoint["channel_values"]["topic"] == "rain"
    assert_same(kept, await stored(theirs))


async def test_a_kept_checkpoint_answers_only_its_resume_and_only_once(
    savers: tuple[Any, Any], first_pause: tuple[Any, Any, CheckpointSaves]
) -> None:
    theirs = savers[1]
    ours, graph, saves = first_pause
    reads: list[Any] = []
    read_from_the_database = ours._get_tuple_now

    async def counted(config: Any) -> Any:
        reads.append(config)
        return await read_from_the_database(config)

    ours._get_tuple_now = counted
    held = HeldSaves("t", saver=ours)
    held.keep_for_resume(saves, (1, 2))
    expected = await stored(theirs)
    await ours.aget_tuple(THREAD)  # not resuming: the database
    with resuming("t", (1, 3)):  # another claim came between: the database
        await ours.aget_tuple(THREAD)
    assert len(reads) == 2
    held.keep_for_resume(saves, (1, 2))
    with resuming("u", (1, 2)):  # another thread: the database
        await ours.aget_tuple({"configurable": {"thread_id": "u", "checkpoint_ns": ""}})
    with resuming("t", (1, 2)):
        answered = await ours.aget_tuple(THREAD)
        assert len(reads) == 3
        assert answered is not None
        assert_same(answered, expected)
        await ours.aget_tuple(THREAD)  # once only
    assert len(reads) == 4
    # Resumed from memory, the graph goes on as from the database.
    with resuming("t", (1, 2)):
        held.keep_for_resume(saves, (1, 2))
        await graph.ainvoke(Command(resume="drizzle"), THREAD)
    assert len(reads) == 4
    found = await stored(theirs)
    texts = [message.text for message in found.checkpoint["channel_values"]["messages"]]
    assert texts == ["question 1 on rain", "drizzle"]
    assert found.pending_writes and found.pending_writes[0][1] == "__interrupt__"
