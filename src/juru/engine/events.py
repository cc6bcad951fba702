"""Run events: wake whoever waits on a run (`?wait=`, a worker guarding its run) and wake idle
workers when there is work. In one process an asyncio fan-out does it; on PostgreSQL,
LISTEN/NOTIFY carries the same events between processes, on SQLite Unix datagram sockets
(`engine.socket_events`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Protocol

import psycopg

logger = logging.getLogger(__name__)
CHANNEL = "juru_runs"
WORK = "*work"
LISTEN_POLL_SECONDS = 0.5


class RunEvents(Protocol):
    """A swappable fan-out of run changes."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def publish(self, run_id: str) -> None:
        """The run changed (status, lease, cancellation)."""

    async def announce_work(self) -> None:
        """A run needs a worker."""

    def watch(self, run_id: str) -> contextlib.AbstractAsyncContextManager[asyncio.Event]:
        """An event set whenever the run changes while the context is open."""

    async def wait_for_work(self, timeout: float) -> None:
        """Return when work is announced, or after `timeout` seconds."""


class LocalRunEvents:
    """Events within one process."""

    def __init__(self) -> None:
        self._watchers: defaultdict[str, set[asyncio.Event]] = defaultdict(set)
        self._work = asyncio.Event()

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def deliver(self, payload: str) -> None:
        if payload == WORK:
            self._work.set()
            return
        for event in self._watchers.get(payload, ()):
            event.set()

    async def publish(self, run_id: str) -> None:
        self.deliver(run_id)

    async def announce_work(self) -> None:
        self.deliver(WORK)

    @contextlib.asynccontextmanager
    async def watch(self, run_id: str) -> AsyncIterator[asyncio.Event]:
        event = asyncio.Event()
        self._watchers[run_id].add(event)
        try:
            yield event
        finally:
            self._watchers[run_id].discard(event)
            if not self._watchers[run_id]:
                del self._watchers[run_id]

    async def wait_for_work(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._work.wait(), timeout)
        self._work.clear()


class PostgresRunEvents(LocalRunEvents):
    """Local fan-out fed by a LISTEN connection, so events cross processes and machines."""

    def __init__(self, dsn: str) -> None:
        super().__init__()
        self.dsn = dsn
        self._listener: asyncio.Task[None] | None = None
        self._sender: psycopg.AsyncConnection[object] | None = None
        self._ready = asyncio.Event()
        self._send_lock = asyncio.Lock()
        self._stopped = False

    async def start(self) -> None:
        self._listener = asyncio.create_task(self._listen(), name="juru-run-events")
        await asyncio.wait_for(self._ready.wait(), timeout=30)

    async def stop(self) -> None:
        self._stopped = True
        if self._listener is not None:
            # The listener notices the flag within LISTEN_POLL_SECONDS; cancelling it inside
            # psycopg's notifies() could leave the connection's lock held and hang its close.
            done, _ = await asyncio.wait([self._listener], timeout=LISTEN_POLL_SECONDS * 10)
            if not done:
                logger.warning("run event listener did not stop in time; cancelling it")
                self._listener.cancel()
                await asyncio.wait([self._listener], timeout=LISTEN_POLL_SECONDS * 10)
        sender, self._sender = self._sender, None
        if sender is not None:
            with contextlib.suppress(psycopg.Error, TimeoutError):
                await asyncio.wait_for(sender.close(), LISTEN_POLL_SECONDS * 10)

    async def _listen(self) -> None:
        while not self._stopped:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.dsn, autocommit=True
                ) as connection:
                    await connection.execute(f"LISTEN {CHANNEL}")
                    self._ready.set()
                    # After a reconnect, anything may have happened: wake every waiter.
                    for run_id in list(self._watchers):
                        self.deliver(run_id)
                    self.deliver(WORK)
                    while not self._stopped:
                        notices = connection.notifies(timeout=LISTEN_POLL_SECONDS)
                        async with contextlib.aclosing(notices):
                            async for notice in notices:
                                self.deliver(notice.payload)
            except psycopg.Error:
                logger.exception("run event listener lost its connection; reconnecting")
                await asyncio.sleep(1)

    async def _notify(self, payload: str) -> None:
        async with self._send_lock:
            if self._stopped:
                return
            try:
                if self._sender is None or self._sender.closed:
                    self._sender = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
                await self._sender.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
            except psycopg.Error:
                logger.exception("could not send a run event")
                if self._sender is not None:
                    await self._sender.close()
                self._sender = None

    async def publish(self, run_id: str) -> None:
        self.deliver(run_id)
        await self._notify(run_id)

    async def announce_work(self) -> None:
        self.deliver(WORK)
        await self._notify(WORK)
