"""`GET /health`: is the app up and its database reachable."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

import juru
from juru.http.deps import Context
from juru.store.database import database_answers

router = APIRouter(tags=["health"])


@router.get("/health")
async def health(context: Context) -> JSONResponse:
    """200 with the database dialect when the database answers, 503 otherwise."""
    body = {"status": "ok", "version": juru.__version__, "database": context.database.dialect}
    problem = await database_answers(context.engine)
    if problem is not None:
        return JSONResponse({**body, "status": "unavailable", "detail": problem}, 503)
    return JSONResponse(body)
