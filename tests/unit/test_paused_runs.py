"""`PausedRuns`: bounded, each view given out once, only to the run's account, and only while
the run was last seen paused."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from juru.hosted.paused_runs import PausedRuns


def run(run_id: str, status: str = "requires_action", account_id: str = "acct_a") -> Any:
    return SimpleNamespace(id=run_id, status=status, account_id=account_id)


def test_a_view_is_given_once_and_only_to_its_account() -> None:
    paused = PausedRuns()
    paused.saw(run("run_1"))
    assert paused.take("run_1", "acct_b") is None
    assert paused.take("run_1", "acct_a") is None  # the wrong account's try forgot it
    paused.saw(run("run_1"))
    assert paused.take("run_1", "acct_a").id == "run_1"
    assert paused.take("run_1", "acct_a") is None


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
