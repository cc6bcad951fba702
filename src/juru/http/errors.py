"""Service exceptions mapped to HTTP: `{"detail": ...}` for the playground, and
`{"error": {"code", "message"}}` for `/v1`.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from juru.agents.registry import FeatureUnavailableError
from juru.billing.rate_limits import RateLimitDecision
from juru.core.errors import (
    AuthenticationError,
    ConflictError,
    DomainError,
    FailedError,
    InsufficientBalanceError,
    InvalidRequestError,
    NotFoundError,
    RateLimitedError,
    TooLargeError,
    UnavailableError,
    UnsupportedMediaError,
    UpstreamError,
)
from juru.playground import FeatureNotFoundError, PlaygroundRequestError
from juru.runtime.errors import RuntimeCallError
from juru.store.outage import OUTAGE_ERRORS, is_outage

logger = logging.getLogger(__name__)
RUNTIME_PREFIX = "/api/"
# How long a client should wait before retrying while the database does not answer.
RETRY_AFTER_SECONDS = 3
DATABASE_UNAVAILABLE = "the database is not answering; try again in a few seconds"

STATUS_BY_ERROR: dict[type[Exception], int] = {
    PlaygroundRequestError: 400,
    FeatureNotFoundError: 404,
    FeatureUnavailableError: 503,
}


def api_error_body(code: str, message: str) -> dict[str, dict[str, str]]:
    return {"error": {"code": code, "message": message}}


async def _detail_response(_request: Request, error: Exception) -> JSONResponse:
    status = next(code for kind, code in STATUS_BY_ERROR.items() if isinstance(error, kind))
    return JSONResponse({"detail": str(error)}, status_code=status)


# The one mapping from a domain error's kind to its status (most specific kind first).
STATUS_BY_DOMAIN_ERROR: dict[type[DomainError], int] = {
    InvalidRequestError: 400,
    AuthenticationError: 401,
    InsufficientBalanceError: 402,
    NotFoundError: 404,
    ConflictError: 409,
    TooLargeError: 413,
    UnsupportedMediaError: 415,
    RateLimitedError: 429,
    FailedError: 500,
    UpstreamError: 502,
    UnavailableError: 503,
}


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


async def _domain_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, DomainError)
    return JSONResponse(
        api_error_body(error.code, error.message),
        status_code=status_of(error),
        headers=headers_of(error),
    )


async def _runtime_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RuntimeCallError)
    return JSONResponse({"error": error.message}, status_code=status_of(error))


def database_unavailable_response() -> JSONResponse:
    """503 with the `/v1` envelope: the driver's message (host, port, SQL) is only logged."""
    return JSONResponse(
        api_error_body("database_unavailable", DATABASE_UNAVAILABLE),
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


async def _database_error(request: Request, error: Exception) -> Response:
    if not is_outage(error):
        raise error  # a real bug: the server's plain 500, and its traceback in the log
    logger.warning(
        "%s %s: the database is not answering (%s: %s)",
        request.method,
        request.url.path,
        type(error).__name__,
        error,
    )
    return database_unavailable_response()


def _describe(error: dict[str, object]) -> str:
    location = ".".join(str(part) for part in error.get("loc", ()) if part != "body")  # type: ignore[attr-defined]
    return f"{location or 'body'}: {error.get('msg')}"


async def _validation_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, RequestValidationError)
    message = "; ".join(_describe(item) for item in error.errors())
    if request.url.path.startswith(RUNTIME_PREFIX):
        return JSONResponse({"error": message}, status_code=400)
    if not request.url.path.startswith("/v1/"):
        return await request_validation_exception_handler(request, error)
    return JSONResponse(api_error_body("invalid_request", message), status_code=400)


def install_error_handlers(app: FastAPI) -> None:
    for kind in STATUS_BY_ERROR:
        app.add_exception_handler(kind, _detail_response)
    app.add_exception_handler(DomainError, _domain_error)
    app.add_exception_handler(RuntimeCallError, _runtime_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    for kind in OUTAGE_ERRORS:
        app.add_exception_handler(kind, _database_error)
