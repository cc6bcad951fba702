"""Tests for the runner's pure parts: events of messages, messages of updates, Turn.answer."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from juru.runner import Event, Step, Turn, TurnError, events_of, messages_in_update


def tool_call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


WEATHER_CALL = tool_call("get_weather", {"location": "Paris"}, "call_1")
EMAIL_CALL = tool_call("send_email", {"to": "ana@example.com", "subject": "Hi"}, "call_2")


# --- events_of ------------------------------------------------------------------------------------


def test_ai_text_comes_before_one_event_per_tool_call() -> None:
    message = AIMessage("Let me check.", tool_calls=[WEATHER_CALL, EMAIL_CALL])
    assert events_of(message) == [
        Event("text", content="Let me check."),
        Event("tool_call", name="get_weather", args={"location": "Paris"}),
        Event("tool_call", name="send_email", args={"to": "ana@example.com", "subject": "Hi"}),
    ]


def test_ai_tool_calls_without_text_give_no_text_event() -> None:
    assert events_of(AIMessage("", tool_calls=[WEATHER_CALL])) == [
        Event("tool_call", name="get_weather", args={"location": "Paris"})
    ]


def test_ai_text_alone() -> None:
    assert events_of(AIMessage("It is sunny.")) == [Event("text", content="It is sunny.")]


def test_an_empty_ai_message_gives_no_events() -> None:
    assert events_of(AIMessage("")) == []


def test_ai_content_as_blocks_anthropic_style() -> None:
    assert events_of(AIMessage([{"type": "text", "text": "hi"}])) == [Event("text", content="hi")]


def test_ai_blocks_with_text_and_tool_use() -> None:
    message = AIMessage(
        [
            {"type": "text", "text": "Checking "},
            {"type": "text", "text": "the weather."},
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {}},
        ],
        tool_calls=[WEATHER_CALL],
    )
    assert events_of(message) == [
        Event("text", content="Checking the weather."),
        Event("tool_call", name="get_weather", args={"location": "Paris"}),
    ]


def test_tool_call_args_are_a_copy() -> None:
    message = AIMessage("", tool_calls=[WEATHER_CALL])
    (event,) = events_of(message)
    assert event.args is not None
    event.args["location"] = "Rome"
    assert message.tool_calls[0]["args"] == {"location": "Paris"}


def test_successful_tool_result() -> None:
    message = ToolMessage("Sunny, 21 degrees.", tool_call_id="call_1", name="get_weather")
    assert events_of(message) == [
        Event("tool_result", name="get_weather", content="Sunny, 21 degrees.", failed=False)
    ]


def test_failed_tool_result() -> None:
    message = ToolMessage(
        "Error: no such city", tool_call_id="call_1", name="get_weather", status="error"
    )
    assert events_of(message) == [
        Event("tool_result", name="get_weather", content="Error: no such city", failed=True)
    ]


def test_tool_result_with_block_content() -> None:
    message = ToolMessage(
        [{"type": "text", "text": "Sunny."}], tool_call_id="call_1", name="get_weather"
    )
    assert events_of(message) == [Event("tool_result", name="get_weather", content="Sunny.")]


@pytest.mark.parametrize(
    "message",
    [HumanMessage("What is the weather?"), SystemMessage("You are helpful."), HumanMessage("")],
)
def test_user_and_system_messages_give_no_events(message: BaseMessage) -> None:
    assert events_of(message) == []


def test_step_events_flatten_its_messages_in_order() -> None:
    step = Step(
        "tools",
        (
            AIMessage("", tool_calls=[WEATHER_CALL]),
            HumanMessage("ignored"),
            ToolMessage("Sunny.", tool_call_id="call_1", name="get_weather"),
        ),
        depth=0,
    )
    assert step.events == [
        Event("tool_call", name="get_weather", args={"location": "Paris"}),
        Event("tool_result", name="get_weather", content="Sunny."),
    ]


# --- messages_in_update ---------------------------------------------------------------------------


def test_update_with_a_list_of_messages() -> None:
    first, second = AIMessage("one"), ToolMessage("two", tool_call_id="c")
    assert messages_in_update({"messages": [first, second], "other": 1}) == (first, second)


def test_update_with_a_single_message() -> None:
    message = AIMessage("only")
    assert messages_in_update({"messages": message}) == (message,)


def test_update_with_a_single_tuple_message_is_one_message() -> None:
    # LangGraph's add_messages reads ("ai", "Hi") as one AI message, not as two items.
    (message,) = messages_in_update({"messages": ("ai", "Hi")})
    assert isinstance(message, AIMessage)
    assert message.text == "Hi"


@pytest.mark.parametrize(
    "update",
    [
        None,
        "messages",
        [AIMessage("in a list, not a dict")],
        ("messages", AIMessage("x")),
        {},
        {"messages": None},
        {"other": [AIMessage("x")]},
        {"messages": []},
    ],
)
def test_updates_without_messages(update: Any) -> None:
    assert messages_in_update(update) == ()


def test_dict_shaped_messages_are_converted() -> None:
    messages = messages_in_update(
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
                ("ai", "again"),
            ]
        }
    )
    assert [type(m) for m in messages] == [HumanMessage, AIMessage, AIMessage]
    assert [m.text for m in messages] == ["hi", "hello", "again"]


def test_a_single_dict_shaped_message() -> None:
    (message,) = messages_in_update({"messages": {"role": "assistant", "content": "hey"}})
    assert isinstance(message, AIMessage)
    assert message.text == "hey"


@pytest.mark.parametrize(
    "raw",
    [
        [42],
        [{"foo": "bar"}],
        [{"role": "bogus", "content": "x"}],
        (AIMessage("a"), AIMessage("b")),
    ],
)
def test_unconvertible_messages_give_nothing(raw: Any) -> None:
    assert messages_in_update({"messages": raw}) == ()


def test_remove_messages_are_left_out() -> None:
    kept = AIMessage("kept")
    assert messages_in_update({"messages": [RemoveMessage(id="old"), kept]}) == (kept,)


# --- Turn.answer ----------------------------------------------------------------------------------


def step(*messages: BaseMessage, depth: int = 0, node: str = "agent") -> Step:
    return Step(node, messages, depth)


def test_answer_is_the_last_top_level_ai_message_without_tool_calls() -> None:
    turn = Turn(
        "t",
        steps=[
            step(AIMessage("", tool_calls=[WEATHER_CALL])),
            step(ToolMessage("Sunny.", tool_call_id="call_1"), node="tools"),
            step(AIMessage("First."), AIMessage("It is sunny in Paris.")),
        ],
    )
    assert turn.answer == "It is sunny in Paris."


def test_answer_reads_block_content() -> None:
    turn = Turn("t", steps=[step(AIMessage([{"type": "text", "text": "Sunny."}]))])
    assert turn.answer == "Sunny."


def test_answer_ignores_later_steps_without_messages_and_deeper_steps() -> None:
    turn = Turn(
        "t",
        steps=[
            step(AIMessage("Top-level answer.")),
            step(AIMessage("Subagent answer."), depth=1),
            step(node="after"),
        ],
    )
    assert turn.answer == "Top-level answer."


def test_no_answer_without_steps() -> None:
    assert Turn("t").answer is None


def test_no_answer_while_waiting_for_a_review() -> None:
    turn = Turn("t", steps=[step(AIMessage("Done."))], pending_review={"action_requests": []})
    assert turn.answer is None


def test_no_answer_after_an_error() -> None:
    turn = Turn("t", steps=[step(AIMessage("Done."))], error=TurnError("GraphRecursionError", "x"))
    assert turn.answer is None


def test_no_answer_when_the_last_message_is_a_tool_call() -> None:
    turn = Turn(
        "t", steps=[step(AIMessage("Earlier.")), step(AIMessage("", tool_calls=[WEATHER_CALL]))]
    )
    assert turn.answer is None


def test_no_answer_when_the_last_top_level_step_is_a_tool_result() -> None:
    turn = Turn(
        "t",
        steps=[
            step(AIMessage("Earlier.")),
            step(ToolMessage("Sunny.", tool_call_id="call_1"), node="tools"),
        ],
    )
    assert turn.answer is None


def test_no_answer_when_the_last_top_level_message_is_human() -> None:
    assert Turn("t", steps=[step(AIMessage("Earlier.")), step(HumanMessage("Hi"))]).answer is None


def test_a_depth_one_answer_alone_does_not_count() -> None:
    turn = Turn("t", steps=[step(AIMessage("Subagent answer."), depth=1)])
    assert turn.answer is None


def test_a_depth_one_answer_after_a_top_level_tool_call_does_not_count() -> None:
    turn = Turn(
        "t",
        steps=[
            step(AIMessage("", tool_calls=[tool_call("ask_weather_agent", {}, "c")])),
            step(AIMessage("Subagent answer."), depth=1),
        ],
    )
    assert turn.answer is None
