"""Service exceptions mapped to the playground's `{"detail": ...}` error bodies."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from juru.agents.registry import FeatureUnavailableError
from juru.playground import FeatureNotFoundError, PlaygroundRequestError

STATUS_BY_ERROR: dict[type[Exception], int] = {
    PlaygroundRequestError: 400,
    FeatureNotFoundError: 404,
    FeatureUnavailableError: 503,
}


async def _detail_response(_request: Request, error: Exception) -> JSONResponse:
    status = next(code for kind, code in STATUS_BY_ERROR.items() if isinstance(error, kind))
    return JSONResponse({"detail": str(error)}, status_code=status)


def install_error_handlers(app: FastAPI) -> None:
    for kind in STATUS_BY_ERROR:
        app.add_exception_handler(kind, _detail_response)
