"""`juru chat AGENT_ID`: a conversation with a hosted agent, one run per line typed.

Each run is followed on its event stream: the model's text as it writes it, each tool call and
result, status changes. A pause for client tools is answered by the `--tools` handlers, or by
the user at an `output for ...>` prompt. Ctrl-C during a run cancels it; Ctrl-C or Ctrl-D at
the prompt ends the chat.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from juru.client import Agent, Juru, JuruError, Message, Run, RunEvent, ToolCall, tool_calls
from juru.client.models import MessageDelta
from juru.core.references import ReferenceLoadError, import_reference
from juru.terminal.connection import error_line
from juru.terminal.screen import Screen, arguments_text

ToolHandlers = Mapping[str, Callable[..., Any]]
PROMPT = "you> "


class ToolsLoadError(Exception):
    """`--tools module:attribute` does not name a dict of tool functions."""


def load_tool_handlers(target: str) -> dict[str, Callable[..., Any]]:
    """Import `module:attribute` (from the Python path or the current directory): a dict of
    tool name -> function (sync or async) called with the call's arguments."""
    if str(Path.cwd()) not in sys.path:
        sys.path.append(str(Path.cwd()))
    try:
        value = import_reference(target)
    except ReferenceLoadError as error:
        raise ToolsLoadError(str(error)) from error
    if not isinstance(value, Mapping) or not value:
        raise ToolsLoadError(f"{target} must be a non-empty dict of tool name -> function")
    wrong = sorted(str(name) for name, f in value.items() if not callable(f))
    if wrong:
        raise ToolsLoadError(f"{target}: not functions: {', '.join(wrong)}")
    return {str(name): function for name, function in value.items()}


def prompt_loop(screen: Screen, take_turn: Callable[[str], None]) -> int:
    """Read lines at `you> ` until Ctrl-D or Ctrl-C; each non-empty line is a turn."""
    while True:
        try:
            line = screen.ask(PROMPT)
        except (EOFError, KeyboardInterrupt):
            screen.line("")
            screen.note("bye")
            return 0
        if line.strip():
            take_turn(line)


@dataclass
class TurnView:
    """What a turn has shown so far: messages streamed delta by delta, tool outputs given here
    (their `message.completed` is not shown twice) and the last status."""

    streamed: set[str] = field(default_factory=set)
    answered: set[str] = field(default_factory=set)
    status: str | None = None


@dataclass
class HostedChat:
    """One chat session: one thread of `agent`, a run per turn."""

    client: Juru
    agent: Agent
    thread_id: str
    tools: ToolHandlers
    screen: Screen

    def turn(self, text: str) -> None:
        """Run `text` to its end; Ctrl-C cancels it. An API error ends the turn, not the chat."""
        run: Run | None = None
        try:
            run = self.client.runs.create(self.thread_id, text)
            self.finished(self.follow(run))
        except KeyboardInterrupt:
            self.cancel(run)
        except JuruError as error:
            self.screen.error(error_line(error, self.client.base_url))

    def follow(self, run: Run) -> Run:
        view, latest = TurnView(), run
        for event in self.client.runs.stream(run.id):
            self.show(event, view)
            if event.run is None:
                continue
            latest = event.run
            if latest.status == "requires_action":
                self.answer(latest, view)
        return latest

    def show(self, event: RunEvent, view: TurnView) -> None:
        data = event.data
        if isinstance(data, MessageDelta):
            if data.message_id not in view.streamed:
                view.streamed.add(data.message_id)
                self.screen.speaker(self.agent.name)
            self.screen.stream(data.delta)
        elif isinstance(data, Message) and not data.depth:
            # A message with a depth is a child run's (an agent this one called).
            self.show_message(data, view)
        elif isinstance(data, Run) and data.status != view.status:
            view.status = data.status
            if not data.is_terminal:
                self.screen.note(data.status.replace("_", " "))

    def show_message(self, message: Message, view: TurnView) -> None:
        if message.role == "assistant":
            if message.content and message.id not in view.streamed:
                self.screen.speaker(self.agent.name)
                self.screen.stream(message.content)
            self.screen.end_line()
            for call in message.tool_calls or []:
                self.screen.tool_call(call.name, call.arguments)
        elif message.role == "tool" and message.tool_call_id not in view.answered:
            self.screen.tool_result(message.name, message.content)

    def answer(self, run: Run, view: TurnView) -> None:
        """Each pending call's output, from its handler or typed by the user, sent at once."""
        outputs = []
        for call in run.pending_tool_calls or []:
            outputs.append(tool_calls.output(call, self.output_of(call)))
            view.answered.add(call.id)
        self.client.runs.submit_tool_outputs(run.id, outputs)

    def output_of(self, call: ToolCall) -> str:
        handler = self.tools.get(call.name)
        if handler is None:
            return self.screen.ask(f"output for {call.name}({arguments_text(call.arguments)})> ")
        output, failed = tool_calls.run_blocking(handler, call)
        self.screen.tool_result(call.name, output, failed)
        return output

    def finished(self, run: Run) -> None:
        """The turn's last line: status, steps and what the run cost."""
        parts = [run.status, f"{run.step_count} steps", f"cost Rp{run.cost_rupiah}"]
        style = "green" if run.status == "succeeded" else "red"
        self.screen.line("  " + " · ".join(parts), style)
        if run.error:
            self.screen.error(f"  {run.error}")

    def cancel(self, run: Run | None) -> None:
        """Ctrl-C: cancel the turn's run (the thread's newest, if it was being created)."""
        self.screen.mid_line = True  # the terminal has echoed ^C on the current line
        self.screen.end_line()
        try:
            if run is None:
                newest = self.client.runs.list(self.thread_id, limit=1).page().data
                run = newest[0] if newest and not newest[0].is_terminal else None
            if run is None:
                self.screen.note("interrupted before the run started")
                return
            cancelled = self.client.runs.cancel(run.id)
        except JuruError as error:
            self.screen.error(error_line(error, self.client.base_url))
            return
        if cancelled.status == "cancelled":
            self.screen.line(f"  cancelled run {run.id}", "yellow")
        else:
            self.screen.line(f"  run {run.id} had already ended: {cancelled.status}", "yellow")


def start_hosted_chat(
    client: Juru, agent_id: str, tools: ToolHandlers, screen: Screen
) -> HostedChat:
    """The agent and a new thread of it (API errors raise)."""
    agent = client.agents.get(agent_id)
    thread = client.threads.create(agent.id, title="juru chat")
    names = ", ".join(sorted(tools)) or "none"
    screen.note(
        f"chatting with {agent.name} ({agent.model_id}) on thread {thread.id}"
        f" · local tools: {names} · Ctrl-C cancels a run, Ctrl-D exits"
    )
    return HostedChat(client, agent, thread.id, tools, screen)
