"""What the chats print and ask, with Rich: streamed text, tool calls and results, short
status notes, and prompts read from the terminal."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.text import Text

with contextlib.suppress(ImportError):  # line editing and history at the prompts (not Windows)
    import readline  # noqa: F401


def arguments_text(arguments: Any) -> str:
    """A call's arguments as compact JSON (the model's text as it is when it is not JSON)."""
    value = arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return arguments
    return json.dumps(value, ensure_ascii=False)


@dataclass
class Screen:
    """The chat's output. Text streams onto the current line; anything else starts a line."""

    out: Console = field(default_factory=lambda: Console(highlight=False))
    mid_line: bool = False

    def stream(self, text: str) -> None:
        self.out.print(Text(text), end="", soft_wrap=True)
        self.mid_line = not text.endswith("\n")

    def speaker(self, name: str) -> None:
        self.end_line()
        self.out.print(Text(f"{name}> ", style="bold cyan"), end="", soft_wrap=True)
        self.mid_line = True

    def end_line(self) -> None:
        if self.mid_line:
            self.out.print()
            self.mid_line = False

    def line(self, text: str, style: str = "") -> None:
        self.end_line()
        self.out.print(Text(text, style=style), soft_wrap=True)

    def note(self, text: str) -> None:
        self.line(f"  · {text}", "dim")

    def tool_call(self, name: str, arguments: Any) -> None:
        self.line(f"  → {name}({arguments_text(arguments)})", "yellow")

    def tool_result(self, name: str | None, content: str, failed: bool = False) -> None:
        self.line(f"  ← {name or 'tool'}{' failed' if failed else ''}: {content}", "green")

    def error(self, text: str) -> None:
        self.line(text, "bold red")

    def ask(self, prompt: str) -> str:
        """A line typed at `prompt` (EOFError on Ctrl-D, KeyboardInterrupt on Ctrl-C)."""
        self.end_line()
        self.out.file.flush()
        return input(prompt)
