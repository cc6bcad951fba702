"""Writes of one transaction that go to PostgreSQL as one statement.

A part of a write (the run's events and notices, transcript rows, a hold taken or settled, the
pruning of old checkpoints) is a `Part`: on PostgreSQL its data-modifying `WITH` entries, which
`write_parts` joins with the other parts' into one statement; on SQLite, which has no
data-modifying `WITH`, statements of its own.

Every entry of a joined statement sees the database as the statement found it, and a row
changed twice in one statement keeps only one of the changes. So parts that write one table
(a hold taken and another given back: both change the account's row) never join: they go in
statements of their own, in order; and no part reads a table that another kind writes.

A part's SQL names its entries and its parameters after its kind (`events_given`,
`:events_run_ids`); two parts of one kind write the same tables, so parts joined never
clash. The statements are built once per combination of kinds: each is compiled once and
prepared by the driver like any other.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import BindParameter, Connection, text


@dataclass(frozen=True, eq=False)
class JoinedSql:
    """A kind of part, on PostgreSQL: its `WITH` entries (`name AS (...)`), the results it adds
    to the statement's one row (`expression AS name`), and its parameters' types. One of each
    kind, made once (statements are cached by the kinds they join)."""

    # The tables its entries write (parts that share one go in statements of their own).
    writes: frozenset[str]
    entries: tuple[str, ...]
    # Results the caller reads: the statement is then sent alone, not in a pipeline
    # (`transactions.sent_together`), where no result comes back.
    returns: tuple[str, ...] = ()
    # Expressions of the statement's row that nobody reads, there to make an entry run: an
    # entry that writes nothing runs only when the statement reads it (the notices).
    runs: tuple[str, ...] = ()
    types: tuple[BindParameter[Any], ...] = ()


@dataclass(frozen=True)
class Part:
    """One part of a write: `sql` with `parameters` on PostgreSQL; `alone` on SQLite (its own
    statements, returning the same named results as `sql.returns`)."""

    sql: JoinedSql
    parameters: Mapping[str, Any]
    alone: Callable[[Connection], Mapping[str, Any]] = field(default=lambda _connection: {})


def write_parts(connection: Connection, parts: Sequence[Part | None]) -> dict[str, Any]:
    """Write the parts in order (None: nothing to write), inside the caller's transaction: on
    PostgreSQL in one statement, or one per run of parts that write different tables; on
    SQLite each on its own. Returns the results the parts name."""
    given = [part for part in parts if part is not None]
    results: dict[str, Any] = {}
    if connection.dialect.name != "postgresql":
        for part in given:
            results.update(part.alone(connection))
        return results
    for group in _groups(given):
        statement = _statement(tuple(part.sql for part in group))
        parameters: dict[str, Any] = {}
        for part in group:
            parameters.update(part.parameters)
        result = connection.execute(statement, parameters)
        if any(part.sql.returns for part in group):
            results.update(result.one()._mapping)
    return results


def _groups(parts: Sequence[Part]) -> list[list[Part]]:
    """The parts in runs where no table is written twice (each run one statement)."""
    groups: list[list[Part]] = []
    for part in parts:
        if not groups or any(other.sql.writes & part.sql.writes for other in groups[-1]):
            groups.append([])
        groups[-1].append(part)
    return groups


@functools.cache
def _statement(kinds: tuple[JoinedSql, ...]) -> Any:
    entries = [entry for kind in kinds for entry in kind.entries]
    returns = [column for kind in kinds for column in (*kind.returns, *kind.runs)]
    sql = "WITH " + ",\n".join(entries) + "\nSELECT " + (", ".join(returns) or "1")
    types = [bind for kind in kinds for bind in kind.types]
    return text(sql).bindparams(*types)
