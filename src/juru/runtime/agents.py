"""The agent the runtime serves (`JURU_RUNTIME_AGENT`): a feature, or a hosted agent by id.

A hosted agent is read and compiled when it is called, so edits through `/v1` apply at once.
Hosted agents with client-executed tools are refused: a runtime caller has no way to run them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.pregel import Pregel
from langgraph.types import Durability

from juru import runner
from juru.agents.hosted import FUNDS_KEY, MAX_STEPS_KEY, build_hosted_agent, run_input
from juru.agents.registry import FeatureRegistry, FeatureUnavailableError
from juru.billing.meter import Meter
from juru.models.catalog import ModelCatalog
from juru.runtime.errors import AgentUnavailableError
from juru.store.database import Database
from juru.store.records import AgentRecord
from juru.store.runtime_sessions import get_agent_by_id

HOSTED_AGENT_PREFIX = "agt_"
USAGE_SOURCE = "runtime"


class RuntimeAgentConfigError(ValueError):
    """JURU_RUNTIME_AGENT names neither a feature nor a hosted agent id."""


# A turn saves its session's checkpoint once, as it ends: only the latest checkpoint of a
# session is kept after each turn anyway (`store.pruning`), so saves after every step served
# nobody (docs/agent-runtime.md).
TURN_DURABILITY: Durability = "exit"


@dataclass(frozen=True)
class ServedAgent:
    """A compiled graph ready for the runner, with what a turn of it needs."""

    app_name: str
    author: str
    graph: Pregel[Any, Any, Any, Any]
    max_steps: int
    options: runner.RunOptions
    hosted: bool = False

    def graph_input(self, messages: list[BaseMessage]) -> dict[str, Any]:
        return run_input(messages) if self.hosted else {"messages": messages}


class RuntimeAgents:
    """Finds and builds the served agent."""

    def __init__(
        self,
        name: str,
        features: FeatureRegistry,
        engine: Database,
        catalog: ModelCatalog,
        checkpointer: BaseCheckpointSaver[Any],
        provider_env: dict[str, str],
        meter: Meter,
    ) -> None:
        self.name = name
        self.features = features
        self.engine = engine
        self.catalog = catalog
        self.checkpointer = checkpointer
        self.provider_env = provider_env
        self.meter = meter
        self._compiled: tuple[AgentRecord, Pregel[Any, Any, Any, Any]] | None = None

    @property
    def is_feature(self) -> bool:
        return any(feature.name == self.name for feature in self.features.features)

    def check(self) -> None:
        """Fail at start when the name can be neither a feature nor a hosted agent id."""
        if not self.is_feature and not self.name.startswith(HOSTED_AGENT_PREFIX):
            names = ", ".join(feature.name for feature in self.features.features) or "none"
            raise RuntimeAgentConfigError(
                f"JURU_RUNTIME_AGENT={self.name!r} is neither a feature ({names}) "
                f"nor a hosted agent id ({HOSTED_AGENT_PREFIX}...)"
            )

    async def served(self) -> ServedAgent:
        """The agent to run now (AgentUnavailableError when it cannot run)."""
        if self.is_feature:
            try:
                graph = await self.features.agent(self.name)
            except FeatureUnavailableError as error:
                raise AgentUnavailableError(str(error)) from None
            return ServedAgent(
                self.name,
                self.name,
                graph,
                runner.DEFAULT_MAX_STEPS,
                runner.RunOptions(replace_pending=True, durability=TURN_DURABILITY),
            )
        return await self._hosted()

    async def _hosted(self) -> ServedAgent:
        record = await get_agent_by_id(self.engine, self.name)
        if record is None:
            raise AgentUnavailableError(f"hosted agent {self.name} does not exist")
        if record.tools:
            names = ", ".join(tool["function"]["name"] for tool in record.tools)
            raise AgentUnavailableError(
                f"hosted agent {record.id} has client-executed tools ({names}); a runtime "
                "caller cannot execute them, so serve an agent without client tools"
            )
        options = runner.RunOptions(
            configurable={
                MAX_STEPS_KEY: record.max_steps,
                FUNDS_KEY: RuntimeFunds(self.meter, record),
            },
            replace_pending=True,
            durability=TURN_DURABILITY,
        )
        return ServedAgent(
            record.id, record.name, self._graph(record), 2 * record.max_steps + 5, options, True
        )

    def _graph(self, record: AgentRecord) -> Pregel[Any, Any, Any, Any]:
        if self._compiled is not None and self._compiled[0] == record:
            return self._compiled[1]
        try:
            model = self.catalog.chat_model(record.model_id, self.provider_env)
        except Exception as error:
            raise AgentUnavailableError(
                f"hosted agent {record.id} is unavailable: {type(error).__name__}: {error}"
            ) from None
        graph = build_hosted_agent(model, [], record.system_prompt)
        compiled = graph.copy({"checkpointer": self.checkpointer})
        self._compiled = (record, compiled)
        return compiled


class RuntimeFunds:
    """Pays for a served hosted agent's model calls from its account (source `runtime`): each
    call is held before it and charged as soon as it returns."""

    def __init__(self, meter: Meter, record: AgentRecord) -> None:
        self.meter = meter
        self.record = record

    async def hold(
        self, history: Sequence[BaseMessage], tools: Sequence[dict[str, Any]], step: int
    ) -> str | None:
        return await self.meter.hold_call(
            self.record.account_id, self.record.model_id, history, tools
        )

    async def settle(self, hold_id: str | None, reply: AIMessage | None, step: int) -> None:
        if reply is None:
            await self.meter.release(self.record.account_id, [hold_id])
            return
        await self.meter.charge(
            self.record.account_id,
            self.record.model_id,
            reply.usage_metadata,
            USAGE_SOURCE,
            step=step,
            hold_id=hold_id,
        )
