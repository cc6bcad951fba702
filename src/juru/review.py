"""Human review of tool calls: the request format and the decision rules (pure functions).

A paused agent offers `{"action_requests": [...], "review_configs": [...]}`; the reviewer answers
`{"decisions": [...]}`, one decision per action request, in the same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

DecisionType = Literal["approve", "edit", "reject"]
ALL_DECISIONS: tuple[DecisionType, ...] = ("approve", "edit", "reject")
DEFAULT_REJECTION = "The reviewer rejected this tool call, so it was not executed."


class InvalidReviewError(ValueError):
    """The decisions do not answer the pending review; nothing was resumed."""


@dataclass(frozen=True)
class Decision:
    """One validated decision."""

    type: DecisionType
    edited_name: str | None = None
    edited_args: dict[str, Any] | None = None
    message: str | None = None


def review_request(
    calls: Iterable[Mapping[str, Any]], descriptions: Mapping[str, str]
) -> dict[str, Any]:
    """The interrupt payload for tool calls that need approval (in the model's order)."""
    action_requests = [
        {
            "name": call["name"],
            "args": call["args"],
            "description": descriptions.get(call["name"], f"Tool call {call['name']}"),
        }
        for call in calls
    ]
    names = list(dict.fromkeys(request["name"] for request in action_requests))
    review_configs = [
        {"action_name": name, "allowed_decisions": list(ALL_DECISIONS)} for name in names
    ]
    return {"action_requests": action_requests, "review_configs": review_configs}


def is_review_request(value: Any) -> bool:
    """Whether an interrupt value is a tool-call review (as opposed to any other pause)."""
    return isinstance(value, Mapping) and isinstance(value.get("action_requests"), list)


def _allowed_decisions(request: Mapping[str, Any], name: str) -> Sequence[str]:
    for config in request.get("review_configs") or []:
        if isinstance(config, Mapping) and config.get("action_name") == name:
            allowed = config.get("allowed_decisions")
            if isinstance(allowed, list):
                return [str(item) for item in allowed]
    return ALL_DECISIONS


def _parse_decision(raw: Any, index: int, allowed: Sequence[str]) -> Decision:
    position = f"decision {index + 1}"
    if not isinstance(raw, Mapping):
        raise InvalidReviewError(f"{position} must be an object with a 'type'")
    kind = raw.get("type")
    if kind not in allowed:
        raise InvalidReviewError(
            f"{position}: type {kind!r} is not allowed here; use one of {', '.join(allowed)}"
        )
    if kind == "edit":
        action = raw.get("edited_action")
        if not isinstance(action, Mapping):
            raise InvalidReviewError(f"{position}: an edit needs an 'edited_action' object")
        name, args = action.get("name"), action.get("args")
        if not isinstance(name, str):
            raise InvalidReviewError(f"{position}: edited_action.name must be a string")
        if not isinstance(args, dict):
            raise InvalidReviewError(f"{position}: edited_action.args must be an object")
        return Decision("edit", edited_name=name, edited_args=dict(args))
    if kind == "reject":
        message = raw.get("message")
        if message is not None and not isinstance(message, str):
            raise InvalidReviewError(f"{position}: a rejection message must be a string")
        return Decision("reject", message=message)
    return Decision("approve")


def validate_review(request: Mapping[str, Any], value: Any) -> list[Decision]:
    """Check `value` against the pending `request`; the first failure raises InvalidReviewError."""
    decisions = value.get("decisions") if isinstance(value, Mapping) else None
    if not isinstance(decisions, list):
        raise InvalidReviewError('the review must be an object {"decisions": [...]}')
    action_requests = request["action_requests"]
    if len(decisions) != len(action_requests):
        raise InvalidReviewError(
            f"expected {len(action_requests)} decision(s), one per action request, "
            f"but got {len(decisions)}"
        )
    return [
        _parse_decision(raw, index, _allowed_decisions(request, action["name"]))
        for index, (raw, action) in enumerate(zip(decisions, action_requests, strict=True))
    ]
