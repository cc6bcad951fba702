"""A server killed inside a step's transaction: the run resumes from its checkpoint with nothing
charged twice and no transcript row repeated, on both databases. The checkpoint of the pause
goes in that transaction too, so the lost step's model call is the one thing asked again.

The first server (`tests.support.crash_serve`) kills itself with SIGKILL right after one of the
step's statements ran, before the COMMIT; a second, ordinary server takes the run over once the
lease (2 s) has expired. Nothing sleeps to synchronise: everything is polled against a deadline.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from juru.store.tables import run_events, runs, usage_charges
from tests.e2e.test_hosted_runs import (
    FAKE_MODEL,
    Api,
    Database,
    FakeOpenAIProcess,
    juru_serve,
    until,
)
from tests.support.hosted import WEATHER_TOOL
from tests.support.server import ServerProcess, api_key, free_port

pytestmark = pytest.mark.e2e

# The first and the last statement of the step's one transaction (store.steps.record_step):
# after the charge, and after the transcript's insert. On PostgreSQL the charge goes in the
# run's UPDATE (a `WITH` before it), so the first and third are one; and the transcript is a
# part of the statement that ends the write, with the events and the settlement
# (`store.joined`), on SQLite a row of the parts' view (matched with the statement's
# parameters: `tests.support.crash_serve`).
CRASH_POINTS = [
    r"^\s*(WITH charged AS\s*\(\s*)?INSERT INTO usage_charges",
    r"^\s*(WITH transcript_given AS .*)?INSERT INTO (thread_messages|juru_parts .*'transcript')",
    # The step's own UPDATE of the run (a claim's sets no step_count).
    r"^(\s*WITH charged AS .*\)\s*)?UPDATE runs SET (status=\S+, )?step_count",
]
# The run's event log once it is done: the crashed step's events appear once, with no gap.
LOGGED = [
    ("run.status", "queued"),
    ("run.status", "running"),
    ("message.completed", "user"),
    ("message.completed", "assistant"),
    ("step.completed", None),
    ("run.status", "requires_action"),
    ("run.status", "running"),
    ("message.completed", "tool"),
    ("message.completed", "assistant"),
    ("step.completed", None),
    ("run.status", "succeeded"),
]


def crashing_serve(
    database_url: str, log: Path, port: int, crash_at: str, **env: str
) -> ServerProcess:
    # Its workers run in the one process that dies (with worker processes, the supervisor would
    # start the dying worker again and again).
    server = juru_serve(
        database_url, log, port, JURU_TEST_CRASH_AT=crash_at, JURU_WORKER_PROCESSES="0", **env
    )
    server.command = [sys.executable, "-m", "tests.support.crash_serve", "serve"]
    return server


@pytest.mark.parametrize("crash_at", CRASH_POINTS)
def test_a_kill_inside_the_step_transaction_charges_once_and_records_once(
    crash_at: str,
    database_url: str,
    database: Database,
    tmp_path: Path,
    fake_openai_process: FakeOpenAIProcess,
) -> None:
    fake = fake_openai_process
    weather = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Jakarta"}}]}
    # The first answer is lost with the step's write; the second one is the first step's.
    fake.script([weather, weather, {"content": "Di Jakarta 29°C."}])
    env = {**fake.env(), "JURU_LEASE_SECONDS": "2"}
    port = free_port()
    first = crashing_serve(database_url, tmp_path / "first.log", port, crash_at, **env).start()
    try:
        key = api_key(database_url)
        with Api(first.base_url, key) as api:
            agent = api.create_agent(model_id=FAKE_MODEL, tools=[WEATHER_TOOL], max_steps=5)
            thread = api.create_thread(agent["id"])
            run = api.create_run(thread["id"], "Cuaca di Jakarta?")
        # The first step's write kills the server before it commits.
        until(lambda: first.process is not None and first.process.poll() is not None, "crash")
    finally:
        first.kill()
    assert database.runs()[run["id"]][0] == "running"
    with database.engine.connect() as connection:
        assert connection.execute(select(usage_charges)).all() == []

    second = juru_serve(
        database_url, tmp_path / "second.log", port, JURU_WORKER_PROCESSES="0", **env
    )
    with second, Api(second.base_url, key) as api:
        waiting = api.wait_for(run["id"], "requires_action")
        assert waiting["step_count"] == 1
        [call] = waiting["pending_tool_calls"]
        outputs = [{"tool_call_id": call["id"], "output": "29°C"}]
        answered = api.http.post(f"/v1/runs/{run['id']}/tool_outputs", json={"outputs": outputs})
        assert answered.status_code == 200, answered.text
        done = api.wait_for(run["id"], "succeeded")
        messages = api.messages(thread["id"])

    assert done["step_count"] == 2
    # Nothing of the lost step was kept, its checkpoint neither: its call alone is asked again.
    assert len(fake.requests()) == 3
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert len({m["id"] for m in messages}) == len(messages)
    with database.engine.connect() as connection:
        charges = connection.execute(
            select(usage_charges.c.step, usage_charges.c.cost_rupiah).where(
                usage_charges.c.run_id == run["id"]
            )
        ).all()
        cost = connection.execute(
            select(runs.c.cost_rupiah).where(runs.c.id == run["id"])
        ).scalar_one()
    assert sorted(step for step, _ in charges) == [1, 2]
    assert all(amount > 0 for _, amount in charges)
    assert cost == sum(amount for _, amount in charges)
    with database.engine.connect() as connection:
        logged = connection.execute(
            select(run_events.c.seq, run_events.c.type, run_events.c.data)
            .where(run_events.c.run_id == run["id"])
            .order_by(run_events.c.seq)
        ).all()
    assert [seq for seq, _, _ in logged] == list(range(1, len(LOGGED) + 1))
    assert [(kind, data.get("status") or data.get("role")) for _, kind, data in logged] == LOGGED
