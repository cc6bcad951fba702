"""A database outage is not the runs' failure (issue 11), against a real `juru serve`.

PostgreSQL: a cluster of the test's own is stopped for 10 s (`pg_ctl stop -m fast`) while runs
are in flight, with client tool round trips answered here. Meanwhile every request answers 503
with the JSON envelope and Retry-After; once the cluster is back every run succeeds, none is
charged twice for a step, within a bound derived from the lease.

SQLite: another connection holds the file's write lock for a few seconds (root ignores file
permissions, so a lock is the honest way to make writes fail); the server's busy timeout is
short, so its writes fail meanwhile, and the runs resume once the lock is released.

The outage's duration is the scenario; everything else is polled against a deadline.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.conftest import REQUIRE_POSTGRES
from tests.e2e.test_hosted_runs import (
    FAKE_MODEL,
    TERMINAL,
    Api,
    FakeOpenAIProcess,
    juru_serve,
    until,
)
from tests.support.hosted import WEATHER_TOOL
from tests.support.postgres_cluster import PostgresCluster, unavailable_reason
from tests.support.server import api_key, run_juru

pytestmark = pytest.mark.e2e

LEASE_SECONDS = 3
RUN_COUNT = 12
ROOMY_RATE_LIMITS = '{"paid": "100000/minute"}'
# Once the database is back: a stopped execution's lease lapses (at most one lease), a worker
# polls for work (2 s), and the runs' remaining model calls and tool round trips go on.
RECOVERY_SECONDS = 4 * LEASE_SECONDS + 20


def script_tool_calls(fake: FakeOpenAIProcess, count: int, latency: float) -> None:
    """`count` weather calls, each for another city (no loop), then plain answers; every
    model call takes `latency` seconds, so some are in flight when the database stops."""
    replies = [
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": f"Kota {index}"}}]}
        for index in range(count)
    ]
    response = httpx.post(
        f"{fake.root}/_control/script", json={"replies": replies, "latency": latency}
    )
    assert response.status_code == 200, response.text


def assert_unavailable(response: httpx.Response, secrets: list[str]) -> None:
    """503, the `/v1` envelope with `database_unavailable`, Retry-After, and nothing of the
    database's address or SQL."""
    assert response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/json"), response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == "database_unavailable", body
    assert 1 <= int(response.headers["retry-after"]) <= 10
    for secret in [*secrets, "SELECT", "UPDATE", "INSERT"]:
        assert secret not in response.text


class Driver:
    """The client side of many runs: polls them and answers their tool calls."""

    def __init__(self, api: Api, agent_id: str, run_ids: list[str]) -> None:
        self.api = api
        self.agent_id = agent_id
        self.unfinished = set(run_ids)
        self.statuses: dict[str, str] = {}
        self.submissions = 0
        self.unavailable: list[httpx.Response] = []

    def _accept(self, response: httpx.Response, *expected: int) -> bool:
        """True for an expected status; a 503 is kept for checking; anything else fails."""
        if response.status_code in expected:
            return True
        assert response.status_code == 503, response.text
        self.unavailable.append(response)
        return False

    def drive(self) -> int:
        """One round over the unfinished runs; returns the submissions made so far."""
        for run_id in sorted(self.unfinished):
            response = self.api.http.get(f"/v1/runs/{run_id}")
            if not self._accept(response, 200):
                continue
            run = response.json()
            self.statuses[run_id] = run["status"]
            if run["status"] == "succeeded":
                self.unfinished.discard(run_id)
            assert run["status"] not in TERMINAL - {"succeeded"}, run
            if run["status"] == "requires_action":
                outputs = [
                    {"tool_call_id": call["id"], "output": f"{call['arguments']}: 30°C"}
                    for call in run["pending_tool_calls"]
                ]
                submitted = self.api.http.post(
                    f"/v1/runs/{run_id}/tool_outputs", json={"outputs": outputs}
                )
                # 409: a retried submission whose first try was written after all.
                if self._accept(submitted, 200, 409) and submitted.status_code == 200:
                    self.submissions += 1
        time.sleep(0.05)  # polling against a deadline, not synchronising
        return self.submissions

    def write(self) -> None:
        """A request that writes (a new thread): refused with 503 while writes fail."""
        self._accept(self.api.http.post(f"/v1/agents/{self.agent_id}/threads", json={}), 201)

    def all_succeeded(self) -> bool:
        self.drive()
        return not self.unfinished


def start_runs(api: Api) -> Driver:
    agent = api.create_agent(model_id=FAKE_MODEL, tools=[WEATHER_TOOL], max_steps=30)
    run_ids = []
    for index in range(RUN_COUNT):
        thread = api.create_thread(agent["id"])
        run_ids.append(api.create_run(thread["id"], f"Cuaca di kota nomor {index}?")["id"])
    return Driver(api, agent["id"], run_ids)


def check_ledger(
    rows: list[tuple[Any, ...]], costs: dict[str, Decimal], steps: dict[str, int]
) -> None:
    """Each (run, step) charged once; a run's cost is the sum of its ledger rows."""
    charged: dict[tuple[str, int], int] = {}
    sums: dict[str, Decimal] = {}
    for run_id, step, cost in rows:
        charged[(run_id, step)] = charged.get((run_id, step), 0) + 1
        sums[run_id] = sums.get(run_id, Decimal(0)) + Decimal(cost)
    assert {key: n for key, n in charged.items() if n > 1} == {}
    for run_id, step_count in steps.items():
        assert {step for (run, step) in charged if run == run_id} == set(
            range(1, step_count + 1)
        ), run_id
        assert sums[run_id] == costs[run_id], run_id


def check_runs_and_ledger(connection: Any) -> None:
    """Every run succeeded, and `check_ledger` holds (a DB-API connection to either database)."""
    rows = connection.execute(
        "SELECT run_id, step, cost_rupiah FROM usage_charges WHERE run_id IS NOT NULL"
    ).fetchall()
    runs = connection.execute("SELECT id, status, cost_rupiah, step_count FROM runs").fetchall()
    assert {status for _, status, _, _ in runs} == {"succeeded"}
    check_ledger(
        rows,
        {run_id: Decimal(cost) for run_id, _, cost, _ in runs},
        {run_id: steps for run_id, _, _, steps in runs},
    )


# --- PostgreSQL ------------------------------------------------------------------------------


@pytest.fixture
def cluster() -> Iterator[PostgresCluster]:
    reason = unavailable_reason()
    if reason is not None:
        if REQUIRE_POSTGRES:
            pytest.fail(f"{reason} (JURU_REQUIRE_POSTGRES=1)")
        pytest.skip(reason)
    made = PostgresCluster().init()
    try:
        yield made
    finally:
        made.destroy()


@pytest.mark.postgresql
def test_runs_survive_a_ten_second_postgresql_outage(
    cluster: PostgresCluster, tmp_path: Path, fake_openai_process: FakeOpenAIProcess
) -> None:
    url = cluster.url()
    run_juru(url, "db", "upgrade")
    fake = fake_openai_process
    script_tool_calls(fake, 3 * RUN_COUNT, latency=0.4)
    server = juru_serve(
        url,
        tmp_path / "server.log",
        JURU_LEASE_SECONDS=str(LEASE_SECONDS),
        JURU_TIER_RATE_LIMITS=ROOMY_RATE_LIMITS,
        **fake.env(),
    )
    secrets = [f":{cluster.port}", str(cluster.port), "127.0.0.1", "postgres@"]
    with server, Api(server.base_url, api_key(url)) as api:
        driver = start_runs(api)
        until(lambda: driver.drive() >= RUN_COUNT, "a round trip per run before the outage")
        in_flight = [run for run, status in driver.statuses.items() if status != "succeeded"]
        assert in_flight, "every run ended before the outage"

        cluster.stop()
        stopped = time.monotonic()
        while time.monotonic() - stopped < 10:  # the outage itself: ten seconds down
            driver.drive()
            driver.write()
        during = list(driver.unavailable)
        cluster.start()
        restarted = time.monotonic()

        until(driver.all_succeeded, "every run to succeed", deadline_seconds=RECOVERY_SECONDS)
        recovered = time.monotonic() - restarted
        finished = {run_id: api.run(run_id) for run_id in in_flight}

    assert during, "no request was made while the database was down"
    for response in during:
        assert_unavailable(response, secrets)
    assert recovered < RECOVERY_SECONDS
    for run in finished.values():
        assert run["status"] == "succeeded", run
        assert run["error"] is None, run

    with psycopg.connect(url) as connection:
        check_runs_and_ledger(connection)


# --- SQLite ----------------------------------------------------------------------------------


def test_runs_survive_a_locked_sqlite_database(
    tmp_path: Path, fake_openai_process: FakeOpenAIProcess
) -> None:
    url = f"sqlite:///{tmp_path}/juru.db"
    fake = fake_openai_process
    script_tool_calls(fake, 3 * RUN_COUNT, latency=0.3)
    server = juru_serve(
        url,
        tmp_path / "server.log",
        JURU_LEASE_SECONDS=str(LEASE_SECONDS),
        JURU_SQLITE_BUSY_TIMEOUT_MS="200",
        JURU_TIER_RATE_LIMITS=ROOMY_RATE_LIMITS,
        **fake.env(),
    )
    with server, Api(server.base_url, api_key(url)) as api:
        driver = start_runs(api)
        until(lambda: driver.drive() >= RUN_COUNT, "a round trip per run before the lock")
        in_flight = [run for run, status in driver.statuses.items() if status != "succeeded"]
        assert in_flight, "every run ended before the lock"

        locker = sqlite3.connect(tmp_path / "juru.db", isolation_level=None)
        try:
            locker.execute("BEGIN EXCLUSIVE")
            locked = time.monotonic()
            while time.monotonic() - locked < 5:  # the outage itself: five seconds locked
                driver.drive()
                driver.write()
            locker.execute("ROLLBACK")
        finally:
            locker.close()
        released = time.monotonic()
        until(driver.all_succeeded, "every run to succeed", deadline_seconds=RECOVERY_SECONDS)
        recovered = time.monotonic() - released

    assert driver.unavailable, "no write failed while the database was locked"
    for response in driver.unavailable:
        assert_unavailable(response, [str(tmp_path)])
    assert recovered < RECOVERY_SECONDS

    with sqlite3.connect(tmp_path / "juru.db") as connection:
        check_runs_and_ledger(connection)
