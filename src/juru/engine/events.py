"""Run events: wake whoever waits on a run (`?wait=`, a worker guarding its run, a stream
following its log) and wake idle workers when there is work. In one process an asyncio fan-out
does it; on PostgreSQL, LISTEN/NOTIFY carries the same events between processes, on SQLite Unix
datagram sockets (`engine.socket_events`).

A payload is a run id (its status or lease changed, and its log may have grown), `#<run id>
<json>` (the same, with the run as the change left it, `{"run": ...}`, and the events the change
appended to its log, `"events": [...]`, when they are known and fit: its watchers and followers
need not read them), `+<run id>` (its log grew, nothing else changed; `+<run id> <json>` with
the events appended, a list), `~<run id> <json>` (an ephemeral text delta,
for streams only), `=<run id>` (only its lease changed: no event for its followers), `?<run
id>` (a stream follows the run: its model calls should stream their text), HELLO (a process
just started: tell it which runs you follow), WORK (a run needs a worker: every idle one
looks) or `*work <worker> <run id>` (the run was leased to the named worker, which ran it last,
by the write that resumed it: that worker takes it up without a claim, once it has room, and
the others do not look; its short lease lapses to any worker's claim meanwhile; `*work <worker>
<run id> <json>` with the run as that write left it, when it fits: the worker need not read it).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import psycopg

from juru.store.run_log import RunEventRecord

logger = logging.getLogger(__name__)
CHANNEL = "juru_runs"
WORK = "*work"
LOG_GREW = "+"
DELTA = "~"
INTEREST = "?"
LEASE = "="
STATE = "#"
HELLO = "!hello"
# How long a process remembers that another one has a stream following a run, and how often
# at most it says again that one of its streams follows a run.
INTEREST_SECONDS = 3600.0
REANNOUNCE_SECONDS = 60.0
# How long a stopping process waits for its listener and its sender connection.
STOP_SECONDS = 5.0
# What a follower keeps while its stream is busy writing: past this many arrivals, later deltas
# are dropped (they are ephemeral: the message's `message.completed` holds the whole text) and
# carried events give way to a read of the log.
MAX_PENDING_ARRIVALS = 1000
# The largest payload that carries a run's state or events: every transport takes it (NOTIFY
# under 8,000 bytes, the datagram sockets' 4,096-byte reads). What would not fit is not
# carried; its watchers and followers read it.
MAX_NOTICE_BYTES = 3800


def handed_to(worker: str, run_id: str, run: dict[str, Any] | None = None) -> str:
    """The payload saying that `run_id` was leased to `worker` by the write that resumed it:
    the worker takes it up without a claim of its own (see `Worker`); with `run`, the run as
    that write left it (`store.run_state.handed_run_state`), left out where it would not fit:
    the worker then reads it."""
    payload = f"{WORK} {worker} {run_id}"
    if run is not None:
        carried = f"{payload} {_json(run)}"
        if _fits(carried):
            return carried
    return payload


def log_grew(run_id: str, events: Sequence[RunEventRecord] | None = None) -> str:
    """The payload saying that the run's log grew and nothing else of it changed; with
    `events`, the ones appended (left out where they would not fit in a notice)."""
    if events:
        payload = f"{LOG_GREW}{run_id} {_json(_events_json(events))}"
        if _fits(payload):
            return payload
    return LOG_GREW + run_id


def lease_moved(run_id: str) -> str:
    """The payload saying that only the run's lease changed (its watchers care, not streams)."""
    return LEASE + run_id


def changed_to(
    run_id: str, state: dict[str, Any] | None, events: Sequence[RunEventRecord] | None = None
) -> str:
    """The payload saying that the run changed and now stands as `state` (JSON values; None:
    not carried), with the `events` the change appended to its log; what would not fit in a
    notice is left out (the events first, then the state: then it says only that the run
    changed)."""
    carried: dict[str, Any] = {} if state is None else {"run": state}
    if events:
        payload = f"{STATE}{run_id} {_json({**carried, 'events': _events_json(events)})}"
        if _fits(payload):
            return payload
    if not carried:
        return run_id
    payload = f"{STATE}{run_id} {_json(carried)}"
    return payload if _fits(payload) else run_id


@dataclass(frozen=True)
class _Said:
    """A payload taken apart: its kind (WORK, HELLO, a one-character prefix, or "" for a bare
    run id), the run it is of ("" for none: work for any worker, a hello), what follows the run
    id (JSON, a delta's text; "" for nothing) and, for a hand-off, the worker it names."""

    kind: str
    run_id: str = ""
    text: str = ""
    worker: str = ""


def _taken_apart(payload: str) -> _Said:
    if payload.startswith(WORK):
        worker, _, handed = payload[len(WORK) :].strip().partition(" ")
        run_id, _, text = handed.partition(" ")
        return _Said(WORK, run_id, text, worker)
    if payload == HELLO:
        return _Said(HELLO)
    kind = payload[:1] if payload[:1] in (STATE, LOG_GREW, DELTA, LEASE, INTEREST) else ""
    run_id, _, text = payload[len(kind) :].partition(" ")
    return _Said(kind, run_id, text)


def _fits(payload: str) -> bool:
    """Whether every transport carries `payload` whole."""
    return len(payload.encode()) <= MAX_NOTICE_BYTES


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _events_json(events: Sequence[RunEventRecord]) -> list[dict[str, Any]]:
    return [
        {
            "seq": event.seq,
            "type": event.type,
            "data": event.data,
            "created_at": event.created_at.isoformat(),
        }
        for event in events
    ]


def _events_from(run_id: str, carried: Any) -> list[RunEventRecord] | None:
    """The events a notice carried, or None when it carried none (or not in their shape)."""
    if not isinstance(carried, list) or not carried:
        return None
    try:
        events = [
            RunEventRecord(
                run_id,
                int(item["seq"]),
                str(item["type"]),
                dict(item["data"]),
                datetime.fromisoformat(item["created_at"]),
            )
            for item in carried
        ]
    except (KeyError, TypeError, ValueError):
        logger.warning("the events carried by a notice of run %s were malformed; dropped", run_id)
        return None
    ordered = all(b.seq == a.seq + 1 for a, b in itertools.pairwise(events))
    return events if ordered else None


class RunChanged(asyncio.Event):
    """Set whenever the watched run changes; `state` is the run as the last change left it
    when its notice carried that (`changed_to`), else None (read it)."""

    def __init__(self) -> None:
        super().__init__()
        self.state: dict[str, Any] | None = None
        # How many changes were delivered since the watch opened.
        self.changes = 0

    def changed(self, state: dict[str, Any] | None) -> None:
        self.state = state
        self.changes += 1
        self.set()

    def take_state(self) -> dict[str, Any] | None:
        """The carried state, once: the next wake-up carries its own or none."""
        state, self.state = self.state, None
        return state


# What woke a follower: a text delta (a dict), events appended to the run's log as their
# notice carried them (a list, in order), or None where the log grew and it must be read.
Arrival = dict[str, Any] | list[RunEventRecord] | None


@dataclass(eq=False)
class Follower:
    """What woke a stream following a run, in the order it arrived (`Arrival`): a delta sent
    before a write is seen before that write's events. It starts with one `None`: the log is
    read first."""

    wake: asyncio.Event = field(default_factory=asyncio.Event)
    arrivals: list[Arrival] = field(default_factory=lambda: [None])
    # The run as the last status notice carried it (`changed_to`), or None.
    state: dict[str, Any] | None = None

    def take(self) -> list[Arrival]:
        arrivals, self.arrivals = self.arrivals, []
        return arrivals

    def changed(
        self, state: dict[str, Any] | None, events: list[RunEventRecord] | None = None
    ) -> None:
        self.state = state
        self.log_grew(events)

    def log_grew(self, events: list[RunEventRecord] | None = None) -> None:
        """The log grew by `events` (None: by events not known here, to be read)."""
        if not self.arrivals or self.arrivals[-1] is not None:
            # A read still to come sees these events too: they need no place of their own.
            if events is not None and len(self.arrivals) < MAX_PENDING_ARRIVALS:
                self.arrivals.append(events)
            else:
                self.arrivals.append(None)
        self.wake.set()

    def delta(self, delta: dict[str, Any]) -> None:
        # Ephemeral: a follower that fell far behind drops text (its messages hold it whole).
        if len(self.arrivals) < MAX_PENDING_ARRIVALS:
            self.arrivals.append(delta)
        self.wake.set()


class HandOffs(Protocol):
    """Where the runs handed to a worker arrive (`RunEvents.serve_work`, `engine.handoffs`)."""

    def hand(self, run_id: str, carried: dict[str, Any] | None) -> None:
        """`run_id` was handed to the worker, as its notice carried it (JSON values,
        `store.run_state.handed_run_state`) or None."""

    def changed(self, run_id: str) -> None:
        """A run changed (its status or its lease): a run handed over before is read."""


class RunEvents(Protocol):
    """A swappable fan-out of run changes."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def publish(self, run_id: str) -> None:
        """The run changed (status, lease, cancellation)."""

    async def publish_log(self, run_id: str) -> None:
        """The run's event log grew, and nothing else of it changed."""

    async def publish_lease(self, run_id: str) -> None:
        """Only the run's lease changed (a worker took it back): its log did not grow."""

    async def publish_delta(self, run_id: str, delta: dict[str, Any]) -> None:
        """Ephemeral: a piece of a message's text, for the run's followers only."""

    async def announce_work(self) -> None:
        """A run needs a worker."""

    def serve_work(self, worker: str, handed: HandOffs) -> contextlib.AbstractContextManager[None]:
        """While open, a run handed to `worker` (`handed_to`) is given to `handed`, and so is
        every change of a run's status or lease heard afterwards (a worker with no room takes
        a run up once it has; its short lease may lapse to another worker's claim
        meanwhile)."""

    def notices(self, *payloads: str) -> list[tuple[str, str]]:
        """What a write should send in its own transaction for the other processes to hear of
        `payloads` when it commits (PostgreSQL's NOTIFY, no transaction of its own; on SQLite
        the writer's thread sends them after the COMMIT, `SocketRunEvents.send_from_writer`):
        on one channel, each payload after the same prefix; empty where a write cannot carry
        them."""

    async def committed(self, *payloads: str) -> None:
        """A write that carried `notices(*payloads)` committed: deliver them in this process,
        and to the others where the write could not carry them."""

    def writing(self, run_id: str) -> contextlib.AbstractContextManager[None]:
        """While open (around a write of the run and its `committed`), what this process hears
        of the run from the others waits, and is delivered after the write's own notices: a
        worker's text deltas, say, come after the status change whose notice started it."""

    def watch(
        self, run_id: str, leases: bool = False
    ) -> contextlib.AbstractAsyncContextManager[RunChanged]:
        """An event set whenever the run changes while the context is open; with `leases`, also
        when only its lease moves (what a worker guarding its run must hear of)."""

    def wake_watchers(self) -> None:
        """Wake every watch of a run in this process (not the lease watches of workers), as a
        change would: the server is stopping, and its waits answer now."""

    def follow(self, run_id: str) -> contextlib.AbstractAsyncContextManager[Follower]:
        """A follower woken whenever the run changes, its log grows or a delta arrives; the
        processes are told that the run is followed."""

    async def announce_interest(self, run_id: str) -> None:
        """Tell every process again that a stream follows the run (one may have started)."""

    def followed(self, run_id: str) -> bool:
        """Whether a stream follows the run, here or (lately) in another process."""

    async def wait_for_work(self, timeout: float) -> bool:
        """Return when work is announced for this process's worker (True; at once when it was
        since the last wait returned), or after `timeout` seconds (False)."""


class LocalRunEvents:
    """Events within one process."""

    def __init__(self) -> None:
        self._watchers: defaultdict[str, set[RunChanged]] = defaultdict(set)
        self._lease_watchers: defaultdict[str, set[RunChanged]] = defaultdict(set)
        self._followers: defaultdict[str, set[Follower]] = defaultdict(set)
        # Runs that streams of other processes follow, and when this one last heard of it; runs
        # its own streams follow, and when it last said so.
        self._interest: dict[str, float] = {}
        self._announced: dict[str, float] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._work = asyncio.Event()
        # This process's workers, by name: what takes the runs handed to each.
        self._workers: dict[str, HandOffs] = {}
        # Runs this process is writing (`writing`): what it heard of each from the others
        # meanwhile, held until the write's own notices were delivered.
        self._held: dict[str, list[str]] = {}

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def hear(self, payload: str) -> None:
        """Deliver what another process said, unless it is of a run this process is writing
        (`writing`): that waits for the write's own notices."""
        held = self._held.get(_taken_apart(payload).run_id) if self._held else None
        if held is not None:
            held.append(payload)
            return
        self.deliver(payload)

    @contextlib.contextmanager
    def writing(self, run_id: str) -> Iterator[None]:
        if run_id in self._held:  # another write of the run in flight: that one holds
            yield
            return
        held = self._held[run_id] = []
        try:
            yield
        finally:
            del self._held[run_id]
            for payload in held:
                self.deliver(payload)

    def deliver(self, payload: str) -> None:
        said = _taken_apart(payload)
        run_id, text = said.run_id, said.text
        if said.kind == WORK:
            self._deliver_work(said)
        elif said.kind == DELTA:
            self._deliver_delta(run_id, text)
        elif said.kind == INTEREST:
            self._note_interest(run_id)
        elif said.kind == HELLO:
            # A process that started after our streams did has not heard of them.
            self._in_background(self._tell_interests())
        elif said.kind == LEASE:
            self._tell_workers(run_id)
            for event in self._lease_watchers.get(run_id, ()):
                event.set()
        elif said.kind == STATE:
            self._deliver_change(run_id, *self._carried(run_id, text))
        elif said.kind == LOG_GREW:
            followers = self._followers.get(run_id, ())
            events = (
                _events_from(run_id, self._json_of(run_id, text)) if followers and text else None
            )
            for follower in followers:
                follower.log_grew(events)
        else:
            self._deliver_change(run_id, None, None)

    def _deliver_work(self, said: _Said) -> None:
        if not said.worker:
            self._work.set()
            return
        hand_offs = self._workers.get(said.worker)
        if hand_offs is None:
            return  # another process's worker
        carried = self._json_of(said.run_id, said.text) if said.text else None
        hand_offs.hand(said.run_id, carried if isinstance(carried, dict) else None)

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _tell_workers(self, run_id: str) -> None:
        for hand_offs in self._workers.values():
            hand_offs.changed(run_id)

    def _deliver_change(
        self,
        run_id: str,
        state: dict[str, Any] | None,
        events: list[RunEventRecord] | None,
    ) -> None:
        self._tell_workers(run_id)
        for event in (*self._watchers.get(run_id, ()), *self._lease_watchers.get(run_id, ())):
            event.changed(state)
        for follower in self._followers.get(run_id, ()):
            follower.changed(state, events)

    def _carried(
        self, run_id: str, text: str
    ) -> tuple[dict[str, Any] | None, list[RunEventRecord] | None]:
        """The run's state and the events a `changed_to` notice carried (None for either it
        did not, or where nobody here would use them)."""
        followed = bool(self._followers.get(run_id))
        if not self._watchers.get(run_id) and not followed:
            return None, None
        carried = self._json_of(run_id, text)
        if not isinstance(carried, dict):
            return None, None
        state = carried.get("run")
        events = _events_from(run_id, carried.get("events")) if followed else None
        return (state if isinstance(state, dict) else None), events

    def _json_of(self, run_id: str, text: str) -> Any:
        try:
            return json.loads(text)
        except ValueError:
            logger.warning("what a notice of run %s carried was not JSON; dropped", run_id)
            return None

    def _deliver_delta(self, run_id: str, text: str) -> None:
        followers = self._followers.get(run_id)
        if not followers:
            return
        try:
            delta = json.loads(text)
        except ValueError:
            logger.warning("a text delta of run %s was not JSON; dropped", run_id)
            return
        for follower in followers:
            follower.delta(delta)

    def _note_interest(self, run_id: str) -> None:
        now = time.monotonic()
        self._interest[run_id] = now
        if len(self._interest) > 10_000:
            cutoff = now - INTEREST_SECONDS
            self._interest = {r: t for r, t in self._interest.items() if t > cutoff}

    def followed(self, run_id: str) -> bool:
        if self._followers.get(run_id):
            return True
        heard = self._interest.get(run_id)
        return heard is not None and time.monotonic() - heard < INTEREST_SECONDS

    async def announce_interest(self, run_id: str) -> None:
        now = time.monotonic()
        if now - self._announced.get(run_id, -REANNOUNCE_SECONDS) < REANNOUNCE_SECONDS:
            return
        self._announced[run_id] = now
        await self._send(INTEREST + run_id)

    async def _tell_interests(self) -> None:
        for run_id in list(self._followers):
            self._announced[run_id] = time.monotonic()
            await self._send(INTEREST + run_id)

    async def _send(self, payload: str) -> None:
        """Carry the payload to the other processes (none here)."""
        return None

    async def _publish(self, payload: str) -> None:
        self.deliver(payload)
        await self._send(payload)

    async def publish(self, run_id: str) -> None:
        await self._publish(run_id)

    async def publish_log(self, run_id: str) -> None:
        await self._publish(log_grew(run_id))

    async def publish_lease(self, run_id: str) -> None:
        await self._publish(lease_moved(run_id))

    async def publish_delta(self, run_id: str, delta: dict[str, Any]) -> None:
        text = json.dumps(delta, ensure_ascii=False, separators=(",", ":"))
        await self._publish(f"{DELTA}{run_id} {text}")

    async def announce_work(self) -> None:
        await self._publish(WORK)

    @contextlib.contextmanager
    def serve_work(self, worker: str, handed: HandOffs) -> Iterator[None]:
        self._workers[worker] = handed
        try:
            yield
        finally:
            # Unless a later worker of the same name took the name over meanwhile.
            if self._workers.get(worker) is handed:
                del self._workers[worker]

    def notices(self, *payloads: str) -> list[tuple[str, str]]:
        return []

    async def committed(self, *payloads: str) -> None:
        for payload in payloads:
            await self._publish(payload)

    @contextlib.asynccontextmanager
    async def watch(self, run_id: str, leases: bool = False) -> AsyncIterator[RunChanged]:
        event = RunChanged()
        watchers = self._lease_watchers if leases else self._watchers
        watchers[run_id].add(event)
        try:
            yield event
        finally:
            watchers[run_id].discard(event)
            if not watchers[run_id]:
                del watchers[run_id]

    def wake_watchers(self) -> None:
        for watchers in list(self._watchers.values()):
            for event in watchers:
                event.changed(None)

    @contextlib.asynccontextmanager
    async def follow(self, run_id: str) -> AsyncIterator[Follower]:
        follower = Follower()
        first = not self._followers.get(run_id)
        self._followers[run_id].add(follower)
        try:
            if first:
                await self.announce_interest(run_id)
            yield follower
        finally:
            self._followers[run_id].discard(follower)
            if not self._followers[run_id]:
                del self._followers[run_id]
                self._announced.pop(run_id, None)

    async def wait_for_work(self, timeout: float) -> bool:
        if not self._work.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._work.wait(), timeout)
        announced = self._work.is_set()
        self._work.clear()
        return announced


class PostgresRunEvents(LocalRunEvents):
    """Local fan-out fed by a LISTEN connection, so events cross processes and machines."""

    def __init__(self, dsn: str) -> None:
        super().__init__()
        self.dsn = dsn
        self._listener: asyncio.Task[None] | None = None
        # Resolved when the listener should stop; failed when its connection broke.
        self._hearing: asyncio.Future[None] | None = None
        self._sender: psycopg.AsyncConnection[object] | None = None
        self._ready = asyncio.Event()
        self._send_lock = asyncio.Lock()
        self._stopped = False
        # Marks this process's notices, which it has delivered already when it sent them.
        self._origin = uuid.uuid4().hex[:12]

    async def start(self) -> None:
        self._listener = asyncio.create_task(self._listen(), name="juru-run-events")
        await asyncio.wait_for(self._ready.wait(), timeout=30)
        await self._send(HELLO)

    async def stop(self) -> None:
        self._stopped = True
        if self._hearing is not None and not self._hearing.done():
            self._hearing.set_result(None)
        if self._listener is not None:
            done, _ = await asyncio.wait([self._listener], timeout=STOP_SECONDS)
            if not done:
                logger.warning("run event listener did not stop in time; cancelling it")
                self._listener.cancel()
                await asyncio.wait([self._listener], timeout=STOP_SECONDS)
        sender, self._sender = self._sender, None
        if sender is not None:
            with contextlib.suppress(psycopg.Error, TimeoutError):
                await asyncio.wait_for(sender.close(), STOP_SECONDS)

    async def _listen(self) -> None:
        while not self._stopped:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.dsn, autocommit=True
                ) as connection:
                    await connection.execute(f"LISTEN {CHANNEL}")
                    await self._hear(connection)
            except psycopg.Error:
                if self._stopped:
                    return
                logger.exception("run event listener lost its connection; reconnecting")
                await asyncio.sleep(1)

    async def _hear(self, connection: psycopg.AsyncConnection[Any]) -> None:
        """Deliver the notices of the LISTEN `connection` as they arrive, until `stop()`;
        raises the connection's error when it breaks. The event loop calls back when the
        socket is readable (libpq's own notification interface): no task or timer per
        notice, and no polling."""
        loop = asyncio.get_running_loop()
        pgconn, encoding = connection.pgconn, connection.info.encoding
        hearing = self._hearing = loop.create_future()

        def readable() -> None:
            try:
                pgconn.consume_input()
            except psycopg.Error as error:
                if not hearing.done():
                    hearing.set_exception(error)
                return
            while (notice := pgconn.notifies()) is not None:
                origin, _, payload = notice.extra.decode(encoding).partition("|")
                if origin != self._origin:  # our own were delivered at once
                    self.hear(payload)

        socket = pgconn.socket
        loop.add_reader(socket, readable)
        try:
            self._ready.set()
            # After a reconnect, anything may have happened: wake every waiter.
            for run_id in {*self._watchers, *self._lease_watchers, *self._followers}:
                self.deliver(run_id)
            self.deliver(WORK)
            readable()  # anything libpq read along with the LISTEN's answer
            if not self._stopped:
                await hearing
        finally:
            loop.remove_reader(socket)

    def notices(self, *payloads: str) -> list[tuple[str, str]]:
        return [(CHANNEL, f"{self._origin}|{payload}") for payload in payloads]

    async def committed(self, *payloads: str) -> None:
        for payload in payloads:
            self.deliver(payload)  # the transaction's NOTIFY told the other processes

    async def _send(self, payload: str) -> None:
        async with self._send_lock:
            if self._stopped:
                return
            try:
                if self._sender is None or self._sender.closed:
                    self._sender = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
                notice = f"{self._origin}|{payload}"
                await self._sender.execute("SELECT pg_notify(%s, %s)", (CHANNEL, notice))
            except psycopg.Error:
                logger.exception("could not send a run event")
                if self._sender is not None:
                    await self._sender.close()
                self._sender = None
