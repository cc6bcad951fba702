"""The published OpenAPI description, and the `/docs` and `/redoc` pages served offline.

Routes declare their error statuses with `errors(...)`; `install_openapi` removes FastAPI's
automatic 422 from `/v1` operations, which answer shape errors with a 400 envelope instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel

from juru.http.envelope import ErrorEnvelope

STATIC_DIR = Path(__file__).with_name("static")
ASSETS_PATH = "/docs-assets"
HOSTED_PREFIX = "/v1/"

ERROR_MEANINGS: dict[int, str] = {
    400: "The request is malformed or refers to something invalid (`invalid_request`, ...).",
    401: "No live API key (`invalid_api_key`): send `Authorization: Bearer <key>`.",
    402: "The account's balance is used up (`insufficient_balance`).",
    404: "No such object for this account (`not_found`, `model_not_found`).",
    409: "The object is not in a state that allows this (`thread_busy`, `run_not_waiting`).",
    410: "The run ended and its events were pruned (`run_events_pruned`).",
    413: "The request body or uploaded file is too large.",
    422: "The Idempotency-Key was used before with another body (`idempotency_key_reused`).",
    415: "The uploaded file is of a kind that is not accepted.",
    429: "Past the account's rate limit (`rate_limit_exceeded`); see `Retry-After`.",
    502: "The model provider failed (`upstream_error`).",
    503: "The database is not answering (`database_unavailable`); see `Retry-After`.",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` entries documenting `statuses` with the error envelope."""
    return {
        status: {"model": ErrorEnvelope, "description": ERROR_MEANINGS[status]}
        for status in statuses
    }


# Every `/v1` request is admitted by its key, against the database and the rate limit.
ADMISSION_ERRORS = errors(401, 429, 503)


def extra_schemas(*models: type[BaseModel]) -> dict[str, Any]:
    """Component schemas for models no operation names directly (e.g. streamed chunks)."""
    found: dict[str, Any] = {}
    for model in models:
        schema = model.model_json_schema(
            mode="serialization", ref_template="#/components/schemas/{model}"
        )
        found.update(schema.pop("$defs", {}))
        found[model.__name__] = schema
    return found


def _drop_validation_422(description: dict[str, Any]) -> None:
    for path, operations in description["paths"].items():
        if path.startswith(HOSTED_PREFIX):
            for operation in operations.values():
                responses = operation.get("responses", {})
                # FastAPI's own 422 (`/v1` answers shape errors with 400); not a declared one.
                if "HTTPValidationError" in json.dumps(responses.get("422", {})):
                    responses.pop("422")
    text = json.dumps(description["paths"])
    schemas = description.get("components", {}).get("schemas", {})
    if "/HTTPValidationError" not in text:
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)


def install_openapi(app: FastAPI, *extra: type[BaseModel]) -> None:
    """Publish the description with `extra` models among its components."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            description = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            _drop_validation_422(description)
            components = description.setdefault("components", {})
            components.setdefault("schemas", {}).update(extra_schemas(*extra))
            app.openapi_schema = description
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def install_docs(app: FastAPI) -> None:
    """`/docs` and `/redoc`, their scripts and styles served from `ASSETS_PATH`."""
    app.mount(ASSETS_PATH, StaticFiles(directory=STATIC_DIR), name="docs-assets")
    favicon = f"{ASSETS_PATH}/favicon.png"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=favicon,
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url="/openapi.json",
            title=f"{app.title} API",
            redoc_js_url=f"{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=favicon,
            with_google_fonts=False,
        )
