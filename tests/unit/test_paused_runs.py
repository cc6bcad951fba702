"""`PausedRuns`: bounded, each view given out once, only to the run's account, and only while
the run was last seen paused."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from juru.hosted.paused_runs import PausedRuns
from juru.store.records import RunRecord

NOW = datetime(2026, 12, 3, tzinfo=UTC)


def run(run_id: str, status: str = "requires_action", account_id: str = "acct_a") -> RunRecord:
    return RunRecord(
        id=run_id,
        account_id=account_id,
        thread_id="thread_1",
        agent_id="agent_1",
        status=status,
        step_count=1,
        max_steps=10,
        cost_rupiah=Decimal(0),
        input=[{"role": "user", "content": "x" * 100_000}],
        output=None,
        error=None,
        pending_tool_calls=[{"id": "call_1", "name": "get_weather", "arguments": "{}"}],
        pause_count=1,
        tool_outputs=None,
        idempotency_key=None,
        lease_owner=None,
        lease_expires_at=None,
        attempts=1,
        active_seconds=0.5,
        active_since=None,
        deadline_at=None,
        waiting_since=NOW,
        created_at=NOW,
        updated_at=NOW,
        finished_at=None,
    )


def test_a_view_is_given_once_and_only_to_its_account() -> None:
    paused = PausedRuns()
    paused.saw(run("run_1"))
    assert paused.take("run_1", "acct_b") is None
    assert paused.take("run_1", "acct_a") is None  # the wrong account's try forgot it
    paused.saw(run("run_1"))
    taken = paused.take("run_1", "acct_a")
    assert taken is not None and taken.id == "run_1"
    assert paused.take("run_1", "acct_a") is None


def test_a_view_keeps_what_the_post_needs_and_not_the_input() -> None:
    paused = PausedRuns()
    seen = run("run_1")
    paused.saw(seen)
    kept = paused.take("run_1", "acct_a")
    assert kept is not None and kept.input == []
    assert kept.pending_tool_calls == seen.pending_tool_calls
    assert (kept.pause_count, kept.active_seconds) == (seen.pause_count, seen.active_seconds)


def test_a_run_seen_working_again_is_forgotten() -> None:
    paused = PausedRuns()
    paused.saw(run("run_1"))
    paused.saw(run("run_1", status="running"))
    assert paused.take("run_1", "acct_a") is None
    paused.saw(run("run_2", status="succeeded"))
    assert len(paused) == 0


def test_the_oldest_view_goes_first_beyond_the_limit() -> None:
    paused = PausedRuns(limit=2)
    for run_id in ("run_1", "run_2", "run_1", "run_3"):
        paused.saw(run(run_id))
    assert len(paused) == 2
    assert paused.take("run_2", "acct_a") is None
    assert paused.take("run_1", "acct_a") is not None
    assert paused.take("run_3", "acct_a") is not None
