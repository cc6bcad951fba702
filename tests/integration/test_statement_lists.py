"""`IN` a list with the statement's text final once compiled (`store.lists`), on both
databases: a list given at execution, of any length, is matched item for item and found
through the column's index, and values written into the text stay values whatever they hold."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import Column, Connection, MetaData, String, Table, Text, insert, select
from sqlalchemy.exc import StatementError

from juru.store.database import Database
from juru.store.lists import among, in_list
from juru.store.transactions import write

names = Table("list_check", MetaData(), Column("id", String(40), primary_key=True))
documents = Table(
    "list_documents", MetaData(), Column("id", String(40), primary_key=True), Column("body", Text)
)
IDS = ["a", "b'c", 'd"e', "f,g", "[h]", "ü"]
BY_ID_LIST = select(names.c.id).where(in_list(names.c.id, "ids"))


async def with_names(database: Database) -> None:
    def create(connection: Connection) -> None:
        names.create(connection)
        connection.execute(insert(names), [{"id": value} for value in IDS])

    await write(database, create)


async def selected(
    database: Database, query: Any, parameters: dict[str, Any] | None = None
) -> list[str]:
    """The ids the query finds, sorted here (the databases' collations differ)."""
    return sorted(str(row["id"]) for row in await database.rows(query, parameters))


async def test_a_list_given_at_execution_matches_its_items_and_nothing_else(
    store_database: Database,
) -> None:
    await with_names(store_database)
    assert await selected(store_database, BY_ID_LIST, {"ids": ["b'c", "f,g", "x"]}) == [
        "b'c",
        "f,g",
    ]
    assert await selected(store_database, BY_ID_LIST, {"ids": list(reversed(IDS))}) == sorted(IDS)
    assert await selected(store_database, BY_ID_LIST, {"ids": []}) == []
    # One text for every length: nothing is rendered at execution.
    compiled = BY_ID_LIST.compile(dialect=store_database.engine.sync_engine.dialect)
    assert not compiled.post_compile_params and not compiled.literal_execute_params


def plan_of(connection: Connection, statement: Any, ids: list[str]) -> str:
    """The plan the database makes for `statement` with the list `ids`, as text."""
    sql = str(statement.compile(dialect=connection.dialect))
    values = json.dumps(ids)
    if connection.dialect.name == "postgresql":
        rows = connection.exec_driver_sql(f"EXPLAIN {sql}", {"ids": values})
    else:
        rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", (values,))
    return "\n".join(str(row[-1]) for row in rows)


async def test_a_list_is_found_through_the_index_in_a_table_of_thousands(
    store_database: Database,
) -> None:
    # Thousands of rows of some width, and no statistics on them (autovacuum has not come
    # round): PostgreSQL took `IN (SELECT json_array_elements_text(...))` for 100 rows to hash,
    # and read the whole table against them; a run handed to its worker was found so.
    def many(connection: Connection) -> None:
        documents.create(connection)
        rows = [{"id": f"n{index:05d}", "body": "x" * 300} for index in range(3000)]
        connection.execute(insert(documents), rows)

    await write(store_database, many)
    query = select(documents.c.id).where(in_list(documents.c.id, "ids"))
    plan = await store_database.read(lambda connection: plan_of(connection, query, ["n00001"]))
    if store_database.engine.dialect.name == "postgresql":
        assert "Index" in plan and "Seq Scan" not in plan, plan
    else:
        assert "SEARCH list_documents" in plan and "SCAN list_documents" not in plan, plan
    found = await selected(store_database, query, {"ids": ["n00007", "n02999", "zz"]})
    assert found == ["n00007", "n02999"]


async def test_a_list_parameter_refuses_anything_but_a_list_of_strings(
    store_database: Database,
) -> None:
    await with_names(store_database)
    for wrong in ("a", [1, 2]):
        with pytest.raises(StatementError, match="a list of strings is expected"):
            await selected(store_database, BY_ID_LIST, {"ids": wrong})


async def test_values_written_into_the_text_stay_values(store_database: Database) -> None:
    await with_names(store_database)
    query = select(names.c.id).where(among(names.c.id, ["b'c", "[h]", "zz"]))
    assert await selected(store_database, query) == ["[h]", "b'c"]
    quote = select(names.c.id).where(among(names.c.id, ["x' OR '1'='1"]))
    assert await selected(store_database, quote) == []
    with pytest.raises(ValueError, match="at least one value"):
        among(names.c.id, [])
