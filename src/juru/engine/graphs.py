"""Compiled hosted-agent graphs, reused across runs: compiling a graph costs more CPU than a
step of it, and the graph holds no state of its own (each run's config names its thread). The
agents they are built from are kept too, by revision, so a claimed run's agent is not read again
while it has not changed."""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.pregel import Pregel

from juru.agents.hosted import build_hosted_agent
from juru.store.records import AgentRecord

GraphKey = tuple[str, int]


class CompiledGraphs:
    """The most recently used graphs, keyed by what the graph is built from (so an edited agent
    gets a new graph) and by the model object (so new credentials do too)."""

    def __init__(self, checkpointer: BaseCheckpointSaver[Any], capacity: int = 256) -> None:
        self.checkpointer = checkpointer
        self.capacity = capacity
        self._graphs: OrderedDict[GraphKey, Pregel[Any, Any, Any, Any]] = OrderedDict()
        # The agents they were built from, by id: a claim that names an agent's revision
        # (`RunRecord.agent_revision`) finds it here instead of reading it again.
        self._agents: OrderedDict[str, AgentRecord] = OrderedDict()

    @staticmethod
    def key(agent: AgentRecord, model: BaseChatModel) -> GraphKey:
        spec = [
            agent.model_id,
            agent.system_prompt,
            agent.tools,
            agent.builtin_tools,
            agent.agent_tools,
        ]
        return json.dumps(spec, sort_keys=True, default=str), id(model)

    def get(self, agent: AgentRecord, model: BaseChatModel) -> Pregel[Any, Any, Any, Any]:
        key = self.key(agent, model)
        graph = self._graphs.get(key)
        if graph is None:
            built = build_hosted_agent(
                model,
                agent.tools,
                agent.system_prompt,
                agent.builtin_tools,
                agent.agent_tools or (),
            )
            graph = built.copy({"checkpointer": self.checkpointer})
            self._graphs[key] = graph
            if len(self._graphs) > self.capacity:
                self._graphs.popitem(last=False)
        else:
            self._graphs.move_to_end(key)
        return graph

    def __len__(self) -> int:
        return len(self._graphs)

    def known_agent(self, agent_id: str, revision: int | None) -> AgentRecord | None:
        """The agent as last read, if that is still its `revision`."""
        agent = self._agents.get(agent_id)
        if agent is None or revision is None or agent.revision != revision:
            return None
        self._agents.move_to_end(agent_id)
        return agent

    def remember(self, agent: AgentRecord) -> None:
        self._agents[agent.id] = agent
        self._agents.move_to_end(agent.id)
        if len(self._agents) > self.capacity:
            self._agents.popitem(last=False)
