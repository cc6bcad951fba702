"""`GET /health`: is the app up and its database reachable."""

from __future__ import annotations

import logging

from fastapi import APIRouter
from fastapi.responses import JSONResponse

import juru
from juru.http.deps import Context
from juru.http.errors import RETRY_AFTER_SECONDS
from juru.store.database import database_answers

logger = logging.getLogger(__name__)
router = APIRouter(tags=["health"])


@router.get("/health")
async def health(context: Context) -> JSONResponse:
    """200 with the database dialect when the database answers, 503 otherwise."""
    body = {"status": "ok", "version": juru.__version__, "database": context.database.dialect}
    problem = await database_answers(context.engine)
    if problem is not None:
        # The driver's message names the database's host and port: it goes to the log only.
        logger.warning("health: the database does not answer: %s", problem)
        detail = {"status": "unavailable", "detail": "the database does not answer"}
        return JSONResponse({**body, **detail}, 503, {"Retry-After": str(RETRY_AFTER_SECONDS)})
    return JSONResponse(body)
