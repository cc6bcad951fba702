"""The `input` object of each class method, as pydantic models (their JSON schemas are the
`parameters` of the generated `classMethods`)."""

from __future__ import annotations

from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

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


class QueryInput(MethodInput):
    """`query` and `stream_query`: one user message, optionally continuing a session."""

    message: str | None = Field(default=None, description="The user's message.")
    input: str | None = Field(default=None, description="The user's message, under another name.")
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
        if (self.message is None) == (self.input is None):
            raise ValueError("give the user's text in message (or input), exactly one of them")
        _checked_text(self.text)
        if self.session_id is not None and self.user_id is None:
            raise ValueError("user_id is required with session_id")
        return self

    @property
    def text(self) -> str:
        return self.message if self.message is not None else (self.input or "")


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
        description="The user's message: text, or an ADK Content with text parts."
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
        _checked_text(self.text)
        return self

    @property
    def text(self) -> str:
        return self.message if isinstance(self.message, str) else content_text(self.message)


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
