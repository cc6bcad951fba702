"""MCP servers as tool sources: the operator's named servers (`JURU_MCP_SERVERS`, a TOML file)
and the connection settings of a server an agent names.

```toml
[servers.files]              # stdio: Juru starts the command for each session
command = "python"
args = ["-m", "files_server"]
env = { FILES_ROOT = "/srv/files" }
allowed_tools = ["read_file"]

[servers.search]             # Streamable HTTP
url = "https://search.internal/mcp"
headers = { Authorization = "Bearer ..." }
```
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

SERVER_NAME = r"^[a-zA-Z0-9_-]{1,32}$"
SERVER_NAME_RE = re.compile(SERVER_NAME)


class McpConfigError(ValueError):
    """The operator's MCP server file cannot be used (the message says where and why)."""


class _OperatorEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    url: str | None = Field(default=None, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    command: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = None
    cwd: str | None = None
    allowed_tools: list[str] | None = None

    @model_validator(mode="after")
    def _one_transport(self) -> _OperatorEntry:
        if (self.url is None) == (self.command is None):
            raise ValueError("give either `url` (Streamable HTTP) or `command` (stdio)")
        if self.command is not None and self.headers:
            raise ValueError("`headers` are for `url` servers")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("`args`, `env` and `cwd` are for `command` servers")
        return self


@dataclass(frozen=True)
class OperatorServer:
    """A server the operator defined; agents name it, and it is trusted (any address)."""

    name: str
    url: str | None
    headers: dict[str, str]
    command: str | None
    args: tuple[str, ...]
    env: dict[str, str] | None
    cwd: str | None
    allowed_tools: frozenset[str] | None

    def connection(self, timeout_seconds: float) -> dict[str, Any]:
        """Its langchain-mcp-adapters connection."""
        if self.command is not None:
            stdio: dict[str, Any] = {
                "transport": "stdio",
                "command": self.command,
                "args": list(self.args),
            }
            if self.env is not None:
                stdio["env"] = dict(self.env)
            if self.cwd is not None:
                stdio["cwd"] = self.cwd
            return stdio
        return {
            "transport": "streamable_http",
            "url": self.url,
            "headers": dict(self.headers),
            "timeout": timeout_seconds,
            "sse_read_timeout": timeout_seconds,
        }


def load_operator_servers(path: Path | None) -> dict[str, OperatorServer]:
    """The servers of the operator's TOML file by name (none without a file)."""
    if path is None:
        return {}
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise McpConfigError(f"JURU_MCP_SERVERS {str(path)!r}: {error}") from None
    unknown = sorted(set(data) - {"servers"})
    if unknown:
        raise McpConfigError(
            f"JURU_MCP_SERVERS: unknown tables {unknown}; servers go in [servers.NAME]"
        )
    servers: dict[str, OperatorServer] = {}
    for name, entry in dict(data.get("servers", {})).items():
        if not SERVER_NAME_RE.fullmatch(name):
            raise McpConfigError(
                f"JURU_MCP_SERVERS: server name {name!r} must be 1-32 letters, digits, _ or -"
            )
        try:
            parsed = _OperatorEntry.model_validate(entry)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in item['loc']) or name}: {item['msg']}"
                for item in error.errors()
            )
            raise McpConfigError(f"JURU_MCP_SERVERS: servers.{name}: {problems}") from None
        servers[name] = OperatorServer(
            name=name,
            url=parsed.url,
            headers=parsed.headers,
            command=parsed.command,
            args=tuple(parsed.args),
            env=parsed.env,
            cwd=parsed.cwd,
            allowed_tools=None if parsed.allowed_tools is None else frozenset(parsed.allowed_tools),
        )
    return servers
