"""`juru chat --feature NAME`: a conversation with a playground feature.

A turn streams `text` (the model's text as it writes it), `step` (a finished node: its tool
calls and results) and last `turn`. A turn that pauses for review asks, per action, approve,
edit (new JSON arguments) or reject (a message), then resumes the thread with the decisions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from juru.client import Juru, JuruError
from juru.terminal.connection import error_line
from juru.terminal.screen import Screen, arguments_text

TurnEvents = Iterator[tuple[str, dict[str, Any]]]
DECISIONS = ("approve", "edit", "reject")


@dataclass
class FeatureChat:
    """One conversation (a playground thread, made by the server at the first turn)."""

    client: Juru
    feature: str
    screen: Screen
    thread_id: str | None = None

    def turn(self, text: str) -> None:
        """Send `text`, then answer reviews until the turn ends. Ctrl-C abandons the turn and
        starts a new conversation (the playground has no cancel)."""
        try:
            turn = self.play(
                self.client.playground.stream(self.feature, text, thread_id=self.thread_id)
            )
            while turn is not None and turn.get("pending_review"):
                decisions = self.review(turn["pending_review"])
                value = {"decisions": decisions}
                turn = self.play(
                    self.client.playground.resume(self.feature, turn["thread_id"], value)
                )
        except KeyboardInterrupt:
            self.screen.mid_line = True  # the terminal has echoed ^C on the current line
            self.screen.end_line()
            self.screen.line("  interrupted; the next message starts a new conversation", "yellow")
            self.thread_id = None
        except JuruError as error:
            self.screen.error(error_line(error, self.client.base_url))

    def play(self, events: TurnEvents) -> dict[str, Any] | None:
        """Show a turn's events; the final turn (None when the stream failed)."""
        streamed = False
        for kind, data in events:
            if kind == "text" and data.get("text"):
                if not streamed:
                    self.screen.speaker(self.feature)
                    streamed = True
                self.screen.stream(str(data["text"]))
            elif kind == "step":
                self.show_step(data)
            elif kind == "turn":
                self.thread_id = str(data["thread_id"])
                self.show_turn(data, streamed)
                return data
            elif kind == "error":
                self.screen.error(f"error: {data.get('detail', data)}")
        return None

    def show_step(self, step: dict[str, Any]) -> None:
        for event in step.get("events") or []:
            if event.get("type") == "tool_call":
                self.screen.tool_call(str(event.get("name")), event.get("args") or {})
            elif event.get("type") == "tool_result":
                failed = bool(event.get("failed"))
                self.screen.tool_result(event.get("name"), str(event.get("content")), failed)

    def show_turn(self, turn: dict[str, Any], streamed: bool) -> None:
        if turn.get("answer") and not streamed:
            self.screen.speaker(self.feature)
            self.screen.stream(str(turn["answer"]))
        self.screen.end_line()
        error = turn.get("error")
        if error:
            self.screen.error(f"error: {error.get('type')}: {error.get('message')}")
        elif turn.get("pending_review"):
            self.screen.note("waiting for your review")
        else:
            self.screen.line(f"  done in {turn.get('seconds', 0):.1f}s", "green")

    def review(self, pending: dict[str, Any]) -> list[dict[str, Any]]:
        """One decision per action request, asked in order."""
        requests = pending.get("action_requests") or []
        return [self.decide(request) for request in requests]

    def decide(self, request: dict[str, Any]) -> dict[str, Any]:
        name, args = str(request.get("name")), request.get("args") or {}
        self.screen.line(f"  review: {name}({arguments_text(args)})", "bold yellow")
        if request.get("description"):
            self.screen.line(f"  {request['description']}", "dim")
        while True:
            answer = self.screen.ask("approve / edit / reject? ").strip().lower()
            if answer in ("a", "approve"):
                return {"type": "approve"}
            if answer in ("e", "edit"):
                return {"type": "edit", "edited_action": {"name": name, "args": self.new_args()}}
            if answer in ("r", "reject"):
                message = self.screen.ask("message for the model> ").strip()
                return {"type": "reject", "message": message} if message else {"type": "reject"}
            self.screen.note("type approve, edit or reject")

    def new_args(self) -> dict[str, Any]:
        while True:
            text = self.screen.ask("arguments (JSON object)> ")
            try:
                value = json.loads(text)
            except ValueError as error:
                self.screen.note(f"not JSON: {error}")
                continue
            if isinstance(value, dict):
                return value
            self.screen.note("the arguments must be a JSON object")


def start_feature_chat(client: Juru, feature: str, screen: Screen) -> FeatureChat:
    """Check that the server has `feature` (API errors raise; an unknown name is a ValueError
    naming the features there are)."""
    names = [str(item.get("name")) for item in client.playground.features()]
    if feature not in names:
        raise ValueError(f"no feature {feature!r} on this server (it has: {', '.join(names)})")
    screen.note(f"chatting with the playground feature {feature} · Ctrl-D exits")
    return FeatureChat(client, feature, screen)
