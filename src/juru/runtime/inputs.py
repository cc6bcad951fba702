"""The `input` object of each class method, as pydantic models (their JSON schemas are the
`parameters` of the generated `classMethods`)."""

from __future__ import annotations

from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from juru.runtime.adk import REVIEW_FUNCTION
from juru.runtime.errors import RuntimeInputError

USER_ID = Field(min_length=1, max_length=200, description="The user the session belongs to.")
SESSION_ID = Field(min_length=1, max_length=200, description="A session (a Juru thread).")


class MethodInput(BaseModel):
    """Unknown fields are refused, so a typo fails loudly instead of being ignored."""

    model_config = ConfigDict(extra="forbid")


M = TypeVar("M", bound=MethodInput)


def _checked_text(text: str) -> str:
    if not text.strip():
        raise ValueError("message must contain more than white space")
    return text


DECISIONS = Field(
    default=None,
    min_length=1,
    description="Answer the session's pending review instead of sending a message: one "
    "decision per action request, {'type': 'approve'}, {'type': 'edit', 'edited_action': "
    "{'name', 'args'}} or {'type': 'reject', 'message'?}.",
)


class QueryInput(MethodInput):
    """`query` and `stream_query`: one user message (or the decisions answering a pending
    review), optionally continuing a session."""

    message: str | None = Field(default=None, description="The user's message.")
    input: str | None = Field(default=None, description="The user's message, under another name.")
    decisions: list[dict[str, Any]] | None = DECISIONS
    session_id: str | None = Field(
        default=None, min_length=1, max_length=200, description="Continue this session."
    )
    user_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The session's user (required with session_id).",
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        given = [value is not None for value in (self.message, self.input, self.decisions)]
        if sum(given) != 1:
            raise ValueError(
                "give the user's text in message (or input), or the decisions answering a "
                "pending review: exactly one of them"
            )
        if self.session_id is not None and self.user_id is None:
            raise ValueError("user_id is required with session_id")
        if self.decisions is not None:
            if self.session_id is None:
                raise ValueError("decisions answer a session's pending review: give session_id")
            return self
        _checked_text(self.text)
        return self

    @property
    def text(self) -> str:
        return self.message if self.message is not None else (self.input or "")

    @property
    def review(self) -> dict[str, Any] | None:
        """The resume value of a pending review (`{"decisions": [...]}`), if this answers one."""
        return None if self.decisions is None else {"decisions": self.decisions}


def content_review(content: dict[str, Any]) -> dict[str, Any] | None:
    """The decisions of a Content answering a pending review: one `function_response` part
    named `juru_review` whose response is `{"decisions": [...]}`; None for other Contents."""
    parts = content.get("parts")
    if not isinstance(parts, list):
        return None
    responses = [part.get("function_response") for part in parts if isinstance(part, dict)]
    reviews = [r for r in responses if isinstance(r, dict) and r.get("name") == REVIEW_FUNCTION]
    if not reviews:
        return None
    if len(parts) != 1:
        raise ValueError(f"a {REVIEW_FUNCTION} function_response must be the only part")
    response = reviews[0].get("response")
    if not isinstance(response, dict) or not isinstance(response.get("decisions"), list):
        raise ValueError(
            f'the {REVIEW_FUNCTION} function_response needs a response {{"decisions": [...]}}'
        )
    return {"decisions": response["decisions"]}


def content_text(content: dict[str, Any]) -> str:
    """The text of an ADK `Content` (`{"role": "user", "parts": [{"text": ...}]}`)."""
    parts = content.get("parts")
    if not isinstance(parts, list) or not parts:
        raise ValueError("a Content message needs a non-empty list of parts")
    texts = []
    for part in parts:
        if not isinstance(part, dict) or not isinstance(part.get("text"), str):
            raise ValueError("only text parts ({'text': str}) are supported in a Content message")
        texts.append(part["text"])
    return "\n".join(texts)


class AdkQueryInput(MethodInput):
    """`async_stream_query`: ADK's message (text or `Content`), user and optional session."""

    message: str | dict[str, Any] = Field(
        description="The user's message: text, or an ADK Content with text parts, or one "
        "with a single juru_review function_response answering the session's pending review."
    )
    user_id: str = USER_ID
    session_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Continue this session (a new one is created when absent).",
    )
    run_config: dict[str, Any] | None = Field(
        default=None, description="Accepted for compatibility with ADK; ignored."
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.review is not None:
            if self.session_id is None:
                raise ValueError("a review answers a session's pending review: give session_id")
            return self
        _checked_text(self.text)
        return self

    @property
    def text(self) -> str:
        return self.message if isinstance(self.message, str) else content_text(self.message)

    @property
    def review(self) -> dict[str, Any] | None:
        """The resume value of a pending review, if the message answers one."""
        return None if isinstance(self.message, str) else content_review(self.message)


class CreateSessionInput(MethodInput):
    """A new session for `user_id`, with an id of the caller's choice or a generated one."""

    user_id: str = USER_ID
    session_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="The new session's id (generated when absent).",
    )
    state: dict[str, Any] | None = Field(default=None, description="The session's initial state.")


class SessionInput(MethodInput):
    """One of the user's sessions."""

    user_id: str = USER_ID
    session_id: str = SESSION_ID


class UserInput(MethodInput):
    """A user, whose sessions are meant."""

    user_id: str = USER_ID


def _describe(error: Any) -> str:
    location = ".".join(str(part) for part in ("input", *error["loc"]))
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{location}: {message}"


def parse_input(model: type[M], raw: dict[str, Any] | None) -> M:
    """Validate a class method's input; RuntimeInputError naming every problem."""
    try:
        return model.model_validate(raw or {})
    except ValidationError as error:
        problems = "; ".join(_describe(item) for item in error.errors())
        raise RuntimeInputError(problems) from None
