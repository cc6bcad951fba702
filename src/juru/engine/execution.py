"""Executing one claimed run: from where its thread's checkpoint stands to the next pause or end."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphRecursionError
from langgraph.pregel import Pregel

from juru import runner
from juru.agents.hosted import (
    BUILTIN_KEY,
    FUNDS_KEY,
    LLM_NODE,
    MAX_STEPS_KEY,
    METER_KEY,
    LoopDetectedError,
    StepLimitError,
    run_input,
)
from juru.billing.meter import Meter
from juru.core.errors import InsufficientBalanceError
from juru.core.states import FailureReason
from juru.engine.graphs import CompiledGraphs
from juru.engine.machine import RunMachine
from juru.engine.transcript import transcript_entries
from juru.models.catalog import ModelCatalog
from juru.store import hosted as hosted_store
from juru.store.checkpointer import settle_checkpointer
from juru.store.pruning import prune_checkpoints
from juru.store.records import AgentRecord, RunRecord
from juru.store.transcript import append_messages
from juru.tools.runtime import BuiltinServices

logger = logging.getLogger(__name__)
RUN_ID_KEY = "juru_run_id"
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


def input_messages(run: RunRecord) -> list[BaseMessage]:
    """The run's input as messages, with ids derived from the run (stable across retries)."""
    return [
        INPUT_ROLES[item["role"]](item["content"], id=f"{run.id}_in{index}")
        for index, item in enumerate(run.input)
    ]


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

    async def execute(self) -> None:
        """Run to the next pause or the end, guarded by the lease (renewed, and watched)."""
        main = asyncio.current_task()
        assert main is not None
        done = asyncio.Event()
        guard = asyncio.create_task(self._guard_lease(main, done))
        try:
            await self._execute()
        except asyncio.CancelledError:
            await settle_checkpointer(self.context.checkpointer)
            if not self.lease_lost:
                raise
            logger.info(
                "run %s left worker %s (cancelled, timed out or taken over)",
                self.run.id,
                self.worker,
            )
        finally:
            done.set()
            await guard

    async def _guard_lease(self, main: asyncio.Task[Any], done: asyncio.Event) -> None:
        """Renew the lease; the moment the run is no longer ours, cancel the execution."""
        interval = self.machine.limits.lease_seconds / 3
        async with self.machine.events.watch(self.run.id) as changed:
            while not done.is_set():
                waits = [asyncio.ensure_future(changed.wait()), asyncio.ensure_future(done.wait())]
                await asyncio.wait(waits, timeout=interval, return_when=asyncio.FIRST_COMPLETED)
                for waiting in waits:
                    waiting.cancel()
                changed.clear()
                if done.is_set() or self.finishing:
                    return
                try:
                    still_ours = await self.machine.renew_lease(self.run, self.worker)
                except Exception:
                    # Keep going: if the lease lapses meanwhile, another worker takes the run
                    # and this one's conditional writes simply stop applying.
                    logger.exception("could not renew the lease of run %s", self.run.id)
                    continue
                if not still_ours:
                    self.lease_lost = True
                    main.cancel()
                    return

    async def _agent(self) -> Pregel[Any, Any, Any, Any] | None:
        agent = await hosted_store.get_agent(
            self.machine.engine, self.run.account_id, self.run.agent_id
        )
        if agent is None:
            await self.machine.fail(self.run, "the agent was deleted", worker=self.worker)
            return None
        try:
            model = self.context.catalog.chat_model(agent.model_id, self.context.provider_env)
        except Exception as error:
            await self.machine.fail(
                self.run, f"{type(error).__name__}: {error}", worker=self.worker
            )
            return None
        return self._compile(agent, model)

    def _compile(self, agent: AgentRecord, model: Any) -> Pregel[Any, Any, Any, Any]:
        self.model_id = agent.model_id
        return self.context.graphs.get(agent, model)

    async def _charge(self, reply: AIMessage, step: int) -> None:
        """One ledger row per model call, priced from the catalog (source `agent`)."""
        await self.context.meter.charge(
            self.run.account_id,
            self.model_id,
            reply.usage_metadata,
            "agent",
            run_id=self.run.id,
            step=step,
        )

    async def _ensure_funds(self) -> None:
        await self.context.meter.ensure_funds(self.run.account_id, self.model_id)

    def _options(self, replace_pending: bool = False) -> runner.RunOptions:
        configurable: dict[str, Any] = {
            MAX_STEPS_KEY: self.run.max_steps,
            METER_KEY: self._charge,
            FUNDS_KEY: self._ensure_funds,
        }
        if self.context.builtins is not None:
            builtins = self.context.builtins.for_run(self.run.account_id, self.run.id)
            configurable[BUILTIN_KEY] = builtins
        return runner.RunOptions(
            configurable=configurable,
            metadata={RUN_ID_KEY: self.run.id},
            replace_pending=replace_pending,
        )

    async def _execute(self) -> None:
        agent = await self._agent()
        if agent is None:
            return
        limit = 2 * self.run.max_steps + 5
        state = await agent.aget_state({"configurable": {"thread_id": self.thread_key}})
        ours = (state.metadata or {}).get(RUN_ID_KEY) == self.run.id
        if ours:
            await self._record(state.values.get("messages", []))
        outputs = self.run.tool_outputs or {}
        answered = (
            bool(state.interrupts)
            and {call["id"] for call in state.interrupts[0].value["pending_tool_calls"]}
            <= outputs.keys()
        )
        if state.interrupts and ours and not answered:
            await self._finish(agent, None)
            return
        if state.interrupts and ours:
            resume_value = {"outputs": outputs}
            stream = runner.stream_resume(
                agent, resume_value, self.thread_key, limit, self._options()
            )
        elif ours and state.next:
            stream = runner.stream_continuation(agent, self.thread_key, limit, self._options())
        elif ours:
            await self._finish(agent, None)
            return
        else:
            messages = input_messages(self.run)
            await self._record(messages)
            stream = runner.stream_message(
                agent, run_input(messages), self.thread_key, limit, self._options(True)
            )
        steps = self.run.step_count
        async for step in stream:
            await self._record(step.messages)
            if step.node == LLM_NODE and step.depth == 0:
                steps += 1
                await self.machine.record_steps(self.run, self.worker, steps)
        await self._finish(agent, stream.turn)

    async def _record(self, messages: Sequence[BaseMessage | AnyMessage]) -> None:
        await append_messages(
            self.machine.engine,
            self.run.thread_id,
            self.run.id,
            transcript_entries(messages),
            self.machine.clock.now(),
        )

    async def _finish(self, agent: Pregel[Any, Any, Any, Any], turn: runner.Turn | None) -> None:
        # From here on the execution settles the run itself: the guard must not cut it short.
        self.finishing = True
        state = await agent.aget_state({"configurable": {"thread_id": self.thread_key}})
        steps = int(state.values.get("run_steps", self.run.step_count))
        if turn is not None and turn.error is not None:
            reason = REASON_BY_ERROR.get(turn.error.type)
            error = reason.value if reason else f"{turn.error.type}: {turn.error.message}"
            if reason is FailureReason.STEP_LIMIT:
                steps = self.run.max_steps
            await self.machine.fail(self.run, error, worker=self.worker, step_count=steps)
        elif state.interrupts:
            pending = state.interrupts[0].value["pending_tool_calls"]
            await self.machine.pause(self.run, self.worker, pending, steps)
        else:
            last = state.values["messages"][-1] if state.values.get("messages") else None
            output = last.text if isinstance(last, AIMessage) else ""
            await self.machine.succeed(self.run, self.worker, output, steps)
        await asyncio.shield(prune_checkpoints(self.context.checkpointer, self.thread_key))
