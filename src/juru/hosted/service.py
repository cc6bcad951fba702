"""The Hosted Agents API's operations; routes call exactly one of these each."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time as monotonic_clock
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from functools import partial
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from juru.agents.hosted import bound_tool_schemas, first_prompt
from juru.billing.access import bearer_secret
from juru.billing.meter import Meter, input_token_bound
from juru.core.errors import ConflictError, GoneError, UnprocessableError, invalid, not_found
from juru.core.ids import new_id
from juru.core.keys import stream_token
from juru.core.states import TERMINAL, RunStatus
from juru.engine.events import WORK, RunChanged
from juru.engine.execution import hosted_thread_key, input_messages
from juru.engine.machine import RunMachine
from juru.hosted.agents import (
    check_agent_tool_targets,
    check_builtin_tools,
    check_mcp_servers,
    check_model,
    check_tool_names,
    find_agent_cycle,
    keep_masked_headers,
)
from juru.hosted.paused_runs import PausedRuns
from juru.hosted.resumed_runs import Resumed, ResumedRuns
from juru.hosted.streams import StreamItem, StreamTicket, follow_run
from juru.models.catalog import ModelCatalog
from juru.store import accounts as account_store
from juru.store import hosted as store
from juru.store import idempotency as idempotency_store
from juru.store import run_log
from juru.store import runs as run_store
from juru.store import transcript as transcript_store
from juru.store import usage as usage_store
from juru.store.holds import Hold
from juru.store.hosted import invalid_cursor
from juru.store.pages import Page, PageRequest
from juru.store.records import (
    AccountRecord,
    AgentRecord,
    RunRecord,
    ThreadRecord,
    TranscriptMessage,
)
from juru.store.run_log import RunEventRecord
from juru.store.run_state import run_from_state
from juru.store.usage import UsageLine
from juru.tools.mcp_toolbox import McpServices

MAX_WAIT_SECONDS = 30.0
# An Idempotency-Key names its run for this long; then the key may start a new run.
IDEMPOTENCY_KEY_TTL = timedelta(hours=24)
SERVER_WORKING = frozenset({RunStatus.QUEUED.value, RunStatus.RUNNING.value})


@dataclass
class HostedService:
    """Agents, threads and runs of one account at a time (every call names the account)."""

    machine: RunMachine
    catalog: ModelCatalog
    checkpointer: BaseCheckpointSaver[Any]
    meter: Meter
    stream_heartbeat_seconds: float = 15.0
    stream_token_seconds: float = 900.0
    mcp: McpServices | None = None
    # Runs this process just showed in requires_action, for the tool outputs that follow.
    paused: PausedRuns = field(default_factory=PausedRuns)
    # Runs this process just resumed, for the `?wait=` that follows.
    resumed: ResumedRuns = field(default_factory=ResumedRuns)
    # The server is stopping: waits answer at once (`stop_waiting`).
    stopping: bool = False

    @property
    def engine(self) -> Any:
        return self.machine.engine

    async def account(self, account_id: str) -> AccountRecord:
        found = await account_store.account_by_id(self.engine, account_id)
        if found is None:
            raise not_found("account", account_id)
        return found

    # Agents

    async def create_agent(self, account_id: str, spec: dict[str, Any]) -> AgentRecord:
        self._check_agent(spec)
        agent_id = new_id("agt")
        await self._check_agent_tools(account_id, agent_id, spec.get("agent_tools") or [])
        spec = {**spec, "mcp_servers": await self._checked_servers(spec.get("mcp_servers"))}
        now = self.machine.clock.now()
        values = {
            **spec,
            "id": agent_id,
            "account_id": account_id,
            "created_at": now,
            "updated_at": now,
        }
        return await store.insert_agent(self.engine, values)

    def _check_agent(self, spec: dict[str, Any]) -> None:
        check_model(self.catalog, spec["model_id"])
        check_builtin_tools(spec["builtin_tools"])
        check_tool_names(spec["tools"], spec["builtin_tools"], spec.get("agent_tools") or [])

    async def _check_agent_tools(
        self, account_id: str, agent_id: str, agent_tools: list[dict[str, Any]]
    ) -> None:
        """400 unless each agent tool names an agent of the account and no agent would end up
        calling itself (directly or through others)."""
        if not agent_tools:
            return
        calls = await store.agent_calls(self.engine, account_id)
        check_agent_tool_targets(agent_tools, calls.keys())
        calls[agent_id] = [tool["agent_id"] for tool in agent_tools]
        cycle = find_agent_cycle(agent_id, calls)
        if cycle is not None:
            raise invalid(
                "agent_tools: the agents would call each other in a cycle: " + " -> ".join(cycle),
                "agent_cycle",
            )

    async def _checked_servers(
        self, servers: list[dict[str, Any]] | None, stored: list[dict[str, Any]] | None = None
    ) -> list[dict[str, Any]]:
        """An agent's MCP servers as stored: absent fields left out, masked header values
        replaced by the stored ones, every server checked."""
        given = [
            {key: value for key, value in server.items() if value is not None}
            for server in servers or []
        ]
        given = keep_masked_headers(given, stored)
        if given:
            if self.mcp is None:
                raise invalid("this server does not run MCP tools", "mcp_unavailable")
            await check_mcp_servers(given, self.mcp)
        return given

    async def agent(self, account_id: str, agent_id: str) -> AgentRecord:
        agent = await store.get_agent(self.engine, account_id, agent_id)
        if agent is None:
            raise not_found("agent", agent_id)
        return agent

    async def agents(self, account_id: str, page: PageRequest) -> Page[AgentRecord]:
        return await store.list_agents(self.engine, account_id, page)

    async def update_agent(
        self, account_id: str, agent_id: str, changes: dict[str, Any]
    ) -> AgentRecord:
        current = await self.agent(account_id, agent_id)
        merged = {
            "model_id": current.model_id,
            "tools": current.tools,
            "builtin_tools": current.builtin_tools,
            "agent_tools": current.agent_tools or [],
            **changes,
        }
        self._check_agent(merged)
        await self._check_agent_tools(account_id, agent_id, merged["agent_tools"])
        if "mcp_servers" in changes:
            servers = await self._checked_servers(changes["mcp_servers"], current.mcp_servers)
            changes = {**changes, "mcp_servers": servers}
        changes = {**changes, "updated_at": self.machine.clock.now()}
        updated = await store.update_agent(self.engine, account_id, agent_id, changes)
        if updated is None:
            raise not_found("agent", agent_id)
        return updated

    async def delete_agent(self, account_id: str, agent_id: str) -> None:
        """Delete the agent, its threads, their runs, transcripts and checkpoints. Its runs
        are cancelled first: a worker stops each one, and a model call already in flight is
        still charged to the account when it returns."""
        await self.agent(account_id, agent_id)
        for run_id in await run_store.active_runs_of_agent(self.engine, account_id, agent_id):
            await self.machine.cancel(run_id)
        thread_ids = await store.delete_agent(self.engine, account_id, agent_id)
        for thread_id in thread_ids:
            await self.checkpointer.adelete_thread(hosted_thread_key(thread_id))

    # Threads

    async def create_thread(
        self, account_id: str, agent_id: str, title: str | None, metadata: dict[str, Any] | None
    ) -> ThreadRecord:
        await self.agent(account_id, agent_id)
        values = {
            "id": new_id("thr"),
            "account_id": account_id,
            "agent_id": agent_id,
            "title": title,
            "metadata": metadata,
            "created_at": self.machine.clock.now(),
        }
        return await store.insert_thread(self.engine, values)

    async def thread(self, account_id: str, thread_id: str) -> ThreadRecord:
        thread = await store.get_thread(self.engine, account_id, thread_id)
        if thread is None:
            raise not_found("thread", thread_id)
        return thread

    async def threads(
        self, account_id: str, agent_id: str, page: PageRequest
    ) -> Page[ThreadRecord]:
        await self.agent(account_id, agent_id)
        return await store.list_threads(self.engine, account_id, agent_id, page)

    async def messages(
        self, account_id: str, thread_id: str, limit: int, after: str | None
    ) -> Page[TranscriptMessage]:
        await self.thread(account_id, thread_id)
        position = None
        if after is not None:
            position = await transcript_store.position_of(self.engine, thread_id, after)
            if position is None:
                raise invalid_cursor(after)
        return await transcript_store.list_messages(self.engine, thread_id, limit, position)

    # Runs

    async def create_run(
        self,
        account_id: str,
        thread_id: str,
        run_input: list[dict[str, str]],
        idempotency_key: str | None,
        wait: float = 0,
    ) -> RunRecord:
        """Start a run (or find the one its idempotency key started). With `wait` seconds, the
        answer is the run as `wait_while_working` then finds it: at its first pause, at its
        end, or still working when the wait runs out."""
        _check_wait(wait)
        run = await self._create_run(account_id, thread_id, run_input, idempotency_key)
        if not wait:
            return run
        return await self.wait_while_working(account_id, run.id, wait)

    async def _create_run(
        self,
        account_id: str,
        thread_id: str,
        run_input: list[dict[str, str]],
        idempotency_key: str | None,
    ) -> RunRecord:
        thread = await self.thread(account_id, thread_id)
        agent = await self.agent(account_id, thread.agent_id)
        values = {
            "id": new_id("run"),
            "account_id": account_id,
            "thread_id": thread_id,
            "agent_id": agent.id,
            "status": RunStatus.QUEUED.value,
            "step_count": 0,
            "max_steps": agent.max_steps,
            "cost_rupiah": 0,
            "input": run_input,
            "pause_count": 0,
            "attempts": 0,
            "idempotency_key": idempotency_key,
            "idempotency_body_hash": body_hash(run_input) if idempotency_key else None,
            **self.machine.new_run_values(),
        }
        hold = self._first_call_hold(account_id, agent, run_input, values["id"])
        run, created = await self._insert_run(values, hold)
        if not created and self._expired(run):
            await idempotency_store.forget_key(self.engine, run.id)
            run, created = await self._insert_run(values, hold)
        if not created and run.idempotency_body_hash not in (None, values["idempotency_body_hash"]):
            raise UnprocessableError(
                f"Idempotency-Key {idempotency_key!r} was used on this thread for run {run.id} "
                "with another body; send the same body to get that run, or use a new key",
                "idempotency_key_reused",
            )
        if created:
            await self.machine.events.committed(WORK)  # sent by the creating transaction
        return run

    def _first_call_hold(
        self, account_id: str, agent: AgentRecord, run_input: list[dict[str, str]], run_id: str
    ) -> Hold | None:
        """The hold of the run's first call as a new thread would send it, taken with the
        run's creation (a thread with history sends more: the worker then holds the rest)."""
        if not self.meter.is_paid(agent.model_id):
            return None
        prompt = input_token_bound(
            first_prompt(agent.system_prompt, input_messages(run_id, run_input)),
            bound_tool_schemas(agent.tools, agent.builtin_tools, agent.agent_tools or ()),
        )
        return self.meter.prompt_hold(account_id, agent.model_id, prompt, run_id)

    async def _insert_run(
        self, values: dict[str, Any], hold: Hold | None
    ) -> tuple[RunRecord, bool]:
        try:
            notices = self.machine.events.notices(WORK)
            return await run_store.create_run(self.engine, values, hold, notices)
        except run_store.ThreadBusyError:
            raise ConflictError(
                f"thread {values['thread_id']} already has an active run", "thread_busy"
            ) from None

    def _expired(self, run: RunRecord) -> bool:
        return run.created_at <= self.machine.clock.now() - IDEMPOTENCY_KEY_TTL

    async def run(self, account_id: str, run_id: str) -> RunRecord:
        run = await self._read_run(account_id, run_id)
        self.paused.saw(run)
        return run

    async def _read_run(self, account_id: str, run_id: str) -> RunRecord:
        run = await run_store.get_run(self.engine, run_id, account_id)
        if run is None:
            raise not_found("run", run_id)
        return run

    async def runs(self, account_id: str, thread_id: str, page: PageRequest) -> Page[RunRecord]:
        await self.thread(account_id, thread_id)
        return await run_store.list_runs(self.engine, account_id, thread_id, page)

    async def account_runs(
        self, account_id: str, parent_run_id: str | None, page: PageRequest
    ) -> Page[RunRecord]:
        """The account's runs; with `parent_run_id`, the child runs that run started."""
        if parent_run_id is not None:
            await self.run(account_id, parent_run_id)
        return await run_store.list_account_runs(self.engine, account_id, parent_run_id, page)

    async def wait_while_working(self, account_id: str, run_id: str, seconds: float) -> RunRecord:
        """The run as soon as the server stops working on it (it waits for the caller's tool
        outputs, or it ended), or after `seconds` at the latest. Waiting for the caller is not
        waiting for a change: a run already back in `requires_action` answers at once, so a
        client never loses a wait to a fast model."""
        _check_wait(seconds)
        deadline = monotonic_clock.monotonic() + seconds
        resumed = self.resumed.take(run_id, account_id)
        if resumed is not None:
            # Resumed here, watched since: as the resume left it unless the watch says not.
            async with resumed.watching:
                return await self._wait(resumed.run, resumed.changed, deadline, read=False)
        async with self.machine.events.watch(run_id) as changed:
            return await self._wait(await self.run(account_id, run_id), changed, deadline)

    def stop_waiting(self) -> None:
        """The server is stopping: every `wait_while_working`, now and from now on, answers at
        once with the run as it stands, as at its deadline, so that no long-poll holds the stop
        (for up to `serving.GRACEFUL_SHUTDOWN_SECONDS`, after which it would be cut without an
        answer). Called from a stop signal's handler, on the loop's thread."""
        with contextlib.suppress(RuntimeError):  # no loop running: no wait to end
            asyncio.get_running_loop().call_soon_threadsafe(self._stop_waiting)

    def _stop_waiting(self) -> None:
        self.stopping = True
        self.machine.events.wake_watchers()

    async def _wait(
        self, run: RunRecord, changed: RunChanged, deadline: float, *, read: bool = True
    ) -> RunRecord:
        """`wait_while_working` of `run` (as read when `read`, else as the last write here
        left it), watched by `changed` since."""
        while run.status in SERVER_WORKING and not self.stopping:
            remaining = deadline - monotonic_clock.monotonic()
            if remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), remaining)
            changed.clear()
            carried = _stopped_working(run, changed.take_state())
            if carried is not None:
                self.paused.saw(carried)
                return carried
            run, read = await self.run(run.account_id, run.id), True
        # A run still working changed meanwhile in ways that send no notice (its steps).
        return run if read else await self.run(run.account_id, run.id)

    async def run_events(
        self, account_id: str, run_id: str, after: int = 0
    ) -> AsyncIterator[StreamItem] | None:
        """The run's stream: its durable events after id `after`, then live ones with text
        deltas and heartbeats, until the event of its terminal status (`hosted.streams`).
        None when the run has ended and the caller has seen all of it: there is nothing more
        to stream, ever (a reconnecting EventSource is told to stop)."""
        if after < 0:
            raise invalid("the last event id must be a whole number, 0 or more")
        run = await self.run(account_id, run_id)
        ended = RunStatus(run.status).is_terminal
        nothing_left = ended and not await run_log.events_after(self.engine, run_id, after, 1)
        if nothing_left and after > 0:
            return None
        if nothing_left:
            raise GoneError(
                f"run {run_id} ended more than the retention period ago and its events were "
                "pruned; GET /v1/runs/{run_id} still shows how it ended",
                "run_events_pruned",
            )
        return follow_run(
            self.engine,
            self.machine.events,
            run_id,
            after,
            ended=ended,
            heartbeat_seconds=self.stream_heartbeat_seconds,
            on_status=partial(self._remember_pause, account_id),
        )

    def _remember_pause(
        self, account_id: str, event: RunEventRecord, carried: dict[str, Any] | None
    ) -> None:
        """A pause a stream shows as the notice of the pausing write carried the run is
        remembered, so that the tool outputs the client posts next need no read of the run
        (as after a `?wait=` that ended at the pause)."""
        shown = _pause_shown(account_id, event, carried)
        if shown is not None:
            self.paused.saw(shown)

    async def stream_token(
        self, account_id: str, run_id: str, authorization: str | None
    ) -> StreamTicket:
        """A token for the run's stream, signed for the key the request came with."""
        await self.run(account_id, run_id)
        secret = bearer_secret(authorization)
        now = self.machine.clock.now().timestamp()
        expires = int(now + self.stream_token_seconds)
        token = stream_token(secret, run_id, expires)
        url = f"/v1/runs/{run_id}/events?token={token}"
        return StreamTicket(token, datetime.fromtimestamp(expires, UTC), url)

    async def submit_tool_outputs(
        self, account_id: str, run_id: str, outputs: list[dict[str, str]], wait: float = 0
    ) -> RunRecord:
        """Resume the paused run with `outputs`. With `wait` seconds, the answer is the run
        as `wait_while_working` then finds it: one request answers a pause and brings back the
        next one (or the end), through the watch that the resume kept."""
        _check_wait(wait)
        moved = await self._submit_tool_outputs(account_id, run_id, outputs)
        if not wait:
            return moved
        return await self.wait_while_working(account_id, run_id, wait)

    async def _submit_tool_outputs(
        self, account_id: str, run_id: str, outputs: list[dict[str, str]]
    ) -> RunRecord:
        by_id = {item["tool_call_id"]: item["output"] for item in outputs}
        shown = self.paused.take(run_id, account_id)
        if shown is not None and _answers_exactly(shown, outputs):
            # Resumed as this process last showed it paused, without reading it again; if the
            # run moved on since, the guarded write misses and the full path below answers.
            moved = await self._resume(shown, by_id)
            if moved is not None:
                return moved
        run = await self._read_run(account_id, run_id)
        if run.status != RunStatus.REQUIRES_ACTION:
            raise _not_waiting(run)
        await self._check_not_shown_above(run)
        _check_outputs(run, outputs)
        if _waits_on_children(run):
            # Calls of child runs (agents this run called): each child resumes with its own.
            if await self.machine.submit_through_children(run, by_id) is None:
                raise _not_waiting(await self.run(account_id, run_id))
            return await self.run(account_id, run_id)
        moved = await self._resume(run, by_id)
        if moved is None:
            raise _not_waiting(await self.run(account_id, run_id))
        return moved

    async def _resume(self, run: RunRecord, outputs: dict[str, str]) -> RunRecord | None:
        """requires_action → running with `outputs`, in the write guarded by the run's status
        and pause number; the run's next model call is held in that write, not one of its own.
        None if the run no longer waits at that pause."""
        hold = self.meter.pre_hold(run, outputs)
        # Watched from before the write, for the `?wait=` that usually follows (`ResumedRuns`).
        async with contextlib.AsyncExitStack() as watching:
            changed = await watching.enter_async_context(self.machine.events.watch(run.id))
            moved = await self.machine.submit_tool_outputs(run, outputs, hold)
            if moved is not None:
                await self.resumed.keep(Resumed(moved, changed, watching.pop_all()))
        return moved

    async def _check_not_shown_above(self, run: RunRecord) -> None:
        """409 when the run's calls show on the run that started it: they are answered there,
        so that every run of the chain resumes together."""
        top, parent_id = None, run.parent_run_id
        calls = {call["id"] for call in run.pending_tool_calls or []}
        while parent_id is not None:
            parent = await run_store.get_run(self.engine, parent_id, run.account_id)
            shown = {call["id"] for call in (parent.pending_tool_calls if parent else None) or []}
            if parent is None or parent.status != RunStatus.REQUIRES_ACTION or calls - shown:
                break
            top, parent_id = parent, parent.parent_run_id
        if top is not None:
            raise ConflictError(
                f"run {run.id} was started by an agent of run {top.id}, which shows these tool "
                f"calls: answer them there (POST /v1/runs/{top.id}/tool_outputs)",
                "answer_on_parent_run",
            )

    async def usage(
        self, account_id: str, since: date | None, until: date | None
    ) -> list[UsageLine]:
        """The account's charges by day (UTC), source and model, between two dates inclusive."""
        if since is not None and until is not None and until < since:
            raise invalid("`to` must not be before `from`")
        if until is not None and until >= date.max:
            raise invalid(f"to: must be a day before {date.max.isoformat()}")
        start = datetime.combine(since, time(), UTC) if since else None
        end = datetime.combine(until + timedelta(days=1), time(), UTC) if until else None
        return await usage_store.usage_by_day(self.engine, account_id, start, end)

    async def cancel_run(self, account_id: str, run_id: str) -> RunRecord:
        run = await self.run(account_id, run_id)
        if RunStatus(run.status).is_terminal:
            return run
        cancelled = await self.machine.cancel(run_id)
        return cancelled or await self.run(account_id, run_id)


def body_hash(run_input: list[dict[str, str]]) -> str:
    """SHA-256 of the run's input as canonical JSON: the same messages hash the same whatever
    their key order or spacing in the request (and `"hi"` equals `[{"role": "user", ...}]`)."""
    canonical = json.dumps(run_input, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _check_wait(seconds: float) -> None:
    if not 0 <= seconds <= MAX_WAIT_SECONDS:
        raise invalid(f"wait must be between 0 and {MAX_WAIT_SECONDS:g} seconds")


def _not_waiting(run: RunRecord) -> ConflictError:
    return ConflictError(
        f"run {run.id} is {run.status}, not requires_action; its tool outputs were already "
        "submitted or it ended",
        "run_not_waiting",
    )


def _carried_run(state: dict[str, Any] | None, run_id: str, account_id: str) -> RunRecord | None:
    """The run a notice carried, if it carried one and that is run `run_id` of `account_id`."""
    carried = run_from_state(state) if state is not None else None
    if carried is None or carried.id != run_id or carried.account_id != account_id:
        return None
    return carried


def _stopped_working(seen: RunRecord, state: dict[str, Any] | None) -> RunRecord | None:
    """The run as the notice that woke a waiter carried it, if it shows the server done with
    the work the waiter saw (`seen`): a pause after the one `seen` came from, or an end."""
    carried = _carried_run(state, seen.id, seen.account_id)
    if carried is None:
        return None
    if carried.status == RunStatus.REQUIRES_ACTION:
        return carried if carried.pause_count > seen.pause_count else None
    return carried if carried.status in TERMINAL else None


def _pause_shown(
    account_id: str, event: RunEventRecord, state: dict[str, Any] | None
) -> RunRecord | None:
    """The run as the last notice carried it, if that is the pause `event` shows (the same
    run, account, step and pending calls): a replayed older pause is not the carried one."""
    shown = event.data
    if shown.get("status") != RunStatus.REQUIRES_ACTION:
        return None
    carried = _carried_run(state, event.run_id, account_id)
    same_pause = (
        carried is not None
        and carried.status == RunStatus.REQUIRES_ACTION
        and carried.step_count == shown.get("step_count")
        and carried.pending_tool_calls == shown.get("pending_tool_calls")
    )
    return carried if same_pause else None


def _waits_on_children(run: RunRecord) -> bool:
    """Whether some of the run's pending calls are those of child runs (agents it called)."""
    return any(call.get("run_id") for call in run.pending_tool_calls or [])


def _answers_exactly(run: RunRecord, outputs: list[dict[str, str]]) -> bool:
    """Whether a remembered view of the run may take `outputs` without a read: they answer
    each of its own pending calls once, and no run above it shows them (the full path
    decides every other case)."""
    if run.parent_run_id is not None or _waits_on_children(run):
        return False
    pending = sorted(call["id"] for call in run.pending_tool_calls or [])
    return pending == sorted(item["tool_call_id"] for item in outputs)


def _check_outputs(run: RunRecord, outputs: list[dict[str, str]]) -> None:
    pending = [call["id"] for call in run.pending_tool_calls or []]
    given = [item["tool_call_id"] for item in outputs]
    duplicates = sorted({call_id for call_id in given if given.count(call_id) > 1})
    missing = sorted(set(pending) - set(given))
    unknown = sorted(set(given) - set(pending))
    problems = []
    if duplicates:
        problems.append(f"answered more than once: {', '.join(duplicates)}")
    if missing:
        problems.append(f"not answered: {', '.join(missing)}")
    if unknown:
        problems.append(f"not pending: {', '.join(unknown)}")
    if problems:
        raise invalid(
            "tool_outputs must answer every pending tool call exactly once; " + "; ".join(problems),
            "invalid_tool_outputs",
        )
