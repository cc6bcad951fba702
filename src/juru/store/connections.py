"""Each store thread's own connection on SQLite, checked out of SQLAlchemy's pool once and kept.

A checkout and a return for every read and write (the pool's queue and events, a new
`Connection`, the reset on return) cost more than a small statement on SQLite (bench/RESULTS.md,
thirty-fourth round). So SQLite's writer thread and each of its reader threads
(`store.write_queue`, `store.database`) keep the connection they first checked out; work
that raised gives its connection back to the pool, which resets it, and the thread's next
work checks out another.

PostgreSQL's threads still check a connection out for each read and write: its pool hands
out the connection given back last, so that whichever thread takes a call, the connections
in use stay few, fresh (pinged only after 5 s idle, `store.database.ping_after_idle`) and
with their statements prepared; threads keeping one each would take turns on all of them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine


class KeptConnections:
    """The connections the threads of one engine keep, one per thread."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._local = threading.local()
        self._kept: list[Connection] = []
        self._lock = threading.Lock()

    @contextmanager
    def held(self) -> Iterator[Connection]:
        """This thread's connection for one piece of work; if the work raises, the connection
        goes back to the pool, which resets it, and the thread's next work checks out another."""
        connection = self._get()
        try:
            yield connection
        except BaseException:
            self._let_go()
            raise

    def _get(self) -> Connection:
        """This thread's connection: the one it kept, or a new checkout."""
        connection: Connection | None = getattr(self._local, "connection", None)
        if connection is not None and not connection.closed:
            return connection
        connection = self.engine.connect()
        self._local.connection = connection
        with self._lock:
            self._kept = [kept for kept in self._kept if not kept.closed]
            self._kept.append(connection)
        return connection

    def _let_go(self) -> None:
        connection: Connection | None = getattr(self._local, "connection", None)
        self._local.connection = None
        if connection is not None:
            connection.close()

    def close_all(self) -> None:
        """Give every kept connection back (their threads have stopped)."""
        with self._lock:
            kept, self._kept = self._kept, []
        for connection in kept:
            connection.close()
