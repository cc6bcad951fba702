"""Features: named agents the playground can run, built in or registered by users."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.pregel import Pregel

from juru.core.references import ReferenceLoadError, import_reference

AgentBuilder = Callable[[], Pregel[Any, Any, Any, Any]]


@dataclass(frozen=True)
class Feature:
    """A named agent: `build_agent()` returns its compiled graph and is called when it is used."""

    name: str
    description: str
    build_agent: AgentBuilder
    examples: tuple[str, ...] = ()


class FeatureLoadError(ValueError):
    """A `module:attribute` in JURU_FEATURES does not name a feature."""


def find_feature(name: str, features: Iterable[Feature]) -> Feature:
    """The feature called `name`; KeyError naming the available ones otherwise."""
    available = list(features)
    for feature in available:
        if feature.name == name:
            return feature
    names = ", ".join(feature.name for feature in available) or "none"
    raise KeyError(f"no feature named {name!r}; available: {names}")


def _features_from_object(target: str, attribute: str, value: Any) -> list[Feature]:
    if isinstance(value, Feature):
        return [value]
    if isinstance(value, Pregel):
        graph = value
        description = (graph.name or "") if graph.name != "LangGraph" else ""
        return [
            Feature(
                name=attribute,
                description=description or f"Custom graph {target}",
                build_agent=lambda: graph,
            )
        ]
    if isinstance(value, list | tuple) and value and all(isinstance(v, Feature) for v in value):
        return list(value)
    raise FeatureLoadError(
        f"{target} is a {type(value).__name__}; expected a Feature, a list of Features "
        "or a compiled LangGraph graph"
    )


def load_feature_reference(target: str) -> list[Feature]:
    """Import `module:attribute` and return the features it names."""
    try:
        value = import_reference(target)
    except ReferenceLoadError as error:
        raise FeatureLoadError(str(error)) from error
    return _features_from_object(target, target.partition(":")[2], value)


def merge_features(groups: Sequence[Sequence[Feature]]) -> list[Feature]:
    """All features in order; a repeated name is an error rather than a silent override."""
    merged: dict[str, Feature] = {}
    for group in groups:
        for feature in group:
            if feature.name in merged:
                raise FeatureLoadError(f"two features are named {feature.name!r}")
            merged[feature.name] = feature
    return list(merged.values())
