"""The hosted step path's statements are compiled once: a statement SQLAlchemy cannot cache
(it has no cache key, as a multi-row VALUES) is compiled again at every execution, which on
the step's path costs more than running it; and on PostgreSQL psycopg converts each one's
placeholders once."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg import _queries as psycopg_queries

from tests.integration.test_run_engine import OPENAI_MODEL, WEATHER_CALL
from tests.support.fake_openai import FakeOpenAIServer
from tests.support.hosted import HostedHarness
from tests.support.statements import statements_compiled_each_time, statements_rendered_each_time


async def pay_for_a_run_that_pauses_twice(
    hosted: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    """A paid run of three model steps, answered at each of its two pauses."""
    fake_openai.script([WEATHER_CALL, WEATHER_CALL, {"content": "Sunny."}])
    run = await hosted.new_run(model_id=OPENAI_MODEL)
    await hosted.work()
    for _ in range(2):
        await hosted.answer(await hosted.get_run(run["id"]))
        await hosted.work()
    done = await hosted.get_run(run["id"])
    assert done["status"] == "succeeded" and done["step_count"] == 3


async def test_a_paid_run_that_pauses_sends_only_statements_compiled_once(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    with statements_compiled_each_time() as compiled:
        await pay_for_a_run_that_pauses_twice(hosted_openai, fake_openai)
    assert compiled == []


async def test_a_paid_run_that_pauses_sends_no_statement_rendered_at_each_execution(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    with statements_rendered_each_time() as rendered:
        await pay_for_a_run_that_pauses_twice(hosted_openai, fake_openai)
    assert [statement[:80] for statement in rendered] == [], "\n".join(rendered)


@pytest.mark.parametrize(
    "database_url",
    [pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgresql)],
    indirect=True,
)
async def test_psycopg_converts_each_statement_of_a_paid_run_that_pauses_once(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """psycopg turns placeholders into `$n` at every execution unless it keeps the result, which
    it does only for statements up to its limit: a step's joined write is longer than 4 KiB."""
    converted_each_time: list[bytes] = []
    convert = psycopg_queries._query2pg_nocache

    def record(query: bytes, encoding: str) -> Any:
        converted_each_time.append(query)
        return convert(query, encoding)

    # The conversion psycopg does not keep; the one it keeps wraps the original function.
    monkeypatch.setattr(psycopg_queries, "_query2pg_nocache", record)
    await pay_for_a_run_that_pauses_twice(hosted_openai, fake_openai)
    assert [query[:60] for query in converted_each_time] == []
