"""Tests for Juru's offline demo chat model (``juru/demo``)."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from juru.models.demo import (
    DEMO_MODEL_ID,
    DemoChatModel,
    fill_arguments,
    split_identifier,
)


@tool
def get_weather(location: str) -> str:
    """Get the current weather for a location."""
    return f"It is sunny and 21 degrees in {location}."


@tool
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email message to someone."""
    return f"Email sent to {to}."


@tool
def cuaca(city: str) -> str:
    """Laporan cuaca untuk sebuah kota."""
    return f"Cerah di {city}."


@tool
def lookup(base: str) -> str:
    """Look up the current exchange rate between two currencies."""
    return "1 EUR = 1.08 USD"


@tool
def translate(text: str) -> str:
    """Translate a sentence between languages; exchange words for other words."""
    return text


EXCHANGE_DICT: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_stock_price",
        "description": "Current price of a stock.",
        "parameters": {
            "type": "object",
            "properties": {"symbol": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["symbol", "days"],
        },
    },
}


def model() -> DemoChatModel:
    return DemoChatModel()


def aggregate(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    return total


def calls_of(message: AIMessage) -> list[tuple[str, dict[str, Any]]]:
    """A reply's tool calls without their ids (fresh on every call)."""
    return [(call["name"], call["args"]) for call in message.tool_calls]


def ask(messages: list[BaseMessage] | str, *tools: Any) -> AIMessage:
    runnable = model().bind_tools(list(tools)) if tools else model()
    return runnable.invoke(messages)


# --- identity ---------------------------------------------------------------------------------


def test_identity() -> None:
    assert DEMO_MODEL_ID == "juru/demo"
    assert model()._llm_type == "juru-demo"


def test_split_identifier_handles_snake_kebab_and_camel_case() -> None:
    assert split_identifier("get_weather") == ["get", "weather"]
    assert split_identifier("send-email") == ["send", "email"]
    assert split_identifier("searchDocuments") == ["search", "documents"]
    assert split_identifier("HTTPRequestTool") == ["http", "request", "tool"]


# --- choosing tools ---------------------------------------------------------------------------


def test_weather_tool_is_called_with_the_location() -> None:
    result = ask("What is the weather in sf?", get_weather, send_email)
    assert result.content == ""
    assert [(c["name"], c["args"]) for c in result.tool_calls] == [
        ("get_weather", {"location": "sf"})
    ]
    assert str(result.tool_calls[0]["id"]).startswith("call_")


def test_mixed_message_calls_every_matching_tool_in_bound_order() -> None:
    message = "What's the weather in Paris? Then email it to bob@example.com"
    result = ask(message, get_weather, send_email)
    assert [c["name"] for c in result.tool_calls] == ["get_weather", "send_email"]
    weather, email = result.tool_calls
    assert weather["args"] == {"location": "Paris"}
    assert email["args"]["to"] == "bob@example.com"
    assert email["args"]["body"] == message
    assert email["args"]["subject"] == "What's the weather in Paris? Then"
    assert weather["id"] != email["id"]
    reversed_order = ask(message, send_email, get_weather)
    assert [c["name"] for c in reversed_order.tool_calls] == ["send_email", "get_weather"]


def test_plural_and_camel_case_names_match() -> None:
    @tool
    def searchDocument(query: str) -> str:
        """Search."""
        return query

    result = ask("Please look through my documents for the contract", searchDocument)
    assert [c["name"] for c in result.tool_calls] == ["searchDocument"]
    assert result.tool_calls[0]["args"] == {
        "query": "Please look through my documents for the contract"
    }


def test_generic_name_words_do_not_match() -> None:
    result = ask("Can you get me something to do?", get_weather, send_email)
    assert result.tool_calls == []


def test_description_fallback_picks_the_best_sharing_tool() -> None:
    result = ask("How many dollars is one euro at today's exchange rate?", translate, lookup)
    assert [c["name"] for c in result.tool_calls] == ["lookup"]


def test_no_matching_tool_answers_in_text() -> None:
    result = ask("Tell me a joke", get_weather, send_email)
    assert result.tool_calls == []
    assert isinstance(result.content, str)
    assert result.content.startswith("[Juru demo model]")
    assert "Tell me a joke" in result.content
    assert "JURU_DEFAULT_MODEL" in result.content


def test_indonesian_location() -> None:
    result = ask("Cuaca di Jakarta?", cuaca)
    assert [(c["name"], c["args"]) for c in result.tool_calls] == [("cuaca", {"city": "Jakarta"})]


def test_system_message_is_ignored_for_decisions() -> None:
    messages: list[BaseMessage] = [
        SystemMessage("You are a weather assistant that always checks the weather."),
        HumanMessage("hello"),
    ]
    result = ask(messages, get_weather)
    assert result.tool_calls == []
    assert 'You said: "hello"' in result.text


def test_tool_choice_forces_a_tool() -> None:
    bound = model().bind_tools([get_weather, send_email], tool_choice="send_email")
    assert [c["name"] for c in bound.invoke("hello").tool_calls] == ["send_email"]
    anything = model().bind_tools([get_weather, send_email], tool_choice="any")
    assert [c["name"] for c in anything.invoke("hello").tool_calls] == ["get_weather"]
    nothing = model().bind_tools([get_weather], tool_choice="none")
    assert nothing.invoke("weather in Oslo").tool_calls == []


def test_tool_choice_in_openais_shapes() -> None:
    named = {"type": "function", "function": {"name": "send_email"}}
    only = model().bind_tools([get_weather, send_email], tool_choice=named)
    # The message names the weather too, but a named choice calls that function alone.
    assert [c["name"] for c in only.invoke("weather in Oslo").tool_calls] == ["send_email"]
    required = model().bind_tools([get_weather, send_email], tool_choice="required")
    assert [c["name"] for c in required.invoke("hello").tool_calls] == ["get_weather"]
    assert [c["name"] for c in required.invoke("an email to bob").tool_calls] == ["send_email"]
    nothing = model().bind_tools([get_weather], tool_choice="none")
    reply = nothing.invoke("weather in Oslo")
    assert reply.tool_calls == [] and 'You said: "weather in Oslo"' in reply.text


def test_max_tokens_cuts_a_text_answer() -> None:
    whole = model().invoke("Tell me a joke")
    cut = model().bind(max_tokens=5).invoke("Tell me a joke")
    assert cut.text == whole.text[:19] and whole.text.startswith(cut.text)
    assert cut.usage_metadata is not None and cut.usage_metadata["output_tokens"] == 5
    assert cut.response_metadata["finish_reason"] == "length"
    assert whole.response_metadata["finish_reason"] == "stop"
    streamed = aggregate(list(model().bind(max_tokens=5).stream("Tell me a joke")))
    assert streamed.text == cut.text and streamed.usage_metadata == cut.usage_metadata
    roomy = model().bind(max_tokens=10_000).invoke("Tell me a joke")
    assert roomy.text == whole.text and roomy.response_metadata["finish_reason"] == "stop"
    calls = model().bind_tools([get_weather]).bind(max_tokens=1).invoke("weather in Oslo")
    assert calls_of(calls) == [("get_weather", {"location": "Oslo"})]


# --- arguments --------------------------------------------------------------------------------


def test_openai_style_dict_with_integer_argument() -> None:
    result = ask("stock price of ACME over 30 days", EXCHANGE_DICT)
    assert [(c["name"], c["args"]) for c in result.tool_calls] == [
        ("get_stock_price", {"symbol": "stock price of ACME over 30 days", "days": 30})
    ]


def test_argument_filling_by_name_and_type() -> None:
    parameters = {
        "type": "object",
        "properties": {
            "recipient": {"type": "string"},
            "title": {"type": "string"},
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "urgent": {"type": "boolean"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "city": {"type": "string"},
            "cc_email": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "notes": {"type": "string"},
            "limit": {"type": "integer"},
        },
        "required": ["recipient", "title", "count", "ratio", "urgent", "unit", "city", "notes"],
    }
    message = "Mail ann@example.com about the 3 offsites at Bali, and the 2.5 budget"
    assert fill_arguments(parameters, message) == {
        "recipient": "ann@example.com",
        "title": "the 3 offsites at Bali",
        "count": 3,
        "ratio": 3,
        "urgent": False,
        "unit": "celsius",
        "city": "Bali",
        "cc_email": "ann@example.com",
        "notes": message,
    }


def test_subject_defaults_to_first_six_words() -> None:
    parameters = {
        "type": "object",
        "properties": {"subject": {"type": "string"}, "location": {"type": "string"}},
        "required": ["subject"],
    }
    assert fill_arguments(parameters, "one two three four five six seven") == {
        "subject": "one two three four five six"
    }


def test_literal_enum_from_a_decorated_tool() -> None:
    @tool
    def get_temperature(location: str, unit: Literal["fahrenheit", "celsius"]) -> str:
        """Temperature."""
        return location

    result = ask("Temperature in Oslo.", get_temperature)
    assert result.tool_calls[0]["args"] == {"location": "Oslo", "unit": "fahrenheit"}


# --- answering from tool results --------------------------------------------------------------


def _after_tools(*results: ToolMessage) -> list[BaseMessage]:
    calls = [
        {"name": r.name or "", "args": {}, "id": r.tool_call_id, "type": "tool_call"}
        for r in results
    ]
    return [
        HumanMessage("What's the weather in Paris? Then email it to bob@example.com"),
        AIMessage(content="", tool_calls=calls),
        *results,
    ]


def test_single_tool_result_is_the_answer_and_no_tool_is_called_again() -> None:
    messages = _after_tools(
        ToolMessage("It is sunny in Paris.", tool_call_id="call_1", name="get_weather")
    )
    result = ask(messages, get_weather, send_email)
    assert result.tool_calls == []
    assert (
        result.content == "[Juru demo model] The tool get_weather returned: It is sunny in Paris."
    )


def test_a_json_result_is_quoted_in_a_sentence() -> None:
    result = '{"city": "Jakarta", "temp_c": 31}'
    messages = _after_tools(ToolMessage(result, tool_call_id="call_1", name="get_weather"))
    answer = ask(messages, get_weather).text
    assert answer == f"[Juru demo model] The tool get_weather returned: {result}."


def test_several_tool_results_give_one_line_per_tool() -> None:
    messages = _after_tools(
        ToolMessage("It is sunny in Paris.", tool_call_id="call_1", name="get_weather"),
        ToolMessage("Email sent.", tool_call_id="call_2", name="send_email"),
    )
    result = ask(messages, get_weather, send_email)
    assert result.tool_calls == []
    assert result.content == (
        "[Juru demo model] The tool get_weather returned: It is sunny in Paris. "
        "The tool send_email returned: Email sent."
    )


def test_failed_tool_result_is_reported_plainly() -> None:
    failed = ToolMessage(
        "Error: service unavailable", tool_call_id="call_1", name="get_weather", status="error"
    )
    result = ask(_after_tools(failed), get_weather)
    assert result.tool_calls == []
    assert result.content == (
        "[Juru demo model] The tool get_weather failed: Error: service unavailable."
    )
    both = ask(
        _after_tools(failed, ToolMessage("Email sent.", tool_call_id="call_2", name="send_email")),
        get_weather,
        send_email,
    )
    assert both.content == (
        "[Juru demo model] The tool get_weather failed: Error: service unavailable. "
        "The tool send_email returned: Email sent."
    )


def test_tool_name_comes_from_the_ai_tool_call_when_missing() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("weather?"),
        AIMessage(content="", tool_calls=[{"name": "get_weather", "args": {}, "id": "c1"}]),
        ToolMessage("Boom", tool_call_id="c1", status="error"),
    ]
    assert ask(messages).content == "[Juru demo model] The tool get_weather failed: Boom."
    empty = [*messages[:2], ToolMessage("", tool_call_id="c1")]
    assert ask(empty).content == "[Juru demo model] The tool get_weather returned: nothing."


# --- memory -----------------------------------------------------------------------------------


def test_remembers_the_name_across_messages() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("Hi, my name is Alice."),
        AIMessage("[Juru demo model] Hello."),
        HumanMessage("What's my name?"),
    ]
    result = ask(messages, get_weather)
    assert result.tool_calls == []
    assert "Your name is Alice." in result.text
    assert result.text.startswith("[Juru demo model]")


def test_remembers_an_indonesian_name() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("Halo, nama saya Budi Santoso"),
        AIMessage("ok"),
        HumanMessage("Siapa nama saya?"),
    ]
    assert "Your name is Budi Santoso." in ask(messages).text


def test_name_stops_at_lower_case_words_and_punctuation() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("my name is Ana Maria and I like tea"),
        HumanMessage("My name is ,"),
        HumanMessage("what is my name?"),
    ]
    assert "Your name is Ana Maria." in ask(messages).text


def test_unknown_name_is_not_invented() -> None:
    result = ask("what is my name")
    assert "Your name is" not in result.text
    assert result.text.startswith("[Juru demo model]")


# --- usage, streaming, determinism ------------------------------------------------------------


def test_usage_metadata_follows_the_documented_formula() -> None:
    result = ask("What is the weather in sf?", get_weather)
    assert result.usage_metadata is not None
    tool_chars = len("get_weather") + len('{"location": "sf"}')
    assert result.usage_metadata == {
        "input_tokens": len("What is the weather in sf?") // 4 + 1,
        "output_tokens": tool_chars // 4 + 1,
        "total_tokens": len("What is the weather in sf?") // 4 + 1 + tool_chars // 4 + 1,
    }


def test_text_streams_word_by_word_with_usage_on_the_last_chunk() -> None:
    messages: list[BaseMessage] = [SystemMessage("Be brief."), HumanMessage("Tell me a joke")]
    invoked = model().invoke(messages)
    chunks = list(model().stream(messages))
    assert len(chunks) > 5
    assert all(chunk.usage_metadata is None for chunk in chunks[:-1])
    total = aggregate(chunks)
    assert total.content == invoked.content
    assert total.usage_metadata == invoked.usage_metadata
    assert invoked.usage_metadata is not None
    assert invoked.usage_metadata["total_tokens"] > 0


def test_tool_calls_stream_as_one_chunk() -> None:
    bound = model().bind_tools([get_weather, send_email])
    message = "What's the weather in Paris? Then email it to bob@example.com"
    invoked = bound.invoke(message)
    streamed = list(bound.stream(message))
    chunks = [chunk for chunk in streamed if isinstance(chunk, AIMessageChunk)]
    assert len(streamed) == len(chunks) == 1
    assert [c["name"] for c in chunks[0].tool_call_chunks] == ["get_weather", "send_email"]
    total = aggregate(chunks)
    assert calls_of(total) == calls_of(invoked)
    assert total.usage_metadata == invoked.usage_metadata


def test_answers_are_deterministic_but_call_ids_are_fresh() -> None:
    message = "What's the weather in Paris? Then email it to bob@example.com"
    first = ask(message, get_weather, send_email)
    second = ask(message, get_weather, send_email)
    assert calls_of(first) == calls_of(second)
    assert first.usage_metadata == second.usage_metadata
    assert ask("hello").content == ask("hello").content
    ids = [call["id"] for reply in (first, second) for call in reply.tool_calls]
    assert len(set(ids)) == 4 and all(str(i).startswith("call_") for i in ids)


def test_tool_call_ids_differ_across_conversations_and_turns() -> None:
    bound = model().bind_tools([get_weather])
    first = bound.invoke("weather in Oslo")
    messages: list[BaseMessage] = [
        HumanMessage("weather in Oslo"),
        first,
        ToolMessage("Cold.", tool_call_id=first.tool_calls[0]["id"] or "", name="get_weather"),
        AIMessage("Cold."),
        HumanMessage("weather in Oslo"),
    ]
    second = bound.invoke(messages)
    other_city = bound.invoke("weather in Lima")
    ids = {first.tool_calls[0]["id"], second.tool_calls[0]["id"], other_city.tool_calls[0]["id"]}
    assert len(ids) == 3


async def test_async_invoke_and_stream_match_sync() -> None:
    bound = model().bind_tools([get_weather])
    sync = bound.invoke("What is the weather in sf?")
    result = await bound.ainvoke("What is the weather in sf?")
    assert calls_of(result) == calls_of(sync)
    assert result.usage_metadata == sync.usage_metadata
    chunks = [chunk async for chunk in model().astream("Tell me a joke")]
    assert len(chunks) > 1
    total = aggregate(chunks)
    text = await model().ainvoke("Tell me a joke")
    assert total.content == text.content
    assert total.usage_metadata == text.usage_metadata


# --- inside an agent loop ---------------------------------------------------------------------


def _agent() -> Any:
    bound = model().bind_tools([get_weather, send_email])

    async def call_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode([get_weather, send_email]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile()


async def test_agent_loop_terminates_with_the_tool_answer() -> None:
    state = await _agent().ainvoke({"messages": [HumanMessage("What is the weather in sf?")]})
    messages = state["messages"]
    assert [type(m).__name__ for m in messages] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    assert messages[-1].content == (
        "[Juru demo model] The tool get_weather returned: It is sunny and 21 degrees in sf."
    )
    assert messages[-1].tool_calls == []


async def test_agent_loop_streams_tokens() -> None:
    tokens = [
        chunk.content
        async for chunk, _meta in _agent().astream(
            {"messages": [HumanMessage("Tell me a joke")]}, stream_mode="messages"
        )
        if isinstance(chunk, AIMessageChunk)
    ]
    assert len(tokens) > 1
    assert "".join(str(t) for t in tokens).startswith("[Juru demo model]")


def test_indonesian_weather_question_calls_the_weather_tool() -> None:
    model = DemoChatModel().bind_tools([WEATHER_TOOL_FOR_SYNONYMS])
    reply = model.invoke("Cuaca di Jakarta?")
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("get_weather", {"city": "Jakarta"})
    ]


WEATHER_TOOL_FOR_SYNONYMS = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Ambil cuaca terkini untuk sebuah kota",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
