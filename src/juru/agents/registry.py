"""The features an app serves, each compiled once onto the app's checkpointer."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.pregel import Pregel

from juru.agents.features import Feature, find_feature


class FeatureUnavailableError(RuntimeError):
    """The feature's agent cannot be built (for example, its provider key is missing)."""


class FeatureRegistry:
    """Looks features up by name and builds their agents on first use."""

    def __init__(self, features: Sequence[Feature], checkpointer: BaseCheckpointSaver[Any]) -> None:
        self.features = list(features)
        self.checkpointer = checkpointer
        self._agents: dict[str, Pregel[Any, Any, Any, Any]] = {}
        self._build_lock = asyncio.Lock()

    def find(self, name: str) -> Feature:
        """The feature called `name` (KeyError naming the available ones)."""
        return find_feature(name, self.features)

    async def agent(self, name: str) -> Pregel[Any, Any, Any, Any]:
        """The feature's compiled graph, with its state kept in the app's database."""
        feature = self.find(name)
        async with self._build_lock:
            if name not in self._agents:
                try:
                    graph = await asyncio.to_thread(feature.build_agent)
                except Exception as error:
                    raise FeatureUnavailableError(
                        f"feature {name!r} is unavailable: {error}"
                    ) from error
                if not isinstance(graph, Pregel):
                    raise FeatureUnavailableError(
                        f"feature {name!r}: build_agent returned {type(graph).__name__}, "
                        "not a compiled LangGraph graph"
                    )
                self._agents[name] = graph.copy({"checkpointer": self.checkpointer})
            return self._agents[name]
