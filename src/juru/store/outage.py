"""Telling a database outage from a real error.

A database that stops answering (PostgreSQL restarting, a SQLite file locked or unwritable for a
moment) is not the fault of the run or the request that met it: workers stop the execution and
let the run resume from its checkpoint later, and the HTTP edge answers 503. Only the store knows
the drivers' exception classes, so the engine and the HTTP edge ask here.
"""

from __future__ import annotations

import errno
import sqlite3

import psycopg
import psycopg_pool
from sqlalchemy import exc as sqlalchemy_errors

# The classes an outage is raised as (`is_outage` tells which of their errors are one).
OUTAGE_ERRORS: tuple[type[Exception], ...] = (
    sqlalchemy_errors.DBAPIError,
    sqlalchemy_errors.DisconnectionError,
    sqlalchemy_errors.TimeoutError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
    psycopg_pool.PoolTimeout,
    sqlite3.OperationalError,
    ConnectionError,
)
# SQLite result codes that mean "the file cannot be written or read just now", not "wrong SQL".
SQLITE_UNAVAILABLE = frozenset(
    {
        "SQLITE_BUSY",
        "SQLITE_LOCKED",
        "SQLITE_READONLY",
        "SQLITE_IOERR",
        "SQLITE_CANTOPEN",
        "SQLITE_FULL",
        "SQLITE_PROTOCOL",
    }
)
SQLITE_UNAVAILABLE_MESSAGES = (
    "database is locked",
    "database table is locked",
    "readonly database",
    "disk i/o error",
    "unable to open database file",
    "database or disk is full",
)
NETWORK_ERRNOS = frozenset(
    {
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.EPIPE,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ENETDOWN,
        errno.ETIMEDOUT,
    }
)
CHAIN_LIMIT = 8


def _sqlite_unavailable(error: sqlite3.OperationalError) -> bool:
    name = getattr(error, "sqlite_errorname", "")
    if any(name.startswith(code) for code in SQLITE_UNAVAILABLE):
        return True
    message = str(error).lower()
    return any(text in message for text in SQLITE_UNAVAILABLE_MESSAGES)


def _is_outage_itself(error: BaseException) -> bool:
    if isinstance(error, sqlalchemy_errors.DBAPIError):
        # SQLAlchemy wraps the driver's error; a dropped connection is flagged as such.
        return error.connection_invalidated or (
            error.orig is not None and _is_outage_itself(error.orig)
        )
    if isinstance(error, sqlite3.OperationalError):
        return _sqlite_unavailable(error)
    if isinstance(
        error,
        sqlalchemy_errors.DisconnectionError
        | sqlalchemy_errors.TimeoutError
        | psycopg.OperationalError
        | psycopg.InterfaceError
        | psycopg_pool.PoolTimeout
        | ConnectionError,
    ):
        return True
    return isinstance(error, OSError) and error.errno in NETWORK_ERRNOS


def is_outage(error: BaseException) -> bool:
    """Whether `error` (or an error it was raised from) means the database is not answering
    now, as opposed to a mistake that retrying would repeat."""
    seen: BaseException | None = error
    for _ in range(CHAIN_LIMIT):
        if seen is None:
            return False
        if _is_outage_itself(seen):
            return True
        seen = seen.__cause__
    return False


# The outage classes that only a database library raises.
DATABASE_ERRORS = tuple(kind for kind in OUTAGE_ERRORS if kind is not ConnectionError)


def is_database_outage(error: BaseException) -> bool:
    """`is_outage`, counting only errors a database library raised: for code that also talks
    to other servers (MCP), whose refused or reset connections are theirs, not the database's."""
    seen: BaseException | None = error
    for _ in range(CHAIN_LIMIT):
        if seen is None:
            return False
        if isinstance(seen, DATABASE_ERRORS) and _is_outage_itself(seen):
            return True
        seen = seen.__cause__
    return False
