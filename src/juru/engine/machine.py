"""Every run status change goes through `RunMachine`: one conditional write, then an event."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from juru.core.clock import Clock
from juru.core.money import PriceRules
from juru.core.states import ACTIVE, FailureReason, RunStatus
from juru.engine.events import (
    WORK,
    RunEvents,
    changed_to,
    handed_to,
    lease_moved,
    log_grew,
)
from juru.store import run_tree
from juru.store import runs as run_store
from juru.store import steps as step_store
from juru.store.database import Database
from juru.store.holds import Hold
from juru.store.records import RunRecord
from juru.store.run_log import RunEventRecord
from juru.store.run_state import handed_run_state, run_state
from juru.store.runs import RunGuard
from juru.store.steps import StatusChange, StepWrite
from juru.store.transactions import Notice


@dataclass(frozen=True)
class RunLimits:
    """Time limits of runs (section 6 of the hosted-agents document, and the engine's lease)."""

    wall_clock_seconds: float = 600.0
    waiting_seconds: float = 3600.0
    lease_seconds: float = 30.0
    # The lease a resumed run is handed to the worker that paused it with: short, so that a
    # worker gone since (or too busy to take it up) holds it no longer than this. The worker
    # renews it before it lapses (`RunExecution._guard_lease`).
    handoff_seconds: float = 5.0
    # How long a finished run's event log is kept.
    events_days: float = 30.0

    def handoff(self) -> float:
        """The hand-off's lease: `handoff_seconds`, or the whole lease when that is shorter."""
        return min(self.handoff_seconds, self.lease_seconds)


def _active_time_so_far(run: RunRecord, now: datetime) -> float:
    if run.active_since is None:
        return run.active_seconds
    return run.active_seconds + (now - run.active_since).total_seconds()


class RunMachine:
    """The run state machine on the database: legal edges only, each one atomic."""

    def __init__(
        self, engine: Database, events: RunEvents, clock: Clock, limits: RunLimits
    ) -> None:
        self.engine = engine
        self.events = events
        self.clock = clock
        self.limits = limits

    def new_run_values(self) -> dict[str, Any]:
        """The clock fields of a run that is queued now."""
        now = self.clock.now()
        return {
            "active_seconds": 0.0,
            "active_since": now,
            "deadline_at": now + timedelta(seconds=self.limits.wall_clock_seconds),
            "created_at": now,
            "updated_at": now,
        }

    async def _move(
        self,
        run_id: str,
        sources: Collection[RunStatus],
        target: RunStatus,
        values: dict[str, Any] | None = None,
        guard: RunGuard | None = None,
        *,
        hold: Hold | None = None,
        release_unclaimed_hold: bool = False,
        work: bool = False,
        hand_to: str | None = None,
    ) -> RunRecord | None:
        # The move's own transaction tells the other processes (and, with `work`, the workers:
        # any of them, or with `hand_to` the one it hands the run to, with the run as it leaves
        # it), carrying the status event it appended for the run's streams; this process hears
        # of it once it committed.
        payloads = [run_id, WORK] if work else [run_id]
        ended_below: list[str] = []

        def notices_of(
            run: Mapping[str, Any], appended: Sequence[RunEventRecord] | None
        ) -> list[Notice]:
            payloads[0] = changed_to(run_id, None, self._for_streams(run_id, appended))
            if work and hand_to is not None:
                payloads[1] = handed_to(hand_to, run_id, handed_run_state(run))
            return self.events.notices(*payloads)

        # What this process hears of the run meanwhile (a worker the move hands it to, say,
        # streaming its call) is delivered after the move's own notices.
        with self.events.writing(run_id):
            moved = await run_store.transition_run(
                self.engine,
                run_id,
                sources,
                target,
                self.clock.now(),
                values,
                guard,
                hold=hold,
                release_unclaimed_hold=release_unclaimed_hold,
                notices_of=notices_of,
                handing=hand_to is not None,
                ended_below=ended_below,
                wall_clock_seconds=self.limits.wall_clock_seconds,
            )
            if moved is not None:
                await self.events.committed(*payloads)
        if moved is not None:
            # The runs it started ended with it (their workers stop at once), and ancestors
            # that showed its calls changed.
            for child_id in ended_below:
                await self.events.publish(child_id)
            if target.is_terminal and moved.parent_run_id is not None:
                await self.events.announce_work()  # its parent may go on
        return moved

    def _for_streams(
        self, run_id: str, appended: Sequence[RunEventRecord] | None
    ) -> Sequence[RunEventRecord] | None:
        """The events a write appended, for its notice to carry when a stream follows the run
        (here or, as far as this process heard, in another one); None otherwise: a stream
        this process has not heard of reads them."""
        return appended if appended and self.events.followed(run_id) else None

    def _ended(self, **values: Any) -> dict[str, Any]:
        now = self.clock.now()
        return {
            "finished_at": now,
            "lease_owner": None,
            "lease_expires_at": None,
            "deadline_at": None,
            "pending_tool_calls": None,
            "tool_outputs": None,
            **values,
        }

    def pausing(
        self, run: RunRecord, pending: list[dict[str, str]], step_count: int
    ) -> StatusChange:
        """running → requires_action: the caller must execute `pending` tool calls."""
        now = self.clock.now()
        values = {
            "pending_tool_calls": pending,
            "tool_outputs": None,
            "pause_count": run.pause_count + 1,
            "step_count": step_count,
            "lease_owner": None,
            "lease_expires_at": None,
            "active_seconds": _active_time_so_far(run, now),
            "active_since": None,
            "deadline_at": None,
            "waiting_since": now,
        }
        return StatusChange({RunStatus.RUNNING}, RunStatus.REQUIRES_ACTION, values)

    def succeeding(self, output: str, step_count: int) -> StatusChange:
        values = self._ended(output=output, step_count=step_count)
        return StatusChange({RunStatus.RUNNING}, RunStatus.SUCCEEDED, values)

    def failing(self, error: str, step_count: int | None = None) -> StatusChange:
        values = self._ended(error=error)
        if step_count is not None:
            values["step_count"] = step_count
        return StatusChange({RunStatus.RUNNING}, RunStatus.FAILED, values)

    async def record_step(self, step: StepWrite, rules: PriceRules) -> bool:
        """A step's effects in one transaction (`store.steps.record_step`); False when the run
        is no longer the worker's. Wakes the run's watchers when its status changed, and its
        followers in any case (the step added to its log)."""
        payloads = [step.run_id if step.status is not None else log_grew(step.run_id)]
        pauses = step.status is not None and step.status.target == RunStatus.REQUIRES_ACTION
        # A pause shows its calls on the ancestors too (a status change), else their logs grew.
        payloads += [a if pauses else log_grew(a) for a in step.ancestors]
        ends = step.status is not None and step.status.target.is_terminal
        if step.children or (ends and step.ancestors):
            payloads.append(WORK)  # children to start, or a parent that may go on

        def notices_of(
            run: Mapping[str, Any], appended: Sequence[RunEventRecord] | None
        ) -> list[Notice]:
            # What its `?wait=` waiters answer with, and what its streams send: neither need
            # read the run or its log again.
            carried = self._for_streams(step.run_id, appended)
            if step.status is None:
                payloads[0] = log_grew(step.run_id, carried)
            else:
                payloads[0] = changed_to(step.run_id, run_state(run), carried)
            return self.events.notices(*payloads)

        with self.events.writing(step.run_id):
            recorded = await step_store.record_step(self.engine, step, rules, notices_of)
            if recorded:
                await self.events.committed(*payloads)
        return recorded

    async def submit_tool_outputs(
        self, run: RunRecord, outputs: dict[str, str], hold: Hold | None = None
    ) -> RunRecord | None:
        """requires_action → running with the caller's outputs, leased in the same write to the
        worker that paused it for `limits.handoff()`, after which any worker may claim it;
        with `hold` (the next call's pre-hold) taken in the same write when it fits. Told by
        the write's notice, the worker takes the run up without a claim of its own: as the
        notice carried it, or where it did not fit as `handed_runs` reads it."""
        now = self.clock.now()
        remaining = self.limits.wall_clock_seconds - run.active_seconds
        values: dict[str, Any] = {
            "tool_outputs": outputs,
            "pending_tool_calls": None,
            "active_since": now,
            "deadline_at": now + timedelta(seconds=remaining),
            "waiting_since": None,
            "lease_owner": None,
            "lease_expires_at": None,
        }
        if run.last_worker is not None:
            # Counted as a claim would count it (no claim comes between a pause and its
            # resume: the pause count guards the write).
            values.update(
                lease_owner=run.last_worker,
                lease_expires_at=now + timedelta(seconds=self.limits.handoff()),
                attempts=run.attempts + 1,
            )
        return await self._move(
            run.id,
            {RunStatus.REQUIRES_ACTION},
            RunStatus.RUNNING,
            values,
            RunGuard(pause_count=run.pause_count),
            hold=hold,
            work=True,
            hand_to=run.last_worker,
        )

    async def handed_runs(self, run_ids: Sequence[str]) -> list[RunRecord]:
        """The runs handed to a worker (`submit_tool_outputs`), as they stand now."""
        return await run_store.handed_runs(self.engine, run_ids)

    async def submit_through_children(
        self, run: RunRecord, outputs: dict[str, str]
    ) -> list[str] | None:
        """requires_action → running for `run` and the runs below it whose client tool calls
        it shows, each of those with its own outputs (`store.run_tree`); None if `run` no
        longer waits for them."""
        moved = await run_tree.resume_through_children(
            self.engine, run, outputs, self.clock.now(), self.limits.wall_clock_seconds
        )
        if moved is not None:
            for run_id in moved:
                await self.events.publish(run_id)
            await self.events.announce_work()
        return moved

    async def succeed(
        self, run: RunRecord, worker: str, output: str, step_count: int
    ) -> RunRecord | None:
        change = self.succeeding(output, step_count)
        guard = RunGuard(held_by=worker)
        return await self._move(run.id, change.sources, change.target, change.values, guard)

    async def fail(
        self,
        run: RunRecord,
        error: str,
        *,
        worker: str | None = None,
        step_count: int | None = None,
        sources: Collection[RunStatus] = (RunStatus.RUNNING,),
    ) -> RunRecord | None:
        """Fail the run (by its worker when `worker` is given, else from any of `sources`)."""
        change = self.failing(error, step_count)
        guard = RunGuard(held_by=worker) if worker is not None else None
        return await self._move(run.id, sources, RunStatus.FAILED, change.values, guard)

    async def cancel(self, run_id: str) -> RunRecord | None:
        """Any active status → cancelled; None if the run had already ended."""
        return await self._move(
            run_id, ACTIVE, RunStatus.CANCELLED, self._ended(), release_unclaimed_hold=True
        )

    async def expire(self, run: RunRecord, waiting_cutoff: datetime) -> RunRecord | None:
        return await self._move(
            run.id,
            {RunStatus.REQUIRES_ACTION},
            RunStatus.EXPIRED,
            self._ended(),
            RunGuard(waiting_before=waiting_cutoff),
        )

    async def time_out(self, run: RunRecord) -> RunRecord | None:
        return await self._move(
            run.id,
            {RunStatus.QUEUED, RunStatus.RUNNING},
            RunStatus.FAILED,
            self._ended(error=FailureReason.TIMEOUT.value),
            RunGuard(deadline_before=self.clock.now()),
            release_unclaimed_hold=True,
        )

    async def claim(self, worker: str, limit: int = 1) -> list[RunRecord]:
        """Up to `limit` runs that need a worker, now leased to `worker` (queued → running, or
        a re-claim); fewer than `limit` when no more are waiting."""

        claimed = await run_store.claim_runs(
            self.engine,
            worker,
            self.clock.now(),
            self.limits.lease_seconds,
            limit,
            self._claim_notice(),
        )
        # The claim's own transaction told the other processes; now this one.
        await self.events.committed(*(_claimed(run) for run in claimed))
        return claimed

    def _claim_notice(self) -> run_store.ClaimNotice | None:
        """What a claim's transaction sends for each run it takes, where a write carries the
        events: the notices of `_claimed`'s payloads (each a prefix and the payload)."""
        sent = self.events.notices("", lease_moved(""))
        if not sent:
            return None
        (channel, first), (_, again) = sent
        return run_store.ClaimNotice(channel, first, again)

    async def renew_lease(self, run: RunRecord, worker: str) -> bool:
        return await run_store.renew_lease(
            self.engine, run.id, worker, self.clock.now(), self.limits.lease_seconds
        )

    async def release_lease(self, run: RunRecord, worker: str) -> None:
        """Let another worker take the run at once (this one is shutting down)."""
        await run_store.renew_lease(self.engine, run.id, worker, self.clock.now(), -1.0)
        await self.events.announce_work()


def _claimed(run: RunRecord) -> str:
    """What a claim tells: queued → running (a status change, with its event), or a run taken
    (back) whose lease only moved (its watchers only)."""
    return run.id if run.attempts == 1 else lease_moved(run.id)
