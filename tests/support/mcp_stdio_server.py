"""An MCP server over stdio (the installed SDK's FastMCP), for an operator-defined server that
Juru starts itself: `python tests/support/mcp_stdio_server.py`."""

import os

from mcp.server.fastmcp import FastMCP

server = FastMCP("juru-test-notes")


@server.tool()
def read_note(title: str) -> str:
    """Read a note by its title."""
    return f"note {title}: {os.environ.get('NOTES_GREETING', 'no greeting')}"


@server.tool()
def delete_note(title: str) -> str:
    """Delete a note (not allowed to agents in the tests)."""
    return f"deleted {title}"


if __name__ == "__main__":
    server.run("stdio")
