"""Tests for the pure review rules: the request format and validating decisions."""

from __future__ import annotations

from typing import Any

import pytest

from juru.review import (
    ALL_DECISIONS,
    Decision,
    InvalidReviewError,
    is_review_request,
    review_request,
    validate_review,
)

EMAIL_ARGS = {"to": "ana@example.com", "subject": "Report", "body": "Attached."}
WEATHER_ARGS = {"location": "Paris"}


def two_call_request() -> dict[str, Any]:
    return review_request(
        [
            {"name": "send_email", "args": EMAIL_ARGS, "id": "call_1"},
            {"name": "get_weather", "args": WEATHER_ARGS, "id": "call_2"},
        ],
        {"send_email": "Send an e-mail"},
    )


def request_allowing(*allowed: str) -> dict[str, Any]:
    return {
        "action_requests": [{"name": "send_email", "args": EMAIL_ARGS, "description": "d"}],
        "review_configs": [{"action_name": "send_email", "allowed_decisions": list(allowed)}],
    }


def refusal(request: dict[str, Any], value: Any) -> str:
    with pytest.raises(InvalidReviewError) as error:
        validate_review(request, value)
    return str(error.value)


# --- review_request -------------------------------------------------------------------------------


def test_review_request_lists_calls_in_order_with_descriptions() -> None:
    request = review_request(
        [
            {"name": "send_email", "args": EMAIL_ARGS, "id": "call_1"},
            {"name": "get_weather", "args": WEATHER_ARGS, "id": "call_2"},
            {"name": "send_email", "args": {"to": "bob@example.com"}, "id": "call_3"},
        ],
        {"send_email": "Send an e-mail", "unused": "Never asked"},
    )
    assert request["action_requests"] == [
        {"name": "send_email", "args": EMAIL_ARGS, "description": "Send an e-mail"},
        {"name": "get_weather", "args": WEATHER_ARGS, "description": "Tool call get_weather"},
        {"name": "send_email", "args": {"to": "bob@example.com"}, "description": "Send an e-mail"},
    ]


def test_review_request_has_one_config_per_distinct_tool_in_first_seen_order() -> None:
    request = review_request(
        [
            {"name": "send_email", "args": {}},
            {"name": "get_weather", "args": {}},
            {"name": "send_email", "args": {}},
            {"name": "delete_file", "args": {}},
        ],
        {},
    )
    assert request["review_configs"] == [
        {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]},
        {"action_name": "get_weather", "allowed_decisions": ["approve", "edit", "reject"]},
        {"action_name": "delete_file", "allowed_decisions": ["approve", "edit", "reject"]},
    ]
    assert list(ALL_DECISIONS) == ["approve", "edit", "reject"]


def test_review_request_of_no_calls_is_empty() -> None:
    assert review_request([], {}) == {"action_requests": [], "review_configs": []}


# --- is_review_request --------------------------------------------------------------------------


def test_a_review_request_is_recognised() -> None:
    assert is_review_request(two_call_request()) is True
    assert is_review_request({"action_requests": []}) is True


@pytest.mark.parametrize(
    "value",
    [
        {"question": "What is your name?"},
        {"action_requests": "send_email"},
        {"action_requests": None},
        [{"name": "send_email"}],
        "What is your name?",
        None,
        42,
    ],
)
def test_other_pauses_are_not_review_requests(value: Any) -> None:
    assert is_review_request(value) is False


# --- validate_review: shape and count ------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [None, [], "approve", {"decision": []}, {"decisions": {"type": "approve"}}],
)
def test_the_review_must_be_an_object_with_a_decisions_list(value: Any) -> None:
    assert 'the review must be an object {"decisions": [...]}' in refusal(two_call_request(), value)


@pytest.mark.parametrize("count", [0, 1, 3])
def test_count_mismatch_gives_both_numbers(count: int) -> None:
    message = refusal(two_call_request(), {"decisions": [{"type": "approve"}] * count})
    assert "expected 2 decision(s)" in message
    assert f"but got {count}" in message


def test_a_decision_must_be_an_object() -> None:
    message = refusal(two_call_request(), {"decisions": ["approve", {"type": "approve"}]})
    assert message == "decision 1 must be an object with a 'type'"


@pytest.mark.parametrize("kind", [None, "maybe", "APPROVE"])
def test_unknown_decision_types_are_refused(kind: Any) -> None:
    message = refusal(request_allowing(*ALL_DECISIONS), {"decisions": [{"type": kind}]})
    assert f"decision 1: type {kind!r} is not allowed here" in message
    assert "use one of approve, edit, reject" in message


# --- validate_review: allowed decisions -----------------------------------------------------------


def test_allowed_decisions_come_from_the_review_configs() -> None:
    request = request_allowing("approve", "reject")
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {}}}
    message = refusal(request, {"decisions": [edit]})
    assert "decision 1: type 'edit' is not allowed here; use one of approve, reject" in message
    assert validate_review(request, {"decisions": [{"type": "approve"}]}) == [Decision("approve")]
    assert validate_review(request, {"decisions": [{"type": "reject"}]}) == [Decision("reject")]


def test_each_tool_has_its_own_allowed_decisions() -> None:
    request = {
        "action_requests": [
            {"name": "send_email", "args": {}, "description": "d"},
            {"name": "get_weather", "args": {}, "description": "d"},
        ],
        "review_configs": [
            {"action_name": "send_email", "allowed_decisions": ["reject"]},
            {"action_name": "get_weather", "allowed_decisions": ["approve"]},
        ],
    }
    assert validate_review(request, {"decisions": [{"type": "reject"}, {"type": "approve"}]}) == [
        Decision("reject"),
        Decision("approve"),
    ]
    message = refusal(request, {"decisions": [{"type": "reject"}, {"type": "reject"}]})
    assert message.startswith("decision 2: type 'reject' is not allowed here; use one of approve")


@pytest.mark.parametrize(
    "request_value",
    [
        pytest.param(
            {"action_requests": [{"name": "send_email", "args": {}}]}, id="no-review-configs"
        ),
        pytest.param(
            {
                "action_requests": [{"name": "send_email", "args": {}}],
                "review_configs": [{"action_name": "other", "allowed_decisions": ["approve"]}],
            },
            id="config-for-another-tool",
        ),
        pytest.param(
            {
                "action_requests": [{"name": "send_email", "args": {}}],
                "review_configs": [{"action_name": "send_email", "allowed_decisions": "reject"}],
            },
            id="allowed-decisions-not-a-list",
        ),
    ],
)
def test_without_a_usable_config_every_decision_is_allowed(request_value: dict[str, Any]) -> None:
    for raw, expected in [
        ({"type": "approve"}, Decision("approve")),
        ({"type": "reject"}, Decision("reject")),
        (
            {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "x"}}},
            Decision("edit", edited_name="send_email", edited_args={"to": "x"}),
        ),
    ]:
        assert validate_review(request_value, {"decisions": [raw]}) == [expected]


# --- validate_review: edit and reject -------------------------------------------------------------


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        ({"type": "edit"}, "decision 1: an edit needs an 'edited_action' object"),
        (
            {"type": "edit", "edited_action": "send_email"},
            "decision 1: an edit needs an 'edited_action' object",
        ),
        (
            {"type": "edit", "edited_action": {"args": {}}},
            "decision 1: edited_action.name must be a string",
        ),
        (
            {"type": "edit", "edited_action": {"name": 7, "args": {}}},
            "decision 1: edited_action.name must be a string",
        ),
        (
            {"type": "edit", "edited_action": {"name": "send_email"}},
            "decision 1: edited_action.args must be an object",
        ),
        (
            {"type": "edit", "edited_action": {"name": "send_email", "args": [1, 2]}},
            "decision 1: edited_action.args must be an object",
        ),
        (
            {"type": "reject", "message": 42},
            "decision 1: a rejection message must be a string",
        ),
        (
            {"type": "reject", "message": ["no"]},
            "decision 1: a rejection message must be a string",
        ),
    ],
)
def test_invalid_edits_and_rejections(decision: dict[str, Any], message: str) -> None:
    assert refusal(request_allowing(*ALL_DECISIONS), {"decisions": [decision]}) == message


def test_a_rejection_message_is_optional() -> None:
    request = request_allowing(*ALL_DECISIONS)
    assert validate_review(request, {"decisions": [{"type": "reject"}]}) == [
        Decision("reject", message=None)
    ]
    assert validate_review(request, {"decisions": [{"type": "reject", "message": None}]}) == [
        Decision("reject", message=None)
    ]
    assert validate_review(request, {"decisions": [{"type": "reject", "message": "Not now"}]}) == [
        Decision("reject", message="Not now")
    ]


def test_the_first_failure_wins() -> None:
    request = review_request([{"name": "send_email", "args": {}}] * 3, {})
    decisions = [
        {"type": "approve"},
        {"type": "edit", "edited_action": {"name": 1, "args": {}}},
        {"type": "reject", "message": 5},
    ]
    assert refusal(request, {"decisions": decisions}) == (
        "decision 2: edited_action.name must be a string"
    )
    # A count mismatch is reported before any decision is looked at.
    assert refusal(request, {"decisions": decisions[1:]}).startswith("expected 3 decision(s)")


# --- the decisions returned ---------------------------------------------------------------------


def test_valid_decisions_are_returned_in_order() -> None:
    request = review_request([{"name": "send_email", "args": EMAIL_ARGS}] * 3, {})
    edited_args = {"to": "bob@example.com", "subject": "Hi", "body": "Edited."}
    decisions = validate_review(
        request,
        {
            "decisions": [
                {"type": "approve", "message": "ignored"},
                {"type": "edit", "edited_action": {"name": "send_email", "args": edited_args}},
                {"type": "reject", "message": "Wrong person"},
            ]
        },
    )
    assert decisions == [
        Decision("approve"),
        Decision("edit", edited_name="send_email", edited_args=edited_args),
        Decision("reject", message="Wrong person"),
    ]
    approve, edit, reject = decisions
    assert (approve.edited_name, approve.edited_args, approve.message) == (None, None, None)
    assert edit.message is None
    assert reject.edited_name is None
    assert reject.edited_args is None
    # The edited arguments are a copy: later changes to the request body do not leak in.
    edited_args["body"] = "Changed afterwards."
    assert edit.edited_args == {"to": "bob@example.com", "subject": "Hi", "body": "Edited."}


def test_an_edit_may_rename_the_tool() -> None:
    decisions = validate_review(
        request_allowing(*ALL_DECISIONS),
        {"decisions": [{"type": "edit", "edited_action": {"name": "draft_email", "args": {}}}]},
    )
    assert decisions == [Decision("edit", edited_name="draft_email", edited_args={})]


def test_decisions_are_frozen() -> None:
    decision = Decision("approve")
    with pytest.raises(AttributeError):
        decision.type = "reject"  # type: ignore[misc]
