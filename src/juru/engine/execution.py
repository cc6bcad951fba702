"""Executing one claimed run: from where its thread's checkpoint stands to the next pause or end."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    convert_to_openai_messages,
)
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphRecursionError
from langgraph.pregel import Pregel

from juru import runner
from juru.agents.hosted import (
    AGENT_CALLS,
    BUILTIN_KEY,
    FUNDS_KEY,
    LLM_NODE,
    MAX_STEPS_KEY,
    MCP_KEY,
    MESSAGE_IDS_KEY,
    TEXT_KEY,
    LoopDetectedError,
    StepLimitError,
    run_input,
    step_message_id,
    step_of_message,
)
from juru.billing.meter import Meter, input_token_bound, json_bytes
from juru.core.errors import InsufficientBalanceError
from juru.core.states import FailureReason, RunStatus
from juru.engine.child_runs import plan_agent_calls
from juru.engine.graphs import CompiledGraphs
from juru.engine.machine import RunMachine
from juru.engine.transcript import transcript_entries
from juru.models.catalog import ModelCatalog, ProviderNotConfiguredError, UnknownModelError
from juru.store import hosted as hosted_store
from juru.store.checkpointer import HeldSaves, holding_saves, reading_once, resuming
from juru.store.outage import is_outage
from juru.store.records import RunRecord
from juru.store.run_tree import ancestors_of
from juru.store.steps import StatusChange, StepWrite
from juru.store.transcript import append_run_messages
from juru.store.usage import ChargeRequest, record_charges
from juru.tools.mcp_toolbox import McpServices, McpToolbox
from juru.tools.runtime import BuiltinServices

logger = logging.getLogger(__name__)
RUN_ID_KEY = "juru_run_id"
# A run that pauses for its caller drops its thread's older checkpoints once in this many model
# steps, and always when it ends (`RunExecution._prunes`).
PRUNE_EVERY_STEPS = 8
# A followed call's text goes out in pieces at most this often, and at most this long (a
# piece must fit one run event between processes, see engine.events).
DELTA_FLUSH_SECONDS = 0.05
DELTA_MAX_CHARACTERS = 900
INPUT_WRITE_CHUNK = 200
REASON_BY_ERROR = {
    StepLimitError.__name__: FailureReason.STEP_LIMIT,
    GraphRecursionError.__name__: FailureReason.STEP_LIMIT,
    LoopDetectedError.__name__: FailureReason.LOOP,
    InsufficientBalanceError.__name__: FailureReason.INSUFFICIENT_BALANCE,
}
INPUT_ROLES = {"user": HumanMessage, "assistant": AIMessage, "system": SystemMessage}


def hosted_thread_key(thread_id: str) -> str:
    """Hosted threads keep their state apart from every other face's threads."""
    return f"hosted:{thread_id}"


def input_message_id(run_id: str, index: int) -> str:
    return f"{run_id}_in{index}"


def input_messages(run_id: str, run_input: Sequence[dict[str, str]]) -> list[BaseMessage]:
    """A run's input as messages, with ids derived from the run (stable across retries)."""
    return [
        INPUT_ROLES[item["role"]](item["content"], id=input_message_id(run_id, index))
        for index, item in enumerate(run_input)
    ]


def _resume_mark(run: RunRecord) -> tuple[str, int, int]:
    """Which run a claim (or a hand-off) took, at which of its pauses, and whether no other
    claim came between: its id, pause count and attempts so far. A checkpoint kept at a pause
    under the same mark (`_pause_mark`) is still the thread's latest: only an execution of a
    run writes its thread, every execution starts with a claim or a hand-off (each counts an
    attempt), and the thread's next run has another id."""
    return run.id, run.pause_count, run.attempts


def _pause_mark(run: RunRecord, pause: StatusChange) -> tuple[str, int, int]:
    """The `_resume_mark` that the hand-off (or claim) resuming this pause of `run` (claimed as
    `run`) will give, if no other claim comes first: each counts one more attempt."""
    return run.id, int(pause.values["pause_count"]), run.attempts + 1


@dataclass
class RunContext:
    """What executing a run needs from the app."""

    machine: RunMachine
    checkpointer: BaseCheckpointSaver[Any]
    catalog: ModelCatalog
    provider_env: dict[str, str]
    meter: Meter
    graphs: CompiledGraphs
    builtins: BuiltinServices | None = None
    mcp: McpServices | None = None
    # How deep agents may call agents (a top-level run is at depth 0).
    max_agent_depth: int = 3


class LeaseLostError(Exception):
    """The run stopped being this worker's (cancelled, timed out, or taken over)."""


class RunExecution:
    """One worker's turn at one run."""

    def __init__(self, context: RunContext, run: RunRecord, worker: str) -> None:
        self.context = context
        self.machine = context.machine
        self.run = run
        self.worker = worker
        self.thread_key = hosted_thread_key(run.thread_id)
        self.lease_lost = False
        self.finishing = False
        self.model_id = ""
        self.tier = ""
        self.client_tools: set[str] = set()
        self.agent_tools: set[str] = set()
        self.has_builtins = False
        # The runs above this one (nearest first), when an agent called this run's agent.
        self.ancestors: tuple[str, ...] = ()
        # The tools of the agent's MCP servers (listed once per run, kept by `McpServices`).
        self.mcp_tools: McpToolbox | None = None
        self.steps = run.step_count
        # What the next write records: transcript rows and charges not yet written.
        self.unwritten: list[dict[str, Any]] = []
        self.charges: list[ChargeRequest] = []
        self.unwritten_steps: list[int] = []
        # Holds taken and not yet settled by a written charge; the hold of each step's call.
        self.open_holds: set[str] = set()
        self.step_holds: dict[int, str] = {}
        # A paid model call is in flight: losing the lease now waits for it to return, so
        # that the call is charged (`_charge_orphans`) rather than cut off unpaid.
        self.calling = False
        # The hold taken for this turn's first call when the tool outputs were submitted (not
        # yet adopted or given back), and whether the run's row still names it.
        self.pre_hold = run.hold_id
        self.names_pre_hold = run.hold_id is not None
        if run.hold_id is not None:
            self.open_holds.add(run.hold_id)
        # Text of the call in flight not yet sent to the run's followers.
        self.text_pieces: list[str] = []
        self.text_sent_at = 0.0
        # The last paid prompt's bound and its reply's bytes, for the pause to remember.
        self.prompt_bytes: int | None = None
        self.reply_bytes = 0
        # The checkpoint LangGraph saved at the pause or end, kept for the write that records it.
        self.held_saves: HeldSaves | None = None

    async def execute(self) -> None:
        """Run to the next pause or the end, guarded by the lease (renewed, and watched)."""
        main = asyncio.current_task()
        assert main is not None
        done = asyncio.Event()
        guard = asyncio.create_task(self._guard_lease(main, done))
        try:
            # The state read that decides how to go on is the graph's own first read too; after
            # a pause this process wrote, it reads the checkpoint the pause left in memory.
            with reading_once(), resuming(self.thread_key, _resume_mark(self.run)):
                await self._execute()
        except LeaseLostError:
            self.lease_lost = True
            logger.info("run %s left worker %s mid-step", self.run.id, self.worker)
        except asyncio.CancelledError:
            if not self.lease_lost:
                raise
            logger.info(
                "run %s left worker %s (cancelled, timed out or taken over)",
                self.run.id,
                self.worker,
            )
        except Exception as error:
            if not is_outage(error):
                raise
            self._stop_for_outage(error)
        finally:
            done.set()
            await guard
            await asyncio.shield(self._release_open_holds())

    async def _release_open_holds(self) -> None:
        if self.open_holds:
            holds, self.open_holds = list(self.open_holds), set()
            await self.context.meter.release(self.run.account_id, holds)

    def _stop_for_outage(self, error: BaseException) -> None:
        """The database stopped answering: not the run's failure. The run stays `running`;
        its lease lapses and a worker takes it up again from its checkpoint."""
        logger.warning(
            "run %s stopped in worker %s: the database is not answering (%s); "
            "it resumes from its checkpoint once its lease lapses",
            self.run.id,
            self.worker,
            type(error).__name__,
        )

    async def _guard_lease(self, main: asyncio.Task[Any], done: asyncio.Event) -> None:
        """Renew the lease; the moment the run is no longer ours, cancel the execution. The
        first renewal comes at half the lease the run came with when that is sooner than the
        usual third of a lease (a run handed over with a short one: `handoff_seconds`)."""
        interval = self.machine.limits.lease_seconds / 3
        wait = interval
        if self.run.lease_expires_at is not None:
            left = (self.run.lease_expires_at - self.machine.clock.now()).total_seconds()
            wait = min(interval, max(left, 0.0) / 2)
        async with self.machine.events.watch(self.run.id, leases=True) as changed:
            while not done.is_set():
                waits = [asyncio.ensure_future(changed.wait()), asyncio.ensure_future(done.wait())]
                await asyncio.wait(waits, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
                wait = interval
                for waiting in waits:
                    waiting.cancel()
                changed.clear()
                if done.is_set() or self.finishing:
                    return
                try:
                    still_ours = await self.machine.renew_lease(self.run, self.worker)
                except Exception as error:
                    # Keep going: if the lease lapses meanwhile, another worker takes the run
                    # and this one's conditional writes simply stop applying.
                    if is_outage(error):
                        logger.warning("run %s: the database is not answering", self.run.id)
                    else:
                        logger.exception("could not renew the lease of run %s", self.run.id)
                    continue
                if not still_ours:
                    self.lease_lost = True
                    if not self.calling:
                        main.cancel()
                    return

    async def _agent(self) -> Pregel[Any, Any, Any, Any] | None:
        graphs = self.context.graphs
        remembered = graphs.known_agent(self.run.agent_id, self.run.agent_revision)
        if remembered is not None and self.run.account_tier is not None:
            agent, self.tier = remembered, self.run.account_tier
        else:
            found = await hosted_store.agent_and_tier(
                self.machine.engine, self.run.account_id, self.run.agent_id
            )
            if found is None:
                await self.machine.fail(self.run, "the agent was deleted", worker=self.worker)
                return None
            agent, self.tier = found
            graphs.remember(agent)
        try:
            model = self.context.catalog.chat_model(agent.model_id, self.context.provider_env)
        except Exception as error:
            # A missing key or unknown model says what to fix; anything else only in the log.
            known = isinstance(error, ProviderNotConfiguredError | UnknownModelError)
            logger.warning("run %s: model %s not built", self.run.id, agent.model_id, exc_info=True)
            reason = error.args[0] if known else "it could not be built (see the server log)"
            await self.machine.fail(
                self.run, f"model {agent.model_id}: {reason}", worker=self.worker
            )
            return None
        self.model_id = agent.model_id
        self.client_tools = {tool["function"]["name"] for tool in agent.tools}
        self.agent_tools = {tool["name"] for tool in agent.agent_tools or []}
        self.has_builtins = bool(agent.builtin_tools)
        if agent.mcp_servers and self.context.mcp is not None:
            reserved = [*self.client_tools, *agent.builtin_tools, *self.agent_tools]
            self.mcp_tools = self.context.mcp.for_run(self.run.id, agent.mcp_servers, reserved)
        return graphs.get(agent, model)

    async def hold(
        self, history: Sequence[BaseMessage], tools: Sequence[dict[str, Any]], step: int
    ) -> str | None:
        """`CallFunds.hold`: the step's call is held against the account before it is made."""
        meter = self.context.meter
        if not meter.is_paid(self.model_id):
            return None
        self.prompt_bytes = input_token_bound(history, tools)
        amount = meter.most_a_prompt_costs(self.model_id, self.prompt_bytes)
        pre_hold, self.pre_hold = self.pre_hold, None
        if pre_hold is not None and (self.run.hold_rupiah or 0) >= amount:
            hold_id = pre_hold  # taken with the tool outputs: no write of its own
        else:
            hold_id = meter.new_hold_id()
            # Known before the write, so that a cancellation during it still releases it.
            self.open_holds.add(hold_id)
            await meter.hold(
                self.run.account_id,
                amount,
                self.model_id,
                self.run.id,
                hold_id,
                replacing=pre_hold,
            )
        self.step_holds[step] = hold_id
        self.calling = True
        return hold_id

    async def settle(self, hold_id: str | None, reply: AIMessage | None, step: int) -> None:
        """`CallFunds.settle`: a reply's hold waits for the step's write, which charges the
        call; a call that failed gives its hold back."""
        self.calling = False
        if reply is not None and self.prompt_bytes is not None:
            self.reply_bytes = json_bytes(convert_to_openai_messages(reply))
        if reply is None and hold_id is not None:
            self.step_holds.pop(step, None)
            self.open_holds.discard(hold_id)
            await self.context.meter.release(self.run.account_id, [hold_id])

    def wants_text(self) -> bool:
        """`TextSink.wants_text`: a model call streams only when a stream follows the run."""
        return self.machine.events.followed(self.run.id)

    async def text(self, step: int, piece: str) -> None:
        """`TextSink.text`: pieces of a call's text go to the run's followers together, at
        most every DELTA_FLUSH_SECONDS."""
        self.text_pieces.append(piece)
        if time.monotonic() - self.text_sent_at >= DELTA_FLUSH_SECONDS:
            await self._send_text(step)

    async def call_ended(self, step: int) -> None:
        await self._send_text(step)

    async def _send_text(self, step: int) -> None:
        text, self.text_pieces = "".join(self.text_pieces), []
        self.text_sent_at = time.monotonic()
        message_id = step_message_id(self.run.id, step)
        for start in range(0, len(text), DELTA_MAX_CHARACTERS):
            delta = {"message_id": message_id, "delta": text[start : start + DELTA_MAX_CHARACTERS]}
            await self.machine.events.publish_delta(self.run.id, delta)

    def _options(self, replace_pending: bool = False) -> runner.RunOptions:
        configurable: dict[str, Any] = {
            MAX_STEPS_KEY: self.run.max_steps,
            FUNDS_KEY: self,
            TEXT_KEY: self,
            MESSAGE_IDS_KEY: self.run.id,
        }
        if self.context.builtins is not None:
            builtins = self.context.builtins.for_run(self.run.account_id, self.run.id)
            configurable[BUILTIN_KEY] = builtins
        if self.mcp_tools is not None:
            configurable[MCP_KEY] = self.mcp_tools
        return runner.RunOptions(
            configurable=configurable,
            metadata={RUN_ID_KEY: self.run.id},
            replace_pending=replace_pending,
            state_checked=True,
            durability="exit" if self._checkpoint_at_pause else "async",
        )

    @property
    def _checkpoint_at_pause(self) -> bool:
        """Client-tool agents save their checkpoint when the run pauses or ends, not after
        every node, and in the same transaction as the pause's or end's write: a crash redoes
        at most the model steps since the last pause, each recorded and charged once (stable
        ids, charge keys). Built-in calls are not keyed, so agents with built-in tools (or MCP
        servers, whose calls act elsewhere) keep a checkpoint per step."""
        return not self.has_builtins and self.mcp_tools is None

    async def _execute(self) -> None:
        agent = await self._agent()
        if agent is None:
            return
        if not self._checkpoint_at_pause:
            await self._go_on(agent)
            return
        async with holding_saves(self.thread_key) as self.held_saves:
            await self._go_on(agent)

    async def _go_on(self, agent: Pregel[Any, Any, Any, Any]) -> None:
        """From where the run's checkpoint stands to its next pause or end."""
        if self.run.parent_run_id is not None:
            self.ancestors = tuple(await ancestors_of(self.machine.engine, self.run))
        limit = 2 * self.run.max_steps + 5
        state = await runner.thread_state(agent, self.thread_key)
        ours = state.metadata.get(RUN_ID_KEY) == self.run.id
        if ours:
            self._recover(state)
        outputs = self.run.tool_outputs or {}
        paused = state.interrupts[0] if state.interrupts else None
        if paused is not None and ours and AGENT_CALLS in paused:
            resume_value = await self._agent_calls(paused[AGENT_CALLS])
            if resume_value is None:
                return
            stream = runner.stream_resume(
                agent, resume_value, self.thread_key, limit, self._options()
            )
            await self._drive(agent, stream, limit)
            return
        pending = paused["pending_tool_calls"] if paused is not None else None
        answered = pending is not None and {call["id"] for call in pending} <= outputs.keys()
        if pending is not None and ours and not answered:
            await self._settle(pending=pending)
            return
        if pending is not None and ours:
            resume_value = {"outputs": outputs}
            stream = runner.stream_resume(
                agent, resume_value, self.thread_key, limit, self._options()
            )
        elif ours and state.next_nodes:
            stream = runner.stream_continuation(agent, self.thread_key, limit, self._options())
        elif ours:
            last = state.messages[-1] if state.messages else None
            await self._settle(output=last.text if isinstance(last, AIMessage) else "")
            return
        else:
            messages = input_messages(self.run.id, self.run.input)
            await self._write_input(messages)
            stream = runner.stream_message(
                agent, run_input(messages), self.thread_key, limit, self._options(True)
            )
        await self._drive(agent, stream, limit)

    async def _drive(
        self, agent: Pregel[Any, Any, Any, Any], stream: runner.TurnStream, limit: int
    ) -> None:
        """Write the turn's steps as they finish, to its pause or end; a pause for calls of
        other agents whose results are known at once (errors) resumes in the same execution."""
        while True:
            output = await self._steps(stream)
            paused = stream.turn.pending_review
            if stream.turn.error is not None or paused is None or AGENT_CALLS not in paused:
                await self._finish(stream.turn, output)
                return
            resume_value = await self._agent_calls(paused[AGENT_CALLS])
            if resume_value is None:
                return
            stream = runner.stream_resume(
                agent, resume_value, self.thread_key, limit, self._options()
            )

    async def _steps(self, stream: runner.TurnStream) -> str:
        output = ""
        async for step in stream:
            self._buffer(step.messages)
            reply = None
            if step.node == LLM_NODE and step.depth == 0:
                reply = next((m for m in step.messages if isinstance(m, AIMessage)), None)
            if reply is not None:
                self.steps += 1
                self.unwritten_steps.append(self.steps)
                self._charge(reply, self.steps)
                output = reply.text
            if self.lease_lost:
                # The run left this worker while its model call was in flight.
                await self._charge_orphans()
                raise LeaseLostError(self.run.id)
            if reply is not None and not self._pauses_or_ends(reply):
                await self._write()
        return output

    async def _agent_calls(self, calls: list[dict[str, str]]) -> dict[str, Any] | None:
        """The resume value of a pause for calls of other agents once every call has its
        result; else None, after starting the child runs still needed and giving up the run's
        lease in the same write: a run does not get claimed while a child of it is active,
        and the end of its last child makes it claimable again."""
        plan = await plan_agent_calls(
            self.machine,
            self.run,
            calls,
            depth=len(self.ancestors),
            max_depth=self.context.max_agent_depth,
        )
        if plan.complete:
            return {"outputs": plan.outputs}
        self.finishing = True
        release = {"lease_owner": None, "lease_expires_at": None}
        try:
            await self._write(children=plan.to_start, run_values=release)
        except LeaseLostError:
            logger.info("run %s was no longer worker %s's to pause", self.run.id, self.worker)
        return None

    def _recover(self, state: runner.ThreadState) -> None:
        """Take up what a crash may have left unwritten: the run's messages after its last
        recorded step, and the charges of the steps after it (both are written idempotently)."""
        self.steps = int(state.values.get("run_steps", self.run.step_count))
        marker = (
            step_message_id(self.run.id, self.run.step_count)
            if self.run.step_count
            else input_message_id(self.run.id, 0)
        )
        messages = state.messages
        start = next((i for i, m in enumerate(messages) if m.id == marker), None)
        if start is None:
            if not self.run.step_count:
                # Stopped right after the input's checkpoint, before the graph took the input in:
                # the continuation will not show it as a step, so it is written from the run.
                self._buffer(input_messages(self.run.id, self.run.input))
            return
        unwritten = messages[start + 1 if self.run.step_count else start :]
        self._buffer(unwritten)
        for message in unwritten:
            step = step_of_message(self.run.id, message.id)
            if isinstance(message, AIMessage) and step is not None:
                self.unwritten_steps.append(step)
                self._charge(message, step)

    async def _write_input(self, messages: Sequence[BaseMessage]) -> None:
        """A small input goes with the first step's write; a large one is written ahead, in
        transactions of INPUT_WRITE_CHUNK rows, so no single write holds the database long."""
        entries = transcript_entries(messages)
        if len(entries) <= INPUT_WRITE_CHUNK:
            self.unwritten.extend(entries)
            return
        for start in range(0, len(entries), INPUT_WRITE_CHUNK):
            await append_run_messages(
                self.machine.engine,
                self.run.thread_id,
                self.run.id,
                entries[start : start + INPUT_WRITE_CHUNK],
                self.machine.clock.now(),
            )

    def _pauses_or_ends(self, reply: AIMessage) -> bool:
        """Whether the graph stops right after this reply (an answer, or only client calls):
        its write then waits to go with the status change, in the same transaction."""
        waits_for = self.client_tools | self.agent_tools
        return all(call["name"] in waits_for for call in reply.tool_calls)

    def _buffer(self, messages: Sequence[BaseMessage | AnyMessage]) -> None:
        self.unwritten.extend(transcript_entries(messages))

    def _charge(self, reply: AIMessage, step: int) -> None:
        """The model call of `step`, to be billed with the step's write (source `agent`)."""
        self.charges.append(
            self.context.meter.charge_request(
                self.run.account_id,
                self.model_id,
                reply.usage_metadata,
                "agent",
                run_id=self.run.id,
                step=step,
                charge_key=f"{self.run.id}:step:{step}",
                hold_id=self.step_holds.pop(step, None),
            )
        )

    async def _write(
        self,
        status: StatusChange | None = None,
        children: Sequence[dict[str, Any]] = (),
        run_values: dict[str, Any] | None = None,
    ) -> None:
        """Everything not yet written, in one transaction: messages, step count, charges and
        the status change (or the child runs started). Raises LeaseLostError when the run is
        no longer this worker's."""
        values = dict(run_values or {})
        if self.names_pre_hold:
            values.update(hold_id=None, hold_rupiah=None)
        step = StepWrite(
            run_id=self.run.id,
            thread_id=self.run.thread_id,
            worker=self.worker,
            now=self.machine.clock.now(),
            tier=self.tier,
            messages=tuple(self.unwritten),
            step_count=self.steps,
            charges=tuple(self.charges),
            status=status,
            run_values=values,
            new_steps=tuple(self.unwritten_steps),
            ancestors=self.ancestors,
            children=tuple(children),
            saves=self.held_saves.take() if self.held_saves is not None else None,
            prune_thread=self.thread_key if self._prunes(status, children) else None,
        )
        if not await self.machine.record_step(step, self.context.meter.rules):
            await self._charge_orphans()
            raise LeaseLostError(self.run.id)
        if status is not None and status.target == RunStatus.REQUIRES_ACTION and step.saves:
            assert self.held_saves is not None, "saves are taken from the held ones"
            self.held_saves.keep_for_resume(step.saves, _pause_mark(self.run, status))
        self.names_pre_hold = False
        self._charged()
        self.unwritten.clear()
        self.unwritten_steps.clear()

    def _prunes(self, status: StatusChange | None, children: Sequence[dict[str, Any]]) -> bool:
        """Whether this write drops the thread's older checkpoints. It comes after the graph
        saved its checkpoint when the run ends, starts child runs or pauses for the caller:
        every end and every start of children prunes, a pause only once its run has taken
        `PRUNE_EVERY_STEPS` more model steps (the thread keeps at most that many pauses'
        checkpoints until then, and a short run prunes once, at its end)."""
        if children:
            return True
        if status is None:
            return False
        if status.target != RunStatus.REQUIRES_ACTION:
            return True
        return self.run.step_count // PRUNE_EVERY_STEPS != self.steps // PRUNE_EVERY_STEPS

    def _charged(self) -> None:
        self.open_holds.difference_update(c.hold_id for c in self.charges if c.hold_id)
        self.charges.clear()

    async def _charge_orphans(self) -> None:
        """The run is no longer this worker's (cancelled, its agent deleted, taken over), but
        the calls it made are still charged: to the account, and to the run while it exists."""
        if self.charges:
            await record_charges(self.machine.engine, self.charges, self.context.meter.rules)
            self._charged()

    async def _finish(self, turn: runner.Turn, output: str) -> None:
        if turn.error is not None and turn.error.cause is not None and is_outage(turn.error.cause):
            # The graph stopped on the database (the checkpointer, or a store call in a node).
            raise turn.error.cause
        if turn.error is not None:
            reason = REASON_BY_ERROR.get(turn.error.type)
            error = reason.value if reason else f"{turn.error.type}: {turn.error.message}"
            if reason is FailureReason.STEP_LIMIT:
                self.steps = self.run.max_steps
            if isinstance(turn.error.cause, LoopDetectedError):
                # The looping call was made before the loop was seen: it is billed.
                self._charge(turn.error.cause.reply, self.steps + 1)
            await self._settle(error=error)
        elif turn.pending_review is not None:
            await self._settle(pending=turn.pending_review["pending_tool_calls"])
        else:
            await self._settle(output=output)

    async def _settle(
        self,
        *,
        pending: list[dict[str, str]] | None = None,
        error: str | None = None,
        output: str = "",
    ) -> None:
        """Pause or end the run, with the step's unwritten effects in the same write."""
        # From here on the execution settles the run itself: the guard must not cut it short.
        self.finishing = True
        if error is not None:
            change = self.machine.failing(error, self.steps)
        elif pending is not None:
            change = self.machine.pausing(self.run, pending, self.steps)
            if self.prompt_bytes is not None:
                # What the next call sends before the outputs: submitting them holds it.
                next_call = {
                    "next_prompt_bytes": self.prompt_bytes + self.reply_bytes,
                    "next_model_id": self.model_id,
                }
                change = replace(change, values={**change.values, **next_call})
        else:
            change = self.machine.succeeding(output, self.steps)
        try:
            await self._write(change)
        except LeaseLostError:
            logger.info("run %s was no longer worker %s's to settle", self.run.id, self.worker)
