"""Service exceptions mapped to HTTP: `{"detail": ...}` for the playground, and
`{"error": {"code", "message"}}` for `/v1`.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from juru.agents.registry import FeatureUnavailableError
from juru.hosted.errors import ApiError
from juru.playground import FeatureNotFoundError, PlaygroundRequestError
from juru.runtime.errors import RuntimeCallError

RUNTIME_PREFIX = "/api/"

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


async def _api_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, ApiError)
    return JSONResponse(
        api_error_body(error.code, error.message), status_code=error.status, headers=error.headers
    )


async def _runtime_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RuntimeCallError)
    return JSONResponse({"error": error.message}, status_code=error.status)


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
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RuntimeCallError, _runtime_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
