"""The one mapping from errors to HTTP: domain errors, routing and validation failures and bugs
become a status, headers and a body in the shape of the face that was called.

- `/v1` and every route outside the two faces below: the envelope of `juru.http.envelope`,
  `{"error": {"code", "message", "fields"?}}`;
- the playground (`/playground/*`, `/chat`): its document's `{"detail": "..."}`, and its 422
  list of field errors for bodies off its tables;
- the Agent Runtime contract (`/api/*`): its `{"error": "..."}`, shape errors included (400).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.routing import compile_path

from juru.agents.registry import FeatureUnavailableError
from juru.billing.rate_limits import RateLimitDecision
from juru.core.errors import (
    AuthenticationError,
    ConflictError,
    DomainError,
    FailedError,
    GoneError,
    InsufficientBalanceError,
    InvalidFieldError,
    InvalidRequestError,
    NotFoundError,
    RateLimitedError,
    TooLargeError,
    UnavailableError,
    UnprocessableError,
    UnsupportedMediaError,
    UpstreamError,
)
from juru.core.text import text_problem
from juru.http.envelope import FieldError, error_body, public_message
from juru.playground import FeatureNotFoundError, PlaygroundRequestError
from juru.runtime.errors import RuntimeCallError
from juru.store.outage import OUTAGE_ERRORS, is_outage

logger = logging.getLogger(__name__)
RUNTIME_PREFIX = "/api/"
PLAYGROUND_PATHS = ("/playground", "/chat")
# How long a client should wait before retrying while the database does not answer.
RETRY_AFTER_SECONDS = 3
DATABASE_UNAVAILABLE = "the database is not answering; try again in a few seconds"
INTERNAL_ERROR = "the server failed to answer this request; the failure is in its log"
Face = Literal["api", "playground", "runtime"]

STATUS_BY_ERROR: dict[type[Exception], int] = {
    PlaygroundRequestError: 400,
    FeatureNotFoundError: 404,
    FeatureUnavailableError: 503,
}

# The one mapping from a domain error's kind to its status (most specific kind first).
STATUS_BY_DOMAIN_ERROR: dict[type[DomainError], int] = {
    InvalidRequestError: 400,
    AuthenticationError: 401,
    InsufficientBalanceError: 402,
    NotFoundError: 404,
    ConflictError: 409,
    GoneError: 410,
    TooLargeError: 413,
    UnsupportedMediaError: 415,
    UnprocessableError: 422,
    RateLimitedError: 429,
    FailedError: 500,
    UpstreamError: 502,
    UnavailableError: 503,
}


def face_of(path: str) -> Face:
    """Which face a path belongs to, by its prefix (also for paths no route serves)."""
    if path.startswith(RUNTIME_PREFIX):
        return "runtime"
    if any(path == prefix or path.startswith(prefix + "/") for prefix in PLAYGROUND_PATHS):
        return "playground"
    return "api"


def error_response(
    path: str,
    status: int,
    code: str,
    message: str,
    fields: list[FieldError] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """An error answer in the shape of the face `path` belongs to."""
    face = face_of(path)
    body: dict[str, Any]
    if face == "runtime":
        body = {"error": message}
    elif face == "playground":
        body = {"detail": message}
    else:
        body = error_body(code, message, fields)
    return JSONResponse(body, status_code=status, headers=headers)


def no_route_response(method: str, path: str) -> JSONResponse:
    """404 for a path no route serves; a path that is not valid text is not echoed."""
    if text_problem(path) is not None:
        return error_response(path, 404, "not_found", f"no route: the path {text_problem(path)}")
    if face_of(path) == "playground":
        return JSONResponse({"detail": HTTPStatus.NOT_FOUND.phrase}, status_code=404)
    return error_response(path, 404, "not_found", f"no route {method} {path}")


def invalid_text_response(path: str, fields: list[FieldError]) -> JSONResponse:
    """400 for strings that cannot be stored (NUL, lone surrogates), naming each field."""
    return error_response(path, 400, "invalid_request", describe(fields), fields)


def invalid_json_response(path: str, message: str, position: int) -> JSONResponse:
    """400 `invalid_json` (the playground: its 422 list, where a body off its table goes)."""
    text = f"the body is not valid JSON: {message}"
    if face_of(path) == "playground":
        item = {"type": "json_invalid", "loc": ["body", position], "msg": text}
        return JSONResponse({"detail": [item]}, status_code=422)
    return error_response(path, 400, "invalid_json", text)


def body_too_large_response(path: str, limit: int) -> JSONResponse:
    message = f"the request body is larger than {limit} bytes, the most this server accepts"
    return error_response(path, 413, "request_too_large", message, headers={"Connection": "close"})


def api_error_body(code: str, message: str) -> dict[str, Any]:
    return error_body(code, message)


def status_of(error: DomainError) -> int:
    return next(
        (status for kind, status in STATUS_BY_DOMAIN_ERROR.items() if isinstance(error, kind)),
        500 if isinstance(error, RuntimeCallError) else 400,
    )


def headers_of(error: DomainError) -> dict[str, str]:
    if isinstance(error, AuthenticationError):
        return {"WWW-Authenticate": "Bearer"}
    if isinstance(error, RateLimitedError):
        return RateLimitDecision(False, error.limit, 0, error.reset_seconds).headers()
    return {}


def code_of_status(status: int) -> str:
    """`not_found`, `method_not_allowed`, ...: the status's phrase in snake_case."""
    if status == 400:
        return "invalid_request"
    if status == 500:
        return "internal_error"
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "error"


async def _detail_response(_request: Request, error: Exception) -> JSONResponse:
    status = next(code for kind, code in STATUS_BY_ERROR.items() if isinstance(error, kind))
    return JSONResponse({"detail": str(error)}, status_code=status)


def domain_error_response(error: DomainError) -> JSONResponse:
    """A domain error in the `/v1` envelope, with its status and headers (and the field, for
    an error about one)."""
    fields = None
    if isinstance(error, InvalidFieldError):
        fields = [FieldError(path=error.path, reason=error.reason)]
    return JSONResponse(
        error_body(error.code, error.message, fields),
        status_code=status_of(error),
        headers=headers_of(error),
    )


async def _domain_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, DomainError)
    if face_of(request.url.path) == "playground":
        return JSONResponse({"detail": error.message}, status_code=status_of(error))
    return domain_error_response(error)


async def _runtime_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RuntimeCallError)
    return JSONResponse({"error": error.message}, status_code=status_of(error))


def allowed_methods(request: Request, fallback: str | None) -> str:
    """Every method the published description has on the request's path (Starlette names
    only the first matching route's, which is the `fallback`)."""
    methods: set[str] = set()
    for template, operations in request.app.openapi()["paths"].items():
        if compile_path(template)[0].fullmatch(request.url.path):
            methods |= {method.upper() for method in operations}
    return ", ".join(sorted(methods)) if methods else (fallback or "")


async def _http_error(request: Request, error: Exception) -> Response:
    """Routing (404 for no route, 405 for a wrong method) and the few `HTTPException`s."""
    assert isinstance(error, HTTPException)
    headers = dict(error.headers or {})
    path = request.url.path
    if face_of(path) == "playground":
        return JSONResponse(
            {"detail": error.detail}, status_code=error.status_code, headers=headers
        )
    if error.status_code == 404 and error.detail == HTTPStatus.NOT_FOUND.phrase:
        return no_route_response(request.method, path)
    if error.status_code == 405:
        given = {name.lower(): value for name, value in headers.items()}
        allowed = allowed_methods(request, given.get("allow"))
        headers = {name: value for name, value in headers.items() if name.lower() != "allow"}
        headers["Allow"] = allowed
        message = f"{request.method} is not allowed on {path}; allowed: {allowed}"
    else:
        message = str(error.detail)
    code = code_of_status(error.status_code)
    return error_response(path, error.status_code, code, message, headers=headers)


def database_unavailable_response(path: str = "/v1/") -> JSONResponse:
    """503: the driver's message (host, port, SQL) is only logged."""
    return error_response(
        path,
        503,
        "database_unavailable",
        DATABASE_UNAVAILABLE,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


async def _database_error(request: Request, error: Exception) -> Response:
    if not is_outage(error):
        raise error  # a real bug: the 500 below, and its traceback in the log
    logger.warning(
        "%s %s: the database is not answering (%s: %s)",
        request.method,
        request.url.path,
        type(error).__name__,
        error,
    )
    return database_unavailable_response(request.url.path)


async def _internal_error(request: Request, _error: Exception) -> Response:
    """A bug: the caller learns only that it failed (Starlette logs the traceback)."""
    return error_response(request.url.path, 500, "internal_error", INTERNAL_ERROR)


def field_path(location: Sequence[Any]) -> str:
    """`tools.0.function.name` for a body field; `query.limit`, `path.agent_id`, ... else."""
    parts = [str(part) for part in location]
    if parts and parts[0] == "body":
        parts = parts[1:]
    return ".".join(parts) or "body"


def _reason(error: dict[str, Any]) -> str:
    message = str(error.get("msg", "is not valid"))
    return public_message(message.removeprefix("Value error, "))


def field_errors(errors: Sequence[Any]) -> list[FieldError]:
    return [
        FieldError(path=field_path(item.get("loc", ())), reason=_reason(item)) for item in errors
    ]


def describe(fields: list[FieldError]) -> str:
    return "; ".join(f"{field.path}: {field.reason}" for field in fields)


def _json_error(errors: Sequence[Any]) -> str | None:
    """The decoding error's text, if the body was not JSON at all (a fallback for bodies the
    edge did not parse)."""
    for item in errors:
        if item.get("type") == "json_invalid":
            return str((item.get("ctx") or {}).get("error") or "the body is not valid JSON")
    return None


async def _validation_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, RequestValidationError)
    errors = error.errors()
    path = request.url.path
    if face_of(path) == "playground":
        listed = [
            {"type": item.get("type"), "loc": list(item.get("loc", ())), "msg": _reason(item)}
            for item in errors
        ]
        return JSONResponse({"detail": json.loads(json.dumps(listed, default=str))}, 422)
    not_json = _json_error(errors)
    if not_json is not None:
        return error_response(path, 400, "invalid_json", f"the body is not valid JSON: {not_json}")
    fields = field_errors(errors)
    return error_response(path, 400, "invalid_request", describe(fields), fields)


def install_error_handlers(app: FastAPI) -> None:
    for kind in STATUS_BY_ERROR:
        app.add_exception_handler(kind, _detail_response)
    app.add_exception_handler(DomainError, _domain_error)
    app.add_exception_handler(RuntimeCallError, _runtime_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    for kind in OUTAGE_ERRORS:
        app.add_exception_handler(kind, _database_error)
    app.add_exception_handler(Exception, _internal_error)
