"""A write's parts joined into one statement (`store.joined`): the statements a
paused step sends, parts that change one row kept apart, and a transcript written again, with
the same result on both databases."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, func, select

from juru.core.run_events import RunEventType
from juru.store.holds import Hold, debit_part, held_total, hold, hold_part
from juru.store.joined import write_parts
from juru.store.run_log import NewRunEvent, append_events, events_after, events_part
from juru.store.tables import accounts, usage_charges
from juru.store.transactions import write
from juru.store.transcript import append_transcript, list_messages
from tests.integration.test_run_engine import OPENAI_MODEL
from tests.support.fake_openai import FakeOpenAIServer
from tests.support.hosted import HostedHarness
from tests.support.statements import statements_sent

# What each write of a paused step changes, statement by statement: the run's UPDATE, then one
# statement with the rest (on PostgreSQL a `WITH`, on SQLite the parts' rows of `juru_parts`,
# after the step's ledger row, which SQLite writes first). (This pause keeps the older
# checkpoints: `engine.execution.PRUNE_EVERY_STEPS`.)
OUTPUTS_WRITE = {
    "postgresql": ["UPDATE runs", "WITH events_given"],
    "sqlite": ["UPDATE runs", "INSERT INTO juru_parts"],
}
STEP_WRITE = {
    "postgresql": ["WITH charged", "WITH transcript_given"],
    "sqlite": ["INSERT INTO usage_charges", "UPDATE runs", "INSERT INTO juru_parts"],
}


def weather_call(city: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "get_weather", "arguments": {"city": city}}]}


def is_write(statement: str) -> bool:
    """A statement that changes something, but for claims (of this run or none)."""
    words = statement.split()
    return (
        words[0].upper() in {"INSERT", "UPDATE", "DELETE", "WITH"}
        and "WITH chosen" not in statement
        and "runs.attempts +" not in statement
    )


def shapes(statements: list[str], prefixes: list[str]) -> list[str]:
    """Each statement named by the first of `prefixes` it starts with (or its first words)."""
    named = []
    for statement in statements:
        flat = " ".join(statement.split())
        named.append(next((p for p in prefixes if flat.startswith(p)), flat[:40]))
    return named


async def test_a_paused_paid_step_writes_in_two_statements_or_three(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    # Three calls, each of another city (the same call three times is a loop, which fails it).
    calls = [weather_call(city) for city in ("Jakarta", "Bogor", "Depok")]
    fake_openai.script([*calls, {"content": "Sunny."}])
    dialect = hosted_openai.context.engine.dialect_name
    run = await hosted_openai.new_run(model_id=OPENAI_MODEL)
    await hosted_openai.work()
    await hosted_openai.answer(await hosted_openai.get_run(run["id"]))
    await hosted_openai.work()
    paused = await hosted_openai.get_run(run["id"])
    assert paused["status"] == "requires_action" and paused["step_count"] == 2
    with statements_sent(is_write) as outputs_write:
        assert (await hosted_openai.answer(paused)).status_code == 200
    with statements_sent(is_write) as step_write:
        await hosted_openai.work()
    names = OUTPUTS_WRITE[dialect] + STEP_WRITE[dialect]
    assert shapes(outputs_write, names) == OUTPUTS_WRITE[dialect]
    assert shapes(step_write, names) == STEP_WRITE[dialect]
    # What the joined statements wrote is all there: the step, its charge, its transcript
    # rows and events, the hold settled and the next one taken.
    shown = await hosted_openai.get_run(run["id"])
    assert shown["status"] == "requires_action" and shown["step_count"] == 3
    messages = await hosted_openai.client.get(f"/v1/threads/{run['thread_id']}/messages")
    roles = [message["role"] for message in messages.json()["data"]]
    assert roles == ["user"] + ["assistant", "tool"] * 2 + ["assistant"]
    engine, account = hosted_openai.context.engine, hosted_openai.account_id
    events = await events_after(engine, run["id"], 0)
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    assert [event.type for event in events].count("step.completed") == 3
    held = await engine.scalar(select(accounts.c.held_rupiah).where(accounts.c.id == account))
    assert held == 0 == await held_total(engine, account)
    charges = await engine.scalar(select(func.count()).where(usage_charges.c.run_id == run["id"]))
    assert charges == 3


async def test_a_hold_given_back_and_another_taken_in_one_write_both_count(
    hosted: HostedHarness,
) -> None:
    """Both parts change the account's row: joined, one of the changes would be lost."""
    account = await hosted.sign_in("holder", balance=1000)
    engine, now = hosted.context.engine, hosted.clock.now()

    def new_hold(name: str, amount: int) -> Hold:
        return Hold(name, account, Decimal(amount), "test", now, now + timedelta(minutes=5))

    assert await hold(engine, new_hold("hold_a", 300))

    def give_back_and_take(connection: Connection) -> dict[str, Any]:
        released = debit_part(account, Decimal(0), ["hold_a"])
        return write_parts(connection, [released, hold_part(new_hold("hold_b", 200))])

    assert (await write(engine, give_back_and_take))["hold_taken"] is True
    held = await engine.scalar(select(accounts.c.held_rupiah).where(accounts.c.id == account))
    assert held == Decimal(200) == await held_total(engine, account)


async def test_a_hold_that_does_not_fit_leaves_the_rest_of_its_write_written(
    hosted: HostedHarness,
) -> None:
    """On SQLite the hold's trigger refuses it with `RAISE(ABORT)`, which undoes the whole
    statement: the write's other parts are sent again without it."""
    account = await hosted.sign_in("short", balance=100)
    run = await hosted.new_run()
    engine, now = hosted.context.engine, hosted.clock.now()
    too_much = Hold("hold_big", account, Decimal(101), "test", now, now + timedelta(minutes=5))
    event = NewRunEvent(RunEventType.MESSAGE_COMPLETED, {"n": 1}, key="refused-beside")

    def events_and_hold(connection: Connection) -> dict[str, Any]:
        parts = [events_part([(run["id"], event)], now), hold_part(too_much)]
        return write_parts(connection, parts)

    assert (await write(engine, events_and_hold))["hold_taken"] is False
    logged = await events_after(engine, run["id"], 0)
    assert [e.data for e in logged if e.type == "message.completed"] == [{"n": 1}]
    held = await engine.scalar(select(accounts.c.held_rupiah).where(accounts.c.id == account))
    assert held == 0 == await held_total(engine, account)


async def test_a_transcript_written_again_updates_known_ids_and_appends_the_rest(
    hosted: HostedHarness,
) -> None:
    agent = await hosted.create_agent()
    thread = (await hosted.create_thread(agent["id"]))["id"]
    engine, now = hosted.context.engine, hosted.clock.now()

    def message(message_id: str, content: str) -> dict[str, Any]:
        return {"message_id": message_id, "role": "user", "content": content}

    async def append(messages: list[dict[str, Any]]) -> None:
        await write(engine, lambda c: append_transcript(c, thread, None, messages, now))

    await append([message("m1", "one"), message("m2", "two")])
    # A redone write: m2 again (changed), new ones, and an id given twice.
    await append([message("m3", "three"), message("m2", "two, again"), message("m4", "four")])
    await append([message("m5", "five"), message("m5", "five, last")])
    page = await list_messages(engine, thread, 10, None)
    assert [(m.position, m.message_id, m.content) for m in page.items] == [
        (0, "m1", "one"),
        (1, "m2", "two, again"),
        (2, "m3", "three"),
        (3, "m4", "four"),
        (4, "m5", "five, last"),
    ]


# Text that a driver or a JSON value has to quote or escape, and characters past ASCII.
AWKWARD = 'say "hi" \\ back\nin {"json": [1, 2]} \'quoted\', café, 你好, 🙂, \t, ,;{}'


async def test_text_and_json_come_back_as_they_were_written(hosted: HostedHarness) -> None:
    run = await hosted.new_run()
    engine, now = hosted.context.engine, hosted.clock.now()
    calls = [{"id": "call_1", "name": "lookup", "arguments": '{"q": "' + AWKWARD + '"}'}]
    messages: list[dict[str, Any]] = [
        {"message_id": "m1", "role": "assistant", "content": AWKWARD, "tool_calls": calls},
        {
            "message_id": "m2",
            "role": "tool",
            "content": "",
            "tool_calls": None,
            "tool_call_id": "call_1",
            "name": AWKWARD,
        },
    ]
    data = {"text": AWKWARD, "nested": {"list": [AWKWARD, None, 1.5, True]}, "none": None}
    events = [
        NewRunEvent(RunEventType.MESSAGE_COMPLETED, data, key=AWKWARD),
        NewRunEvent(RunEventType.MESSAGE_COMPLETED, {"empty": ""}),
    ]

    def both(connection: Connection) -> None:
        append_transcript(connection, run["thread_id"], run["id"], messages, now)
        append_events(connection, run["id"], events, now)

    await write(engine, both)
    written = (await list_messages(engine, run["thread_id"], 10, None)).items[-2:]
    assert [(m.content, m.tool_calls, m.tool_call_id, m.name) for m in written] == [
        (AWKWARD, calls, None, None),
        ("", None, "call_1", AWKWARD),
    ]
    logged = (await events_after(engine, run["id"], 0))[-2:]
    assert [event.data for event in logged] == [data, {"empty": ""}]


async def test_a_keyed_event_is_looked_up_by_its_key_not_in_the_whole_log(
    hosted: HostedHarness,
) -> None:
    # A redone step's events are recognised by their keys. With thousands of events in the
    # log and no statistics on them, PostgreSQL hashed every event of every run to check the
    # few keys a step gives (it takes the given rows for 100): a read of the whole log at
    # every step's write, growing with it.
    run = await hosted.new_run()
    engine, now = hosted.context.engine, hosted.clock.now()
    known = [
        NewRunEvent(RunEventType.MESSAGE_COMPLETED, {"n": n}, key=f"k{n}") for n in range(3000)
    ]
    await write(engine, lambda connection: append_events(connection, run["id"], known, now))
    again = [
        NewRunEvent(RunEventType.MESSAGE_COMPLETED, {"n": "again"}, key="k7"),
        NewRunEvent(RunEventType.MESSAGE_COMPLETED, {"n": "new"}, key="k-new"),
    ]
    plans: list[str] = []

    def keep(notice: Any) -> None:
        plans.append(str(notice.message_primary))

    def explained(connection: Connection) -> None:
        postgresql = connection.dialect.name == "postgresql"
        if postgresql:
            for setting in (
                "LOAD 'auto_explain'",
                "SET LOCAL auto_explain.log_min_duration = 0",
                "SET LOCAL auto_explain.log_level = notice",
            ):
                connection.exec_driver_sql(setting)
            driver = connection.connection.driver_connection
            driver.add_notice_handler(keep)
        try:
            append_events(connection, run["id"], again, now)
        finally:
            if postgresql:  # the settings end with the transaction, the handler here
                driver.remove_notice_handler(keep)

    await write(engine, explained)
    logged = (await events_after(engine, run["id"], 0, limit=5000))[-3:]
    assert (logged[-1].seq, logged[-1].data) == (logged[-2].seq + 1, {"n": "new"})
    assert [event.data for event in logged].count({"n": "again"}) == 0
    if engine.engine.dialect.name == "postgresql":
        plan = "\n".join(plans)
        assert "run_events" in plan and "Seq Scan on run_events" not in plan, plan
