"""`GET /health`: is the app up and its database reachable."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

import juru
from juru.http.deps import Context

router = APIRouter(tags=["health"])


@router.get("/health")
async def health(context: Context) -> JSONResponse:
    """200 with the database dialect when the database answers, 503 otherwise."""
    body = {"status": "ok", "version": juru.__version__, "database": context.database.dialect}
    try:
        async with context.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    except (SQLAlchemyError, OSError) as error:
        return JSONResponse({**body, "status": "unavailable", "detail": str(error)}, 503)
    return JSONResponse(body)
