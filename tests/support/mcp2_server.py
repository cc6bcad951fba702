"""A tiny MCP server built with the newest official SDK (2.x, where FastMCP became `MCPServer`),
run by `.venv-mcp2/bin/python`: it prints its port, then serves Streamable HTTP at /mcp."""

import socket

import uvicorn
from mcp.server.mcpserver import MCPServer

server = MCPServer("juru-test-mcp2")


@server.tool()
def shout(text: str) -> str:
    """Say the text back in capitals."""
    return f"{text.upper()} (from an MCP 2.x server)"


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(sock.getsockname()[1], flush=True)
    app = server.streamable_http_app(stateless_http=True, json_response=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main()
