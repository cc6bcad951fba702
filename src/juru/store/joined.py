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

SQLite has no data-modifying `WITH`, but a trigger may change any table. So each kind also has
its statements for SQLite, run by a trigger `INSTEAD OF INSERT` on a view that holds nothing
(`juru_parts`: a part's kind and its parameters as one JSON object), and a write's parts go in
one `INSERT` of a row each, in order. Each row's statements see what the rows before it wrote,
so on SQLite parts that write one table join too. The view and its triggers are `TEMP`: they
live on the writer's connection only (`prepare_sqlite`, before each transaction), where no
migration runs (SQLite checks every trigger of a connection when a table is renamed, and
Alembic renames tables), and they are always those of the code running. A kind whose result
says whether it was written (a hold that must fit) refuses on SQLite with `RAISE(ABORT)`,
which undoes that statement only: the other parts are then sent again without it.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import BindParameter, Connection, text
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import IntegrityError

from juru.store.lists import JsonRows, StringList


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
    # SQLite: the kind's name (its trigger's) and the statements its trigger runs, where a
    # parameter is written `:name` as on PostgreSQL (`json_extract` of the part's JSON, `NEW.body`).
    kind: str = ""
    sqlite: tuple[str, ...] = ()
    # The result of `returns` that is false when the SQLite statements refused the part (their
    # `RAISE(ABORT, 'juru refused <kind>')`, `refusal`) and true when they wrote it.
    refused_as: str | None = None
    # Tables of others' (LangGraph's saver's) that the SQLite statements write. SQLite compiles
    # every trigger of the view into each INSERT, so the kind's trigger is made only once they
    # exist; until then there is nothing for its parts to write, and they are left out.
    sqlite_tables: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.kind or not self.sqlite:
            raise ValueError("a kind of part needs its name and its SQLite statements")
        if _KINDS.setdefault(self.kind, self) is not self:
            raise ValueError(f"two kinds of part are named {self.kind!r}")

    @functools.cached_property
    def types_by_name(self) -> dict[str, Any]:
        return {bind.key: bind.type for bind in self.types}

    @functools.cached_property
    def sqlite_parameters(self) -> frozenset[str]:
        """The parameters the SQLite statements read (`:name`, or a path `'$.name'`)."""
        text = "\n".join(self.sqlite)
        return frozenset(_PARAMETER.findall(text) + _PATH.findall(text))

    def trigger(self) -> str:
        """The SQLite trigger that writes this kind's rows of `juru_parts`."""
        statements = "".join(
            f"{_PARAMETER.sub(_extracted, statement)};\n" for statement in self.sqlite
        )
        return (
            f"CREATE TEMP TRIGGER IF NOT EXISTS juru_part_{self.kind} "
            f"INSTEAD OF INSERT ON juru_parts WHEN NEW.kind = '{self.kind}'\n"
            f"BEGIN\n{statements}END"
        )


# Every kind of part, by name: the writer's connection has a trigger for each (`prepare_sqlite`).
_KINDS: dict[str, JoinedSql] = {}
# A parameter in a kind's SQLite statements, and what it reads.
_PARAMETER = re.compile(r"(?<![:\w]):(\w+)")
_PATH = re.compile(r"'\$\.(\w+)'")


def _extracted(match: re.Match[str]) -> str:
    return f"json_extract(NEW.body, '$.{match.group(1)}')"


def refusal(kind: str) -> str:
    """The message of `RAISE(ABORT, ...)` with which a kind's SQLite statements refuse a part."""
    return f"juru refused {kind}"


@dataclass(frozen=True)
class Part:
    """One part of a write: `sql` with `parameters` (on PostgreSQL the statement's, on SQLite
    the part's JSON), and on SQLite what the part does beside its statements (`beside`: the
    notices it keeps for the COMMIT)."""

    sql: JoinedSql
    parameters: Mapping[str, Any]
    beside: Callable[[Connection], None] | None = None
    # False where SQLite has nothing to write for the part (notices alone).
    in_sqlite: bool = True


def write_parts(connection: Connection, parts: Sequence[Part | None]) -> dict[str, Any]:
    """Write the parts in order (None: nothing to write), inside the caller's transaction: on
    PostgreSQL in one statement, or one per run of parts that write different tables; on
    SQLite in one statement (the parts' rows of `juru_parts`). Returns the results the parts
    name."""
    given = [part for part in parts if part is not None]
    results: dict[str, Any] = {}
    if connection.dialect.name != "postgresql":
        return _write_on_sqlite(connection, given) if given else results
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


# The view a SQLite write's parts are inserted into, one row each (its triggers write them).
_SQLITE_VIEW = "CREATE TEMP VIEW IF NOT EXISTS juru_parts (kind, body) AS SELECT NULL, NULL WHERE 0"
# The kinds with a trigger on a connection (its `info`).
_PREPARED = "juru_prepared_parts"


def prepare_sqlite(connection: Connection) -> None:
    """Give the SQLite writer's connection the view and the triggers of every kind of part
    (`CREATE TEMP ... IF NOT EXISTS`), outside a transaction: a kind defined since the last
    call gets its trigger, and one whose `sqlite_tables` have come to exist. Nothing to do
    when every kind has one."""
    prepared: set[str] = connection.info.setdefault(_PREPARED, set())
    if len(prepared) == len(_KINDS):
        return
    connection.exec_driver_sql(_SQLITE_VIEW)
    waiting = [kind for name, kind in list(_KINDS.items()) if name not in prepared]
    tables: set[str] = set()
    if any(kind.sqlite_tables for kind in waiting):
        listed = connection.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'table'")
        tables = {str(row[0]) for row in listed}
    for kind in waiting:
        if kind.sqlite_tables <= tables:
            connection.exec_driver_sql(kind.trigger())
            prepared.add(kind.kind)


def _write_on_sqlite(connection: Connection, parts: list[Part]) -> dict[str, Any]:
    """The parts in one statement, a row of `juru_parts` each; a part refused by its kind's
    statements is left out and the others sent again."""
    prepared = connection.info.get(_PREPARED, set())
    # The saver's tables were not there when the transaction began (nor are they now: the
    # writer holds the file's lock), so such a part has nothing to write.
    parts = [part for part in parts if part.sql.kind in prepared or not part.sql.sqlite_tables]
    unknown = {part.sql.kind for part in parts} - prepared
    if unknown:
        raise RuntimeError(
            f"no trigger for parts {sorted(unknown)} on this connection: SQLite writes go "
            "through the writer's (`store.write_queue`), which prepares them"
        )
    for part in parts:
        if part.beside is not None:
            part.beside(connection)
    parts = [part for part in parts if part.in_sqlite]
    results: dict[str, Any] = {}
    while parts:
        rows = {}
        for number, part in enumerate(parts):
            rows[f"kind_{number}"] = part.sql.kind
            rows[f"body_{number}"] = _body(part, connection.dialect)
        try:
            connection.execute(_sqlite_statement(len(parts)), rows)
        except IntegrityError as error:
            refused = [part for part in parts if str(error.orig) == refusal(part.sql.kind)]
            if not refused or any(part.sql.refused_as is None for part in refused):
                raise
            results.update({str(part.sql.refused_as): False for part in refused})
            parts = [part for part in parts if part not in refused]
            continue
        results.update({str(part.sql.refused_as): True for part in parts if part.sql.refused_as})
        break
    return results


@functools.cache
def _sqlite_statement(rows: int) -> Any:
    values = ", ".join(f"(:kind_{number}, :body_{number})" for number in range(rows))
    return text(f"INSERT INTO juru_parts (kind, body) VALUES {values}")


def _body(part: Part, dialect: Dialect) -> str:
    """The part's parameters as one JSON object, each value as its column stores it (micro-
    rupiah, SQLite's datetime text); lists of values and rows as JSON arrays."""
    types, read = part.sql.types_by_name, part.sql.sqlite_parameters
    body = {}
    for name, value in part.parameters.items():
        if name not in read:
            continue
        kind = types.get(name)
        if value is not None and kind is not None and not isinstance(kind, JsonRows | StringList):
            value = _stored_as(kind, dialect)(value)
        body[name] = value
    return json.dumps(body, ensure_ascii=False)


@functools.cache
def _stored_as(kind: Any, dialect: Dialect) -> Callable[[Any], Any]:
    """How a value of column type `kind` is stored: what the driver is given for it."""
    process = kind.dialect_impl(dialect).bind_processor(dialect)
    return process if process is not None else lambda value: value
