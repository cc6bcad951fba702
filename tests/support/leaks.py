"""What no error may show a caller: SQL, bind parameters, a database address, a stack trace."""

from __future__ import annotations

import re
from typing import Any

import httpx

# SQL as SQLAlchemy and the drivers print it: statements naming Juru's tables, parameters, links.
INTERNALS = re.compile(
    r"SELECT |INSERT INTO|UPDATE \w+ SET|DELETE FROM|FROM (runs|threads|agents|accounts|api_keys"
    r"|usage_ledger|run_events|checkpoints)\b|\[parameters:|\[SQL:|sqlalche\.me|psycopg\."
    r"|sqlite3\.|127\.0\.0\.1:5432|:5432\b|Traceback|File \"",
)


def leaked(text: str) -> list[str]:
    """The internals `text` shows (empty when it shows none)."""
    return [match.group(0) for match in INTERNALS.finditer(text)]


def assert_no_internals(value: httpx.Response | str | Any) -> None:
    """Fail when an error body (a response, its text, or a decoded value) shows internals."""
    text = value.text if isinstance(value, httpx.Response) else str(value)
    found = leaked(text)
    assert not found, f"an error shows internals {found}: {text[:500]}"
