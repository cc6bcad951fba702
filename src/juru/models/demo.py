"""Juru's offline demo chat model ``juru/demo``: tool-calling, no network, the same answer to
the same conversation (only tool-call ids are fresh each time, as a provider's are).

Rules (system messages are ignored):

* Conversation ends with ToolMessages: a sentence per result after the last AI message, quoting
  it ("The tool get_weather returned: {...}."; "... failed: ..." for ``status="error"``). Never
  calls a tool again then, so agent loops always terminate.
* Otherwise, for the last human message, call EVERY bound tool (in bound order) with a meaningful
  name word (split on ``_``/``-``/camelCase, generic words like get/send dropped) among the
  message words (simple plurals folded); else the one tool whose description shares most words
  (length >= 4, no stop words) with it. ``tool_choice``: "none" calls nothing, "required" (or
  "any") falls back to the first tool, a name or ``{"function": {"name": ...}}`` calls only it.
* ``max_tokens`` cuts a text answer (``finish_reason`` "length"), never a tool call.
* Arguments are filled from the message by property name and type (see ``argument_value``).
* Text answers are labelled "[Juru demo model]" and remember "my name is X" / "nama saya X".
* Usage: each message costs ``characters // 4 + 1`` tokens (an AI message's characters include
  its tool calls' names and JSON arguments); input sums the prompt, output is the answer. The
  last streamed chunk carries the usage, so summed chunks equal the non-streamed result.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import tool_call, tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

DEMO_MODEL_ID = "juru/demo"
LABEL = "[Juru demo model]"

_GENERIC = "get set send ask run call do make fetch tool agent the a an to of for and by in on with"
_GENERIC_NAME_WORDS = frozenset(_GENERIC.split())
_STOP = """about after also been before being between both could does each from have here into
just like make more most much need only other over please really same should some such than that
their them then there these they this those through tool tools under until very want were what
when where which while will with would your given using returns return"""
_STOPWORDS = frozenset(_STOP.split())
_LOCATION_NAMES = frozenset({"location", "city", "place", "country", "where"})
_SUBJECT_NAMES = frozenset({"subject", "title"})
_EMAIL_RE = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?")
_LOCATION_RE = re.compile(r"(?:^|\s)(?:in|at|for|di)\s+", re.IGNORECASE)
_ABOUT_RE = re.compile(r"(?:^|\s)about\s+", re.IGNORECASE)
_PUNCTUATION_RE = re.compile(r"[.,;:!?\n]")
_PHRASE_END_RE = re.compile(r"[.,;:!?\n]|\s(?:and|then)\s", re.IGNORECASE)
_NAME_RE = re.compile(r"(?i:my name is|nama saya)\s+([^\s.,;:!?][^.,;:!?\n]*)")
_ASKS_NAME_RE = re.compile(r"\bwhat(?:'s| is|s)\s+my\s+name\b|\bsiapa\s+nama\s+saya\b")


# --- tokenising ---
def _normalise(word: str) -> str:
    """Lower-case a word and fold a simple plural ("emails" -> "email", not "address")."""
    word = word.lower()
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _raw_words(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", text.lower())


# A few Indonesian words, so the demo also understands messages like "Cuaca di Jakarta?".
_SYNONYMS = {"cuaca": "weather", "surel": "email", "kirim": "send", "surat": "email"}


def message_words(text: str) -> set[str]:
    """The normalised words of a message (Indonesian ones also under their English twin)."""
    words = {_normalise(word) for word in _raw_words(text)}
    return words | {_SYNONYMS[word] for word in words if word in _SYNONYMS}


def split_identifier(name: str) -> list[str]:
    """Split a tool or property name on ``_``, ``-``, ``.``, spaces and camelCase, lower-cased."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name)
    return [part.lower() for part in re.split(r"[\s_.\-]+", spaced) if part]


def meaningful_words(text: str) -> set[str]:
    """Normalised words of length >= 4 that are not stop words (for description matching)."""
    return {_normalise(w) for w in _raw_words(text) if len(w) >= 4 and w not in _STOPWORDS}


def count_tokens(message: BaseMessage) -> int:
    """Deterministic token estimate: characters // 4 + 1 (tool calls count as name + JSON)."""
    chars = len(str(message.text))
    if isinstance(message, AIMessage):
        chars += sum(
            len(c["name"]) + len(json.dumps(c["args"], default=str)) for c in message.tool_calls
        )
    return chars // 4 + 1


# --- tool matching ---
def _function_specs(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """The ``function`` part of every (OpenAI-format) function tool, in bound order."""
    specs = (convert_to_openai_tool(tool) for tool in tools)
    return [spec["function"] for spec in specs if isinstance(spec.get("function"), dict)]


def match_by_name(functions: Sequence[dict[str, Any]], message: str) -> list[dict[str, Any]]:
    """Every tool with a meaningful name word among the message words, in bound order."""
    words = message_words(message)
    return [
        function
        for function in functions
        if ({_normalise(w) for w in split_identifier(function["name"])} - _GENERIC_NAME_WORDS)
        & words
    ]


def match_by_description(functions: Sequence[dict[str, Any]], message: str) -> list[dict[str, Any]]:
    """The single tool whose description shares most meaningful words (first wins ties)."""
    words = meaningful_words(message)
    scores = [len(meaningful_words(str(f.get("description") or "")) & words) for f in functions]
    best = max(range(len(functions)), key=lambda i: (scores[i], -i), default=-1)
    return [functions[best]] if best >= 0 and scores[best] > 0 else []


def select_tools(
    functions: Sequence[dict[str, Any]], message: str, tool_choice: Any = None
) -> list[dict[str, Any]]:
    """Tools to call: forced by ``tool_choice`` (a name or OpenAI's ``{"function": {"name"}}``,
    "any"/"required" as a fallback to the first tool, or "none"), else by name or description."""
    if isinstance(tool_choice, dict):
        tool_choice = (tool_choice.get("function") or {}).get("name")
    if tool_choice == "none":
        return []
    forced = [function for function in functions if function["name"] == tool_choice]
    if forced:
        return forced
    chosen = match_by_name(functions, message) or match_by_description(functions, message)
    return chosen or list(functions[:1] if tool_choice in ("any", "required") else [])


# --- argument filling ---
def _phrase_after(marker: re.Pattern[str], text: str, end: re.Pattern[str]) -> str | None:
    """The phrase after the last ``marker`` up to ``end``, without trailing punctuation."""
    matches = list(marker.finditer(text))
    if not matches:
        return None
    rest = text[matches[-1].end() :]
    stop = end.search(rest)
    phrase = (rest[: stop.start()] if stop else rest).strip().rstrip(".,;:!?'\"")
    return phrase or None


def _schema_types(schema: dict[str, Any]) -> set[str]:
    raw = schema.get("type")
    types = {raw} if isinstance(raw, str) else {t for t in raw or [] if isinstance(t, str)}
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key) or []:
            types |= _schema_types(sub) if isinstance(sub, dict) else set()
    return types


def _enum_values(schema: dict[str, Any]) -> list[Any]:
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return list(schema["enum"])
    subs = [s for key in ("anyOf", "oneOf", "allOf") for s in schema.get(key) or []]
    return next((values for s in subs if isinstance(s, dict) and (values := _enum_values(s))), [])


def _first_number(text: str, *, integer: bool) -> int | float:
    found = _NUMBER_RE.search(text)
    value = float(found.group()) if found else 0.0
    return int(value) if integer or value.is_integer() else value


def _confident_value(name: str, message: str) -> str | None:
    """A value taken from an explicit pattern in the message (e-mail, location, "about")."""
    lower, words = name.lower(), set(split_identifier(name))
    if lower == "to" or any(key in lower for key in ("email", "recipient", "address")):
        email = _EMAIL_RE.search(message)
        return email.group() if email else None
    if words & _LOCATION_NAMES:
        return _phrase_after(_LOCATION_RE, message, _PHRASE_END_RE)
    if words & _SUBJECT_NAMES:
        return _phrase_after(_ABOUT_RE, message, _PUNCTUATION_RE)
    return None


def argument_value(name: str, schema: dict[str, Any], message: str, *, required: bool) -> Any:
    """The value for one property, or None to leave an optional property out.

    Optional properties are filled only from an explicit pattern (see ``_confident_value``).
    Required ones: enum -> first value, boolean -> False, integer/number -> first number in the
    message (else 0), e-mail/location/subject-like names -> the pattern, subject/title without
    " about " -> the first 6 words, anything else (body, text, query, prompt, ...) -> the message.
    """
    types = _schema_types(schema)
    confident = _confident_value(name, message) if not types or "string" in types else None
    if not required:
        return confident
    if enum := _enum_values(schema):
        return enum[0]
    if "boolean" in types:
        return False
    if types & {"integer", "number"}:
        return _first_number(message, integer="integer" in types)
    if confident is not None:
        return confident
    if set(split_identifier(name)) & _SUBJECT_NAMES:
        return " ".join(message.split()[:6])
    if "object" in types:
        return {}
    # body/text/content/message/query/question/request/task/input/prompt and anything else.
    return [message] if "array" in types else message


def fill_arguments(parameters: dict[str, Any], message: str) -> dict[str, Any]:
    """Arguments for a tool's JSON-schema ``parameters``, in the schema's property order."""
    required = set(parameters.get("required") or [])
    args: dict[str, Any] = {}
    for name, schema in (parameters.get("properties") or {}).items():
        value = argument_value(
            name, schema if isinstance(schema, dict) else {}, message, required=name in required
        )
        if value is not None:
            args[name] = value
    return args


# --- answering ---
def _result_sentence(name: str, content: str, *, failed: bool) -> str:
    said = content.strip().rstrip(".") or "nothing"
    return f"The tool {name} {'failed' if failed else 'returned'}: {said}."


def answer_from_tool_results(conversation: Sequence[BaseMessage]) -> str:
    """A sentence per ToolMessage after the last AI message (never a new tool call)."""
    last_ai = max((i for i, m in enumerate(conversation) if isinstance(m, AIMessage)), default=-1)
    names: dict[str | None, str] = {}
    if last_ai >= 0 and isinstance(ai := conversation[last_ai], AIMessage):
        names = {call["id"]: call["name"] for call in ai.tool_calls}
    results = [m for m in conversation[last_ai + 1 :] if isinstance(m, ToolMessage)]
    sentences = (
        _result_sentence(
            result.name or names.get(result.tool_call_id) or "tool",
            str(result.text),
            failed=result.status == "error",
        )
        for result in results
    )
    return " ".join([LABEL, *sentences])


def remembered_name(earlier_human_texts: Sequence[str]) -> str | None:
    """The most recent name given as "my name is X" / "nama saya X" (X: capitalised words)."""
    for text in reversed(earlier_human_texts):
        if found := _NAME_RE.search(text):
            first, *rest = found.group(1).split()
            name = [first]
            for word in rest:
                if not word[:1].isupper() or word == "I":
                    break
                name.append(word)
            return " ".join(name).strip("'\"")
    return None


def text_answer(message: str, earlier_human_texts: Sequence[str]) -> str:
    normalised = message.lower().replace("\u2019", "'")
    if _ASKS_NAME_RE.search(normalised):
        name = remembered_name(earlier_human_texts)
        if name:
            return f"{LABEL} Your name is {name}."
        return f'{LABEL} I do not know your name yet; tell me with "my name is ...".'
    said = message.strip()
    return (
        f'{LABEL} You said: "{said}". This offline demo model calls a tool when your message '
        "names one; set JURU_DEFAULT_MODEL to a real model for real answers."
    )


def decide(
    messages: Sequence[BaseMessage], tools: Sequence[Any], tool_choice: Any = None
) -> tuple[str, list[ToolCall]]:
    """The whole decision: ``(text, tool_calls)`` for a conversation (exactly one is empty)."""
    conversation = [m for m in messages if not isinstance(m, SystemMessage)]
    if conversation and isinstance(conversation[-1], ToolMessage):
        return answer_from_tool_results(conversation), []
    humans = [str(m.text) for m in conversation if isinstance(m, HumanMessage)]
    current = humans[-1] if humans else ""
    if conversation and isinstance(conversation[-1], HumanMessage):
        chosen = select_tools(_function_specs(tools), current, tool_choice)
        calls = [
            tool_call(
                name=function["name"],
                args=fill_arguments(function.get("parameters") or {}, current),
                id=f"call_{uuid.uuid4().hex[:24]}",
            )
            for function in chosen
        ]
        if calls:
            return "", calls
    return text_answer(current, humans[:-1]), []


# --- the chat model ---
class DemoChatModel(BaseChatModel):
    """Offline, deterministic, tool-calling chat model (``juru/demo``); see the module doc."""

    model: str = DEMO_MODEL_ID

    @property
    def _llm_type(self) -> str:
        return "juru-demo"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools (LangChain tools, functions or OpenAI dicts), stored in OpenAI format."""
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _answer(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        text, calls = decide(messages, kwargs.get("tools") or [], kwargs.get("tool_choice"))
        # count_tokens is chars // 4 + 1, so 4 * max_tokens - 1 characters fit the budget.
        limit = 4 * int(kwargs.get("max_tokens") or 0) - 1
        cut = not calls and 0 <= limit < len(text)
        answer = AIMessage(content=text[:limit] if cut else text, tool_calls=calls)
        prompt, output = sum(count_tokens(m) for m in messages), count_tokens(answer)
        answer.usage_metadata = UsageMetadata(
            input_tokens=prompt, output_tokens=output, total_tokens=prompt + output
        )
        answer.response_metadata = {
            "model_name": self.model,
            "finish_reason": "tool_calls" if calls else "length" if cut else "stop",
        }
        return answer

    def _chunks(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> list[AIMessageChunk]:
        """The answer as chunks: words (or one tool-call chunk); the last carries the usage."""
        answer = self._answer(messages, kwargs)
        last = {
            "usage_metadata": answer.usage_metadata,
            "response_metadata": answer.response_metadata,
            "chunk_position": "last",
        }
        if answer.tool_calls:
            call_chunks = [
                tool_call_chunk(name=c["name"], args=json.dumps(c["args"]), id=c["id"], index=i)
                for i, c in enumerate(answer.tool_calls)
            ]
            return [AIMessageChunk(content="", tool_call_chunks=call_chunks, **last)]
        words = [w for w in re.findall(r"\S*\s*", answer.text) if w] or [""]
        return [AIMessageChunk(content=w) for w in words[:-1]] + [
            AIMessageChunk(content=words[-1], **last)
        ]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._answer(messages, kwargs))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._answer(messages, kwargs))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for chunk in self._chunks(messages, kwargs):
            yield ChatGenerationChunk(message=chunk)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self._chunks(messages, kwargs):
            yield ChatGenerationChunk(message=chunk)
