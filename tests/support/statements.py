"""Which SQL statements the code under test sends, counted at the driver's door."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.engine.default import NO_CACHE_KEY


@contextmanager
def statements_sent(matches: Callable[[str], bool]) -> Iterator[list[str]]:
    """The statements that `matches` accepts, sent by any engine of this process while the
    block runs (on SQLite the store's reads run on the reader threads' own engine)."""
    with statements_seen(lambda statement, _context: matches(statement)) as seen:
        yield seen


def sends_part(kind: str, statement: str, context: Any) -> bool:
    """Whether a statement is SQLite's joined write of a part of `kind` (`store.joined`): its
    parameters are each part's kind and JSON, in turn."""
    if "INSERT INTO juru_parts" not in statement or context is None:
        return False
    return any(kind in row[::2] for row in context.parameters)


@contextmanager
def statements_compiled_each_time() -> Iterator[list[str]]:
    """The statements built with SQLAlchemy that it compiled again because they have no cache
    key (a multi-row VALUES, for one), sent by any engine of this process while the block runs:
    on the step's path that compiling costs more than the statement."""

    def uncached(_statement: str, context: Any) -> bool:
        compiled = context is not None and context.compiled is not None
        return compiled and context.cache_hit == NO_CACHE_KEY

    with statements_seen(uncached) as seen:
        yield seen


@contextmanager
def statements_rendered_each_time() -> Iterator[list[str]]:
    """The statements built with SQLAlchemy whose text it finishes at every execution, sent
    by any engine of this process while the block runs: an expanding parameter (`IN` a list)
    is rewritten into the text at each execution, which costs more than a plain bound value
    and gives the driver a new text for each length of the list."""

    def rendered(_statement: str, context: Any) -> bool:
        compiled = context.compiled if context is not None else None
        return compiled is not None and bool(
            compiled.post_compile_params or compiled.literal_execute_params
        )

    with statements_seen(rendered) as seen:
        yield seen


@contextmanager
def statements_seen(accepts: Callable[[str, Any], bool]) -> Iterator[list[str]]:
    """`statements_sent`, `accepts` given each statement with its execution context (its
    `parameters`: on SQLite the parts of a joined write are parameters, `store.joined`)."""
    seen: list[str] = []

    def record(
        _conn: Any, _cursor: Any, statement: str, _parameters: Any, context: Any, *_: Any
    ) -> None:
        if accepts(statement, context):
            seen.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", record)
