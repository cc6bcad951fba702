"""`juru agents create|apply --file agent.yaml` and `juru agents list`.

The file holds the API's agent fields. It is checked here only as far as the API cannot do it
(YAML syntax, a mapping, no unknown keys); the API validates the rest and names the field.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.table import Table

from juru.client import Agent, Juru
from juru.client import _calls as calls

AGENT_KEYS = (
    "name",
    "model_id",
    "system_prompt",
    "tools",
    "builtin_tools",
    "agent_tools",
    "mcp_servers",
    "max_steps",
)


class AgentFileError(Exception):
    """The file cannot be read as an agent (its message names the file, and the line)."""


def read_agent_file(path: Path) -> dict[str, Any]:
    """The agent fields of a YAML file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise AgentFileError(f"{path}: cannot read it ({error.strerror or error})") from None
    return parse_agent_yaml(text, str(path))


def parse_agent_yaml(text: str, source: str) -> dict[str, Any]:
    try:
        fields = yaml.safe_load(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = error.problem or error.context or "not valid YAML"
        raise AgentFileError(f"{source}{where}: {problem}") from None
    except yaml.YAMLError as error:
        raise AgentFileError(f"{source}: {error}") from None
    if not isinstance(fields, dict):
        kind = "nothing" if fields is None else f"a {type(fields).__name__}"
        raise AgentFileError(f"{source}: expected a mapping of agent fields, found {kind}")
    unknown = sorted(str(key) for key in fields if key not in AGENT_KEYS)
    if unknown:
        raise AgentFileError(
            f"{source}: unknown keys: {', '.join(unknown)} (an agent has: {', '.join(AGENT_KEYS)})"
        )
    return fields


def create_agent(client: Juru, fields: dict[str, Any]) -> Agent:
    """A new agent; the fields go as they are, for the API to validate."""
    return client.send(calls.create_agent(fields))


@dataclass(frozen=True)
class Applied:
    agent: Agent
    created: bool


def apply_agent(client: Juru, fields: dict[str, Any]) -> Applied:
    """Update the one agent named like the file's `name` with the file's fields (the fields the
    file leaves out keep their values), or create it when there is none."""
    name = fields.get("name")
    same = [agent for agent in client.agents.list(limit=100) if agent.name == name]
    if len(same) > 1:
        ids = ", ".join(agent.id for agent in same)
        raise AgentFileError(f"{len(same)} agents are named {name!r} ({ids}); apply needs one")
    if not same:
        return Applied(create_agent(client, fields), created=True)
    return Applied(client.send(calls.update_agent(same[0].id, fields)), created=False)


def agents_table(agents: Iterable[Agent]) -> Table:
    table = Table("id", "name", "model", "tools", "max steps")
    for agent in agents:
        tools = [tool.function.name for tool in agent.tools]
        tools += [f"{name} (built-in)" for name in agent.builtin_tools]
        tools += [f"{tool.name} (agent)" for tool in agent.agent_tools]
        tools += [f"{server.name}__* (MCP)" for server in agent.mcp_servers]
        table.add_row(
            agent.id, agent.name, agent.model_id, ", ".join(tools) or "-", str(agent.max_steps)
        )
    return table
