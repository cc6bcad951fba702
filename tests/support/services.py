"""The services the suite needs beside Python: PostgreSQL and Redis, each checked once at the
start, so a missing one is one line saying how to get it rather than a failure deep in a test."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import psycopg

from juru.store.urls import DatabaseUrl

POSTGRES_URL = os.environ.get("JURU_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
REDIS_URL = f"redis://{REDIS_HOST}:{REDIS_PORT}"


@dataclass(frozen=True)
class Service:
    """A service some tests need: its pytest marker, whether CI requires it, how to check it."""

    marker: str
    required_by: str

    @property
    def required(self) -> bool:
        return os.environ.get(self.required_by) == "1"


POSTGRESQL = Service("postgresql", "JURU_REQUIRE_POSTGRES")
REDIS = Service("redis", "JURU_REQUIRE_REDIS")


def postgres_problem() -> str | None:
    """One line saying PostgreSQL is not answering and how to get it, or None."""
    url = DatabaseUrl.parse(POSTGRES_URL).url
    where = f"{url.host}:{url.port or 5432}"
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3):
            return None
    except psycopg.Error:
        return (
            f"PostgreSQL is not answering at {where}: start it (pg_ctlcluster 15 main start) "
            "or set JURU_TEST_POSTGRES_URL; its tests are skipped"
        )


def redis_problem() -> str | None:
    """One line saying Redis is not answering and how to get it, or None."""
    try:
        with socket.create_connection((REDIS_HOST, REDIS_PORT), timeout=3) as connection:
            connection.sendall(b"PING\r\n")
            if connection.recv(64).startswith(b"+PONG"):
                return None
    except OSError:
        pass
    return (
        f"Redis is not answering at {REDIS_HOST}:{REDIS_PORT}: start it (redis-server "
        "--daemonize yes, from the redis-server package); its tests are skipped"
    )


def missing_services() -> dict[Service, str]:
    """Each service that does not answer, with the line that says so."""
    problems = {POSTGRESQL: postgres_problem(), REDIS: redis_problem()}
    return {service: line for service, line in problems.items() if line is not None}
