"""`juru serve` with every SQL statement on Juru's engine counted (bench only, off by default).

    python -m bench.sql_census serve --port 8000

Counts statements by verb and table through a SQLAlchemy event on every engine (LangGraph's
checkpointer talks to its driver directly and is not counted). On SIGUSR1 each process (the
API process and its worker processes, forks of it or programs that run this same wrapper)
writes its counts so far as JSON beside `$JURU_BENCH_SQL_CENSUS`, named by its pid. The harness
runs the server this way when `JURU_BENCH_SQL=1`.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

SHAPE = re.compile(
    r"^\s*(?:(SELECT)\b.*?\bFROM\s+(\w+)|(INSERT INTO|UPDATE|DELETE FROM)\s+(\w+)|(\w+))",
    re.IGNORECASE | re.DOTALL,
)
counts: Counter[str] = Counter()
# `juru serve` forks its first workers: each counts its own statements from then on.
os.register_at_fork(after_in_child=counts.clear)


def shape(statement: str) -> str:
    """`UPDATE runs`, `SELECT accounts`, `BEGIN`...: what a statement does to which table."""
    match = SHAPE.match(statement)
    if match is None:
        return statement[:40]
    verb = match.group(1) or match.group(3) or match.group(5)
    table = match.group(2) or match.group(4) or ""
    return f"{verb.upper()} {table}".strip()


@event.listens_for(Engine, "before_cursor_execute")
def _count(
    conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
) -> None:
    counts[shape(statement)] += 1


@event.listens_for(Engine, "commit")
def _commit(conn: Any) -> None:
    counts["(commit)"] += 1


def census_file(base: Path, pid: int) -> Path:
    """Where process `pid` writes its counts (the API process and each worker process)."""
    return base.with_name(f"{base.stem}.{pid}{base.suffix}")


def _dump(signum: int, frame: FrameType | None) -> None:
    target = census_file(Path(os.environ["JURU_BENCH_SQL_CENSUS"]), os.getpid())
    target.with_suffix(".tmp").write_text(json.dumps(dict(counts)))
    target.with_suffix(".tmp").replace(target)


def main() -> None:
    signal.signal(signal.SIGUSR1, _dump)
    from juru.cli import main as juru_main

    juru_main()


if __name__ == "__main__":
    main()
