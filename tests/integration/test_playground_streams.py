"""`POST /playground/messages/stream` and `/playground/resume/stream`: the same turns as the
plain endpoints, as server-sent events (`step`, `text`, then `turn`), refusals before the stream
starts keeping their status codes."""

from __future__ import annotations

import json
from typing import Any

from httpx import AsyncClient, Response

from tests.integration.test_playground_review import EMAIL_ANA, HITL
from tests.support.hosted import demo_answer

WEATHER = "What is the weather in Paris?"


def events(response: Response) -> list[tuple[str, Any]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    found = []
    for block in response.text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            assert "id" not in fields  # a turn's stream is not resumable: no ids
            found.append((fields["event"], json.loads(fields["data"])))
    return found


async def stream(client: AsyncClient, feature: str, message: str, **body: Any) -> Response:
    payload = {"feature": feature, "message": message, **body}
    return await client.post("/playground/messages/stream", json=payload)


async def test_a_streamed_turn_sends_each_step_the_text_and_the_whole_turn_last(
    client: AsyncClient,
) -> None:
    streamed = events(await stream(client, "ReAct", WEATHER))
    kinds = [kind for kind, _ in streamed]
    assert kinds[-1] == "turn" and "step" in kinds and "text" in kinds
    turn = streamed[-1][1]
    steps = [data for kind, data in streamed if kind == "step"]
    assert steps == turn["steps"] and [s["node"] for s in steps][:2] == ["llm_call", "tool_node"]
    text = "".join(data["text"] for kind, data in streamed if kind == "text")
    assert turn["answer"] and turn["answer"] in text
    # The same thread goes on with the plain endpoint: it is the same turn, streamed.
    plain = await client.post(
        "/playground/messages",
        json={"feature": "ReAct", "message": "And in Oslo?", "thread_id": turn["thread_id"]},
    )
    assert plain.status_code == 200 and plain.json()["thread_id"] == turn["thread_id"]


async def test_a_review_is_streamed_paused_and_resumed(client: AsyncClient) -> None:
    streamed = events(await stream(client, HITL, EMAIL_ANA))
    turn = streamed[-1][1]
    assert turn["pending_review"]["action_requests"][0]["name"] == "send_email"
    body = {
        "feature": HITL,
        "thread_id": turn["thread_id"],
        "value": {"decisions": [{"type": "approve"}]},
    }
    resumed = events(await client.post("/playground/resume/stream", json=body))
    done = resumed[-1][1]
    assert resumed[-1][0] == "turn" and done["pending_review"] is None
    sent = "E-mail to ana@example.com with subject 'the weekly report' queued in the demo outbox"
    assert done["answer"] == demo_answer("send_email", f"{sent} (not delivered)")


async def test_refusals_come_before_the_stream_with_their_status_codes(
    client: AsyncClient,
) -> None:
    missing = await stream(client, "No such feature", WEATHER)
    assert missing.status_code == 404 and "No such feature" in missing.json()["detail"]
    blank = await stream(client, "ReAct", "   ")
    assert blank.status_code == 400 and "white space" in blank.json()["detail"]
    paused = events(await stream(client, HITL, EMAIL_ANA))[-1][1]
    busy = await stream(client, HITL, "Another one", thread_id=paused["thread_id"])
    assert busy.status_code == 400 and "waiting for a review" in busy.json()["detail"]
    other_feature = await stream(client, "ReAct", WEATHER, thread_id=paused["thread_id"])
    assert (
        other_feature.status_code == 400 and "belongs to feature" in other_feature.json()["detail"]
    )
    bad = {"feature": HITL, "thread_id": paused["thread_id"], "value": {"decisions": []}}
    invalid = await client.post("/playground/resume/stream", json=bad)
    assert invalid.status_code == 400 and "invalid review" in invalid.json()["detail"]
    idle = events(await stream(client, "ReAct", WEATHER))[-1][1]
    body = {"feature": "ReAct", "thread_id": idle["thread_id"], "value": {"decisions": []}}
    nothing = await client.post("/playground/resume/stream", json=body)
    assert nothing.status_code == 400 and "not waiting" in nothing.json()["detail"]
