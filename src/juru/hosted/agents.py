"""Agent definitions: validation against the catalog and the built-in tool set."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from juru.core.errors import invalid
from juru.core.text import public_message
from juru.models.catalog import ModelCatalog, UnknownModelError

LIVE_BUILTIN_TOOLS = frozenset({"text_to_speech", "rag_search"})
UNAVAILABLE_BUILTIN_TOOLS = frozenset({"web_search", "generate_image"})


def check_model(catalog: ModelCatalog, model_id: str) -> None:
    """400 `unsupported_model` unless the model is in the catalog and may drive agents."""
    try:
        spec = catalog.get(model_id)
    except UnknownModelError:
        raise invalid(
            f"model {model_id!r} is not in the model catalog", "unsupported_model"
        ) from None
    if not spec.agents:
        raise invalid(
            f"model {model_id!r} cannot drive agents ({spec.label or 'not agent-capable'})",
            "unsupported_model",
        )


def check_builtin_tools(names: Sequence[str]) -> None:
    for name in names:
        if name in UNAVAILABLE_BUILTIN_TOOLS:
            raise invalid(
                f"built-in tool {name!r} is not available yet; run it as a client tool",
                "builtin_tool_unavailable",
            )
        if name not in LIVE_BUILTIN_TOOLS:
            known = ", ".join(sorted(LIVE_BUILTIN_TOOLS))
            raise invalid(f"unknown built-in tool {name!r}; known: {known}")
    if len(set(names)) != len(names):
        raise invalid("builtin_tools lists a tool twice")


def check_tool_names(
    tools: Sequence[dict[str, Any]],
    builtin_tools: Sequence[str],
    agent_tools: Sequence[dict[str, Any]] = (),
) -> None:
    names = [tool["function"]["name"] for tool in tools]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise invalid(f"tool names must be unique: {', '.join(duplicates)}")
    clashes = sorted(set(names) & set(builtin_tools))
    if clashes:
        raise invalid(f"tool names clash with built-in tools: {', '.join(clashes)}")
    for index, tool in enumerate(agent_tools):
        name = tool["name"]
        others = [other["name"] for other in agent_tools[:index]]
        if name in names or name in builtin_tools or name in others:
            raise invalid(
                f"agent_tools[{index}].name: {name!r} is already the name of another of the "
                "agent's tools"
            )


def check_agent_tool_targets(agent_tools: Sequence[dict[str, Any]], known: Collection[str]) -> None:
    """400 unless every agent tool names an agent of the same account (`known`)."""
    for index, tool in enumerate(agent_tools):
        if tool["agent_id"] not in known:
            raise invalid(
                f"agent_tools[{index}].agent_id: no agent {tool['agent_id']!r} in this account"
            )


def find_agent_cycle(agent_id: str, calls: Mapping[str, Collection[str]]) -> list[str] | None:
    """A path of calls from `agent_id` back to itself (`calls`: which agents each agent calls
    as tools), or None: an agent must never end up calling itself, however indirectly."""
    path: list[str] = [agent_id]
    done: set[str] = set()

    def visit(current: str) -> list[str] | None:
        for callee in sorted(calls.get(current, ())):
            if callee == agent_id:
                return [*path, callee]
            if callee in done or callee in path:
                continue
            path.append(callee)
            found = visit(callee)
            if found is not None:
                return found
            path.pop()
            done.add(callee)
        return None

    return visit(agent_id)


def parameters_problem(parameters: Any) -> str | None:
    """Why a tool's `parameters` is not a JSON Schema (2020-12) for an object, or None."""
    if not isinstance(parameters, dict):
        return "must be a JSON Schema object"
    try:
        Draft202012Validator.check_schema(parameters)
    except SchemaError as error:
        where = ".".join(str(part) for part in error.absolute_path)
        return f"not a valid JSON Schema{f' at {where}' if where else ''}: " + public_message(
            error.message
        )
    if parameters.get("type") != "object":
        return 'must describe an object (`"type": "object"`): tool arguments are an object'
    return None
