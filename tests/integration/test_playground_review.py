"""Human review through the playground: every validation rule and every decision's effect."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from httpx import AsyncClient

from juru.app import create_app
from juru.review import DEFAULT_REJECTION
from juru.settings import Settings
from tests.conftest import start_client
from tests.integration.test_playground_api import nodes, say
from tests.support.hosted import demo_answer

HITL = "Human-in-the-loop"
EMAIL_ANA = "Send an email to ana@example.com about the weekly report"
MIXED = "What is the weather in Paris? Then email it to bob@example.com"


async def decide(client: AsyncClient, thread_id: str, value: Any) -> Any:
    return await client.post(
        "/playground/resume", json={"feature": HITL, "thread_id": thread_id, "value": value}
    )


async def paused(client: AsyncClient, message: str = EMAIL_ANA) -> dict[str, Any]:
    turn: dict[str, Any] = (await say(client, HITL, message)).json()
    assert turn["pending_review"] is not None, turn
    return turn


def results(turn: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for step in turn["steps"] for e in step["events"] if e["type"] == "tool_result"]


async def test_a_guarded_call_pauses_with_the_review_request(client: AsyncClient) -> None:
    turn = await paused(client)
    assert turn["answer"] is None and turn["error"] is None
    review = turn["pending_review"]
    assert review["action_requests"] == [
        {
            "name": "send_email",
            "args": {"to": "ana@example.com", "subject": "the weekly report", "body": EMAIL_ANA},
            "description": "Send an e-mail message to a recipient.",
        }
    ]
    assert review["review_configs"] == [
        {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}
    ]


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ({"decisions": []}, "expected 1 decision(s), one per action request, but got 0"),
        (
            {"decisions": [{"type": "approve"}, {"type": "approve"}]},
            "expected 1 decision(s), one per action request, but got 2",
        ),
        ({"decisions": [{"type": "maybe"}]}, "type 'maybe' is not allowed"),
        ({"decisions": [{}]}, "type None is not allowed"),
        ({"decisions": ["approve"]}, "must be an object"),
        ({"decisions": [{"type": "edit"}]}, "needs an 'edited_action'"),
        (
            {"decisions": [{"type": "edit", "edited_action": {"args": {}}}]},
            "edited_action.name must be a string",
        ),
        (
            {"decisions": [{"type": "edit", "edited_action": {"name": "send_email", "args": []}}]},
            "edited_action.args must be an object",
        ),
        ({"decisions": [{"type": "reject", "message": 5}]}, "message must be a string"),
        ({"approve": True}, 'must be an object {"decisions"'),
        ("approve", 'must be an object {"decisions"'),
        (None, 'must be an object {"decisions"'),
    ],
)
async def test_a_malformed_review_is_400_and_leaves_the_action_pending(
    client: AsyncClient, value: Any, complaint: str
) -> None:
    turn = await paused(client)
    refused = await decide(client, turn["thread_id"], value)
    assert refused.status_code == 400
    assert complaint in refused.json()["detail"]
    blocked = await say(client, HITL, "another message", thread_id=turn["thread_id"])
    assert blocked.status_code == 400 and "waiting for a review" in blocked.json()["detail"]
    accepted = await decide(client, turn["thread_id"], {"decisions": [{"type": "approve"}]})
    assert accepted.status_code == 200
    assert accepted.json()["error"] is None
    assert "ana@example.com" in results(accepted.json())[0]["content"]


async def test_the_first_failing_decision_is_reported(client: AsyncClient) -> None:
    turn = await paused(client, "Email ana@example.com and also email bob@example.com")
    assert len(turn["pending_review"]["action_requests"]) == 1
    both = await paused(client, "Send an email to ana@example.com")
    refused = await decide(client, both["thread_id"], {"decisions": [{"type": "edit"}]})
    assert "decision 1" in refused.json()["detail"]


async def test_approve_runs_the_tool(client: AsyncClient) -> None:
    turn = await paused(client)
    resumed = (await decide(client, turn["thread_id"], {"decisions": [{"type": "approve"}]})).json()
    assert nodes(resumed) == [(0, "review"), (0, "tool_node"), (0, "llm_call")]
    [result] = results(resumed)
    assert result["name"] == "send_email" and result["failed"] is False
    assert "E-mail to ana@example.com" in result["content"]
    assert resumed["answer"] == demo_answer("send_email", result["content"])
    assert resumed["pending_review"] is None


async def test_edit_runs_the_tool_with_the_replacement_arguments(client: AsyncClient) -> None:
    turn = await paused(client)
    edited = {"name": "send_email", "args": {"to": "cak@example.com", "subject": "Hi", "body": "x"}}
    resumed = (
        await decide(
            client, turn["thread_id"], {"decisions": [{"type": "edit", "edited_action": edited}]}
        )
    ).json()
    review_events = resumed["steps"][0]["events"]
    assert review_events == [
        {
            "type": "tool_call",
            "name": "send_email",
            "args": edited["args"],
            "content": None,
            "failed": False,
        }
    ]
    [result] = results(resumed)
    assert "cak@example.com" in result["content"] and "'Hi'" in result["content"]
    assert "ana@example.com" not in result["content"] and result["failed"] is False


async def test_edit_to_an_unknown_tool_becomes_an_error_result(client: AsyncClient) -> None:
    turn = await paused(client)
    edited = {"name": "delete_everything", "args": {}}
    resumed = (
        await decide(
            client, turn["thread_id"], {"decisions": [{"type": "edit", "edited_action": edited}]}
        )
    ).json()
    [result] = results(resumed)
    assert result["failed"] is True and result["name"] == "delete_everything"
    assert "not one of this agent's tools" in result["content"]
    assert nodes(resumed) == [(0, "review"), (0, "llm_call")]


@pytest.mark.parametrize(
    ("decision", "reason"),
    [
        ({"type": "reject", "message": "Not to Ana, please."}, "Not to Ana, please."),
        ({"type": "reject"}, DEFAULT_REJECTION),
    ],
)
async def test_reject_skips_the_tool_and_tells_the_model(
    client: AsyncClient, decision: dict[str, Any], reason: str
) -> None:
    turn = await paused(client)
    resumed = (await decide(client, turn["thread_id"], {"decisions": [decision]})).json()
    assert nodes(resumed) == [(0, "review"), (0, "llm_call")]
    [result] = results(resumed)
    assert result == {
        "type": "tool_result",
        "name": "send_email",
        "args": None,
        "content": reason,
        "failed": True,
    }
    assert reason in resumed["answer"]


async def test_a_mixed_turn_reviews_only_the_guarded_call(client: AsyncClient) -> None:
    turn = await paused(client, MIXED)
    calls = [e["name"] for e in turn["steps"][0]["events"] if e["type"] == "tool_call"]
    assert calls == ["get_weather", "send_email"]
    assert [r["name"] for r in turn["pending_review"]["action_requests"]] == ["send_email"]
    resumed = (await decide(client, turn["thread_id"], {"decisions": [{"type": "approve"}]})).json()
    tool_step = resumed["steps"][1]
    assert tool_step["node"] == "tool_node"
    assert sorted(r["name"] for r in tool_step["events"]) == ["get_weather", "send_email"]
    assert all(not r["failed"] for r in tool_step["events"])


async def test_a_rejected_guarded_call_still_lets_the_unguarded_one_run(
    client: AsyncClient,
) -> None:
    turn = await paused(client, MIXED)
    resumed = (await decide(client, turn["thread_id"], {"decisions": [{"type": "reject"}]})).json()
    by_name = {r["name"]: r for r in results(resumed)}
    assert by_name["send_email"]["failed"] is True
    assert (
        by_name["get_weather"]["failed"] is False and "Paris" in by_name["get_weather"]["content"]
    )


async def test_a_later_guarded_call_pauses_again(client: AsyncClient) -> None:
    turn = await paused(client)
    await decide(client, turn["thread_id"], {"decisions": [{"type": "approve"}]})
    again = await say(
        client, HITL, "Now send an email to dewi@example.com", thread_id=turn["thread_id"]
    )
    review = again.json()["pending_review"]
    assert review["action_requests"][0]["args"]["to"] == "dewi@example.com"


async def test_unguarded_calls_do_not_pause(client: AsyncClient) -> None:
    turn = (await say(client, HITL, "What is the weather in Lima?")).json()
    assert turn["pending_review"] is None and "Lima" in turn["answer"]


async def test_a_paused_review_survives_a_restart(
    settings_factory: Callable[..., Settings],
) -> None:
    async for client in start_client(create_app(settings_factory())):
        turn = await paused(client)
    async for restarted in start_client(create_app(settings_factory())):
        resumed = await decide(restarted, turn["thread_id"], {"decisions": [{"type": "approve"}]})
        assert resumed.status_code == 200
        assert "ana@example.com" in results(resumed.json())[0]["content"]
