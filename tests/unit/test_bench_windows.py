"""The bench's measured windows: waiting for PostgreSQL's statistics to settle is idle time,
and must stay out of the CPU a block of runs is charged with."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import psycopg
import pytest

from bench import harness
from bench.scenarios import overhead


class IdleServer:
    """A server whose CPU clock moves only while the bench waits for the database's counts."""

    def __init__(self, idle_cpu: float) -> None:
        self.cpu, self.idle_cpu, self.reads = 0.0, idle_cpu, 0

    def cpu_seconds(self) -> float:
        return self.cpu

    def api_cpu_seconds(self) -> float:
        return self.cpu / 2

    def sql_census(self) -> None:
        return None

    def pg_stats(self) -> dict[str, int]:
        self.cpu += self.idle_cpu  # what the server spends while the counts settle
        self.reads += 1
        return {"commits": 10 * self.reads, "rollbacks": 0}


async def test_a_blocks_cpu_leaves_out_the_waits_for_the_database_counts() -> None:
    server = IdleServer(idle_cpu=0.5)
    bench: Any = SimpleNamespace(
        server=server, database=server, model=SimpleNamespace(stats=lambda: {"requests": 0})
    )
    api: Any = SimpleNamespace(requests=0)
    driving = overhead.Driving(answer_waits=True)

    await driving.block(api, bench, threads=[], database=True)

    assert server.reads == 2
    assert driving.done["commits"] == 10  # both readings count
    assert driving.done["cpu"] == 0.0  # neither wait does
    assert driving.done["api_cpu"] == 0.0


@pytest.mark.postgresql
def test_the_counts_are_read_once_after_one_settling_wait() -> None:
    """An idle Juru server commits a transaction every few seconds (its workers look for
    runs), so the counts never stop moving: the reading waits once, then reads."""
    waits: list[float] = []

    def busy_wait(seconds: float) -> None:
        waits.append(seconds)
        with psycopg.connect(f"{harness.POSTGRES_URL}/test") as connection:
            connection.execute("SELECT 1")  # the server's idle work meanwhile
            connection.commit()

    stats = harness.settled_pg_stats("test", sleep=busy_wait)

    assert waits == [harness.STATS_SETTLE_SECONDS]
    assert stats is not None and stats["commits"] > 0
