"""`IN` a list, in a statement whose text is final once compiled.

SQLAlchemy sends `column.in_(values)` with one bound value per item of the list, and an
expanding parameter the same way: it writes the placeholders into the statement's text at
every execution, once it knows how many there are: a regular expression over the whole text
(for the step's UPDATE of its run, 28 µs of the 118 µs SQLAlchemy spent on it, against 21 µs
for SQLite to run it: docs/decisions.md), and a text of its own for each length of a list,
which the PostgreSQL driver prepares apart.

So a list fixed where the statement is built (statuses) is written into its text once,
`among`; and a list given at execution is one bound value, the list as JSON text, which the
database takes apart itself, `in_list`. Rows given at execution (a joined write's events,
transcript messages, notices: `store.joined`) are one JSON value too, `JsonRows`, not a
PostgreSQL array per column: psycopg writes an array's text in Python, quoting and escaping
each item with regular expressions, where `json.dumps` does the same work in C.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Boolean, ColumnElement, Text, bindparam, literal_column
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import TypeDecorator


def among(column: ColumnElement[Any], values: Iterable[str]) -> ColumnElement[bool]:
    """`column IN ('a', 'b')`, with `values` (known when the statement is built, as statuses
    are) written into the statement's text."""
    quoted: list[ColumnElement[Any]] = [
        literal_column("'" + value.replace("'", "''") + "'") for value in values
    ]
    if not quoted:
        raise ValueError("among() needs at least one value")
    return column.in_(quoted)


def in_list(column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
    """`column` is one of the strings of the parameter `name`, a list given at execution (any
    length, empty included) and sent as one bound value."""
    return InList(column, bindparam(name, type_=StringList()))


class InList(FunctionElement[bool]):
    """`column` among the strings of a JSON array: `IN (SELECT value FROM json_each(...))` on
    SQLite; on PostgreSQL `= ANY(ARRAY(SELECT json_array_elements_text(...)))`, the array
    made once before the scan, which the planner reads by the column's index whatever it
    estimates of the list. `IN (SELECT ...)` of the same function read the whole table,
    hashed against the list, wherever PostgreSQL thought the table small (it takes any
    function's rows for 100), and took longer to plan (docs/decisions.md)."""

    name = "in_list"
    type = Boolean()
    inherit_cache = True
    # A condition as it stands (not `... = 1`, which would keep SQLite from the index).
    _is_implicitly_boolean = True


@compiles(InList, "sqlite")
def _sqlite_in_list(element: InList, compiler: SQLCompiler, **kw: Any) -> str:
    column, values = (compiler.process(clause, **kw) for clause in element.clauses)
    return f"{column} IN (SELECT value FROM json_each({values}))"


@compiles(InList, "postgresql")
def _postgresql_in_list(element: InList, compiler: SQLCompiler, **kw: Any) -> str:
    column, values = (compiler.process(clause, **kw) for clause in element.clauses)
    return postgresql_in_list(column, values)


def postgresql_in_list(column: str, values: str) -> str:
    """`in_list`'s condition in PostgreSQL's text, for a statement written as text: `column`
    among the strings of the JSON array `values` (a placeholder)."""
    return f"{column} = ANY(ARRAY(SELECT json_array_elements_text(CAST({values} AS json))))"


class StringList(TypeDecorator[Sequence[str]]):
    """A list of strings, bound as one JSON array (`in_list` takes it apart in the database)."""

    impl = Text()
    cache_ok = True

    def process_bind_param(self, value: Sequence[str] | None, dialect: Dialect) -> str | None:
        if value is None:
            return None
        if isinstance(value, str) or not all(isinstance(item, str) for item in value):
            raise TypeError("a list of strings is expected")
        return json.dumps(list(value))


class JsonRows(TypeDecorator[Sequence[Sequence[Any]]]):
    """Rows of values, bound as one JSON array of arrays. A PostgreSQL statement takes them
    apart in the order given, `json_array_elements(CAST(:rows AS json)) WITH ORDINALITY AS
    given(item, position)`, a column's text as `given.item ->> 0` and a JSON value as it was
    given as `given.item -> 3`.

    A step's write gave its events, messages and notices as one `text[]` per column before:
    psycopg dumped them in Python, escaping every quote of every item's JSON with a regular
    expression, 0.45 ms of CPU a step's write against 0.05 ms for this (bench/RESULTS.md,
    thirty-seventh round)."""

    impl = Text()
    cache_ok = True

    def process_bind_param(
        self, value: Sequence[Sequence[Any]] | None, dialect: Dialect
    ) -> str | None:
        # Characters as they are: PostgreSQL decodes the `\u` escapes of non-ASCII characters
        # only in a UTF-8 database.
        return None if value is None else json.dumps(value, ensure_ascii=False)
