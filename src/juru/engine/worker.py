"""Workers: claim runs, execute them under a lease, and reap runs past their time."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from datetime import datetime, timedelta

from juru.core.states import RunStatus
from juru.engine.execution import RunContext, RunExecution
from juru.engine.handoffs import HandedRuns
from juru.engine.machine import RunMachine
from juru.store.leases import release_leases_of
from juru.store.outage import OUTAGE_ERRORS, is_outage
from juru.store.records import RunRecord
from juru.store.run_log import prune_events
from juru.store.runs import overdue_runs

logger = logging.getLogger(__name__)
IDLE_POLL_SECONDS = 2.0
REAP_EVERY_SECONDS = 5.0
PRUNE_EVENTS_EVERY = timedelta(hours=1)


def worker_name(stable_name: str | None = None) -> str:
    """A name for this process's worker: under `stable_name` when there is one, else unique."""
    if stable_name is not None:
        return f"{stable_name}/{os.getpid()}"
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


async def take_back_runs(machine: RunMachine, owner_prefix: str) -> list[str]:
    """Free the runs leased under `owner_prefix` (a previous, dead incarnation) for claiming
    now rather than once their leases expire; wake their watchers and the workers."""
    released = await release_leases_of(machine.engine, owner_prefix, machine.clock.now())
    for run_id in released:
        logger.info("took back run %s from a previous process of %s", run_id, owner_prefix)
        await machine.events.publish(run_id)
    if released:
        await machine.events.announce_work()
    return released


class Worker:
    """Runs up to `concurrency` runs at once until cancelled."""

    def __init__(self, context: RunContext, concurrency: int, name: str | None = None) -> None:
        self.context = context
        self.machine = context.machine
        self.concurrency = concurrency
        self.name = name or worker_name()
        self._running: set[asyncio.Task[None]] = set()
        # The runs this worker is executing, by id: the latest execution of each, and its task.
        self._executing: dict[str, tuple[RunExecution, asyncio.Task[None]]] = {}
        # Runs handed to this worker by the writes that resumed them, not yet taken up.
        self.handed = HandedRuns()
        # When this worker last claimed (its poll claims again `IDLE_POLL_SECONDS` after).
        self._claimed_at = 0.0

    def has_room(self) -> bool:
        """Whether the worker could start another run now."""
        return len(self._running) < self.concurrency

    def serving(self) -> contextlib.AbstractContextManager[None]:
        """While open, the runs handed to this worker's name (`handed_to`) reach it: the next
        `fill_slots` takes them up."""
        return self.machine.events.serve_work(self.name, self.handed)

    async def run_forever(self) -> None:
        try:
            with self.serving():
                await self._serve()
        finally:
            await self._stop_runs()

    async def _serve(self) -> None:
        claim = True
        while True:
            try:
                await self.fill_slots(claim)
            except Exception as error:
                # The database may be restarting: keep the worker alive and try again.
                if not is_outage(error):
                    logger.exception("worker %s could not claim runs", self.name)
                else:
                    logger.warning("worker %s: the database is not answering", self.name)
            claim = await self._wait_for_work()

    async def _wait_for_work(self) -> bool:
        """Wait for work: True when a claim should follow (work announced for any worker, or
        the poll's time come, `IDLE_POLL_SECONDS` after the last claim: a wake-up may have been
        lost, a lease may have lapsed), False when only runs handed to this worker came (they
        need no claim). A worker kept busy by handed runs still polls on time."""
        poll_in = self._claimed_at + IDLE_POLL_SECONDS - time.monotonic()
        if poll_in <= 0:
            await self.machine.events.wait_for_work(0)  # what it announced is claimed now
            self.handed.wake.clear()  # and the handed runs are taken up first
            return True
        announced = asyncio.ensure_future(self.machine.events.wait_for_work(poll_in))
        handed = asyncio.ensure_future(self.handed.wake.wait())
        await asyncio.wait({announced, handed}, return_when=asyncio.FIRST_COMPLETED)
        handed.cancel()
        self.handed.wake.clear()
        if announced.done():
            return True
        announced.cancel()
        return False

    async def fill_slots(self, claim: bool = True) -> int:
        """Take up the runs handed to this worker, then (with `claim`) claim runs while there
        are free slots; return how many were started."""
        started = 0
        if claim:
            # The poll's clock starts here, whether the claim is made (a full worker makes
            # none) or fails: no busy loop.
            self._claimed_at = time.monotonic()
        if self.handed and self.has_room():
            started += await self._take_up()
        while claim and (free := self.concurrency - len(self._running)) > 0:
            claimed = await self.machine.claim(self.name, free)
            started += sum(self._start(run) for run in claimed)
            if len(claimed) < free:
                break
        return started

    async def _take_up(self) -> int:
        """Start the runs handed to this worker (each leased to it by the write that resumed
        it), as many as it has room for: those their notices carried, as they carried them
        (`engine.handoffs`), and those still running under that lease of the others, read in
        one go. A run that ended before it was read gives back the pre-hold it was resumed
        with (`transition_run` leaves it to the lease holder), unless another worker claimed
        it since, or an execution of this worker has it. Returns how many were started."""
        taken = self.handed.take(self.concurrency - len(self._running), self.machine.clock.now())
        started = sum(self._start(run) for run in taken.carried)
        for run in await self.machine.handed_runs(taken.to_read):
            if run.status == RunStatus.RUNNING and run.lease_owner == self.name:
                started += self._start(run)
            elif (
                RunStatus(run.status).is_terminal
                and run.hold_id
                and run.last_worker == self.name
                and run.id not in self._executing
            ):
                await self.context.meter.release(run.account_id, [run.hold_id])
        return started

    def _start(self, run: RunRecord) -> bool:
        """Execute a run this worker now holds the lease of; False when it already does."""
        current = self._executing.get(run.id)
        if current is not None and current[0].run.pause_count == run.pause_count:
            # Its lease lapsed while this worker executed it (the database was down): the
            # claim renewed the lease of the execution that is still going on. A second
            # execution under the same name would pass every lease check too.
            logger.info("worker %s took back its own run %s; it goes on", self.name, run.id)
            return False
        # With `current`, the run paused in that execution and was resumed before the
        # execution had ended: the new one starts when the old one has.
        logger.info("worker %s took run %s (attempt %d)", self.name, run.id, run.attempts)
        execution = RunExecution(self.context, run, self.name)
        previous = None if current is None else current[1]
        task = asyncio.create_task(self._execute(execution, previous), name=f"run {run.id}")
        self._running.add(task)
        self._executing[run.id] = (execution, task)
        return True

    async def _execute(
        self, execution: RunExecution, previous: asyncio.Task[None] | None = None
    ) -> None:
        """Execute the run, once `previous` (this worker's last execution of it) has ended."""
        try:
            if previous is not None:
                await asyncio.wait({previous})
            await execution.execute()
        except asyncio.CancelledError:
            with contextlib.suppress(*OUTAGE_ERRORS):
                await self.machine.release_lease(execution.run, self.name)
            raise
        except Exception as error:
            if is_outage(error):
                # Not the run's failure: it stays running and resumes once its lease lapses.
                logger.warning("run %s stopped: the database is not answering", execution.run.id)
                return
            # The run's error is public: the details (SQL, say) go to the log under a reference.
            reference = uuid.uuid4().hex[:12]
            logger.exception(
                "run %s crashed in worker %s (ref %s)", execution.run.id, self.name, reference
            )
            with contextlib.suppress(Exception):
                await self.machine.fail(
                    execution.run,
                    f"internal error (ref {reference}): the server log has the details",
                    worker=self.name,
                )
        finally:
            was_full = not self.has_room()
            self._running.discard(asyncio.current_task())
            latest = self._executing.get(execution.run.id)
            if latest is not None and latest[0] is execution:
                del self._executing[execution.run.id]
            if was_full:
                # A slot is free again: this worker may take a run it had to leave waiting.
                await self.machine.events.announce_work()

    async def drain(self) -> None:
        """Wait until every run started so far has stopped (tests and shutdown)."""
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)

    async def stop(self) -> None:
        """Cancel the runs in progress (their leases are released for other workers)."""
        await self._stop_runs()

    async def _stop_runs(self) -> None:
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*list(self._running), return_exceptions=True)


class Reaper:
    """Expires runs left waiting too long, fails runs past their wall clock, and gives back
    the balance holds of processes that died before settling them."""

    def __init__(self, context: RunContext) -> None:
        self.machine = context.machine
        self.meter = context.meter
        self.pruned_at: datetime | None = None

    async def reap_once(self) -> int:
        """One sweep; returns how many runs it ended. Once an hour it also deletes the event
        logs of runs that finished more than `events_days` ago."""
        now = self.machine.clock.now()
        if self.pruned_at is None or now - self.pruned_at >= PRUNE_EVENTS_EVERY:
            self.pruned_at = now
            retention = timedelta(days=self.machine.limits.events_days)
            await prune_events(self.machine.engine, now - retention)
        cutoff = now - timedelta(seconds=self.machine.limits.waiting_seconds)
        ended = 0
        for run in await overdue_runs(self.machine.engine, now, cutoff):
            if run.status == RunStatus.REQUIRES_ACTION:
                ended += await self.machine.expire(run, cutoff) is not None
            else:
                ended += await self.machine.time_out(run) is not None
        await self.meter.release_expired()
        return ended

    async def run_forever(self) -> None:
        while True:
            try:
                await self.reap_once()
            except Exception as error:
                if not is_outage(error):
                    logger.exception("reaper sweep failed")
                else:
                    logger.warning("reaper: the database is not answering")
            await asyncio.sleep(REAP_EVERY_SECONDS)
