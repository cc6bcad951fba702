"""Juru in the terminal: `juru chat` and `juru agents`, talking to a server (local or remote)
through `juru.client.Juru` and drawing with Rich. See docs/terminal.md."""
