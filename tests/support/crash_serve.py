"""`juru serve` that kills itself with SIGKILL inside a step's transaction (tests only).

    JURU_TEST_CRASH_AT="^UPDATE accounts" python -m tests.support.crash_serve serve

The process dies right after the first statement that matches the regular expression
`JURU_TEST_CRASH_AT` has run (the statement's text, then its parameters), before its
transaction commits: nothing of Juru's shutdown or rollback code runs.
"""

from __future__ import annotations

import os
import re
import signal
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

CRASH_AT = re.compile(os.environ.get("JURU_TEST_CRASH_AT", "^$"), re.IGNORECASE | re.DOTALL)


@event.listens_for(Engine, "after_cursor_execute")
def _crash(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_args: Any) -> None:
    if CRASH_AT.search(f"{statement} {parameters!r}"):
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    from juru.cli import main

    main()
