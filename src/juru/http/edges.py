"""The edge: every request passes here before any route sees it.

Checked once, in this order: the path and the query string (NUL characters, lone surrogates),
the headers Juru stores, the body's size (from Content-Length, then while it streams in) and,
for a JSON body, that it is JSON and that none of its strings (keys included) is invalid text.
The routes then read the body this middleware has already read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from juru.core.text import text_problem
from juru.http.envelope import FieldError
from juru.http.errors import (
    body_too_large_response,
    invalid_json_response,
    invalid_text_response,
    no_route_response,
)

# Headers whose values Juru stores.
STORED_HEADERS = (b"idempotency-key",)
UPLOAD_PATHS = frozenset({"/v1/documents"})
# Room for the multipart framing and the form's other fields around an uploaded file.
MULTIPART_OVERHEAD_BYTES = 64 * 1024
MAX_REPORTED_FIELDS = 20


@dataclass(frozen=True)
class BodyLimits:
    """`max_bytes` for every body; `upload_bytes` for a multipart upload to an upload path."""

    max_bytes: int
    upload_bytes: int

    def of(self, scope: Scope) -> int:
        if scope["path"] in UPLOAD_PATHS and _content_type(scope).startswith(b"multipart/"):
            return max(self.max_bytes, self.upload_bytes + MULTIPART_OVERHEAD_BYTES)
        return self.max_bytes


def _header(scope: Scope, name: bytes) -> bytes | None:
    return next((value for key, value in scope["headers"] if key.lower() == name), None)


def _content_type(scope: Scope) -> bytes:
    return (_header(scope, b"content-type") or b"").split(b";")[0].strip().lower()


def is_json_body(scope: Scope) -> bool:
    """Whether the routes will read the body as JSON (FastAPI's rule: no content type, or
    `application/json` and `application/*+json`)."""
    kind = _content_type(scope)
    return (
        not kind
        or kind == b"application/json"
        or (kind.startswith(b"application/") and kind.endswith(b"+json"))
    )


def invalid_strings(value: Any, path: str = "") -> Iterator[FieldError]:
    """Every string in a decoded JSON document that is not storable text, keys included."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem is not None:
                yield FieldError(path=where or "body", reason=problem)
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                key_problem = text_problem(key)
                if key_problem is not None:
                    yield FieldError(path=where or "body", reason=f"a key {key_problem}")
                    continue
                stack.append((f"{where}.{key}" if where else key, child))
        elif isinstance(item, list):
            stack.extend(
                (f"{where}.{index}" if where else str(index), child)
                for index, child in reversed(list(enumerate(item)))
            )


def query_problems(scope: Scope) -> list[FieldError]:
    """Invalid text in the query's names and values, decoded as Starlette decodes them."""
    pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
    problems = []
    for name, value in pairs:
        problem = text_problem(name) or text_problem(value)
        if problem is not None:
            shown = name if text_problem(name) is None else "?"
            problems.append(FieldError(path=f"query.{shown}", reason=problem))
    return problems


def header_problems(scope: Scope) -> list[FieldError]:
    problems = []
    for name in STORED_HEADERS:
        value = _header(scope, name)
        if value is not None and any(byte < 0x20 or byte == 0x7F for byte in value):
            reason = "contains a control character (NUL, a line break, ...)"
            problems.append(FieldError(path=f"header.{name.decode()}", reason=reason))
    return problems


def json_problem(body: bytes) -> tuple[str, int] | list[FieldError] | None:
    """Why a JSON body is refused: (a message naming the line and column, the offset) when it
    is not JSON, the invalid strings when it is, None when it is fine."""
    try:
        document = json.loads(body)
    except json.JSONDecodeError as error:
        return f"line {error.lineno} column {error.colno}: {error.msg}", error.pos
    except UnicodeDecodeError as error:
        return f"the body is not UTF-8 (byte {error.start})", error.start
    except RecursionError:
        return "the document is nested too deeply", 0
    found = []
    for problem in invalid_strings(document):
        found.append(problem)
        if len(found) == MAX_REPORTED_FIELDS:
            break
    return found or None


class BodyTooLarge(Exception):
    """The body passed its limit while streaming in."""


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None if the client left; raises BodyTooLarge past `limit` bytes
    without reading the rest."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the body already read, then whatever the client sends next (its
    disconnect, which streaming responses watch for)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class EdgeMiddleware:
    def __init__(self, app: ASGIApp, limits: BodyLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if text_problem(path) is not None:
            await no_route_response(scope["method"], path)(scope, receive, send)
            return
        fields = query_problems(scope) + header_problems(scope)
        if fields:
            await invalid_text_response(path, fields)(scope, receive, send)
            return
        limit = self.limits.of(scope)
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await body_too_large_response(path, limit)(scope, receive, send)
            return
        try:
            body = await read_body(receive, limit)
        except BodyTooLarge:
            await body_too_large_response(path, limit)(scope, receive, send)
            return
        if body is None:
            return
        if body and is_json_body(scope):
            problem = json_problem(body)
            if isinstance(problem, tuple):
                message, position = problem
                await invalid_json_response(path, message, position)(scope, receive, send)
                return
            if problem:
                await invalid_text_response(path, problem)(scope, receive, send)
                return
        await self.app(scope, replaying(body, receive), send)
