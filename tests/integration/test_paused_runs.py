"""Tool outputs posted right after the paused run was read: no second read of the run, and a
view of the run that went stale meanwhile (another process moved it) never decides the answer."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from juru.store.records import RunRecord
from juru.store.runs import get_run
from tests.support.fake_openai import FakeOpenAIServer
from tests.support.hosted import HostedHarness, api_error
from tests.support.statements import statements_sent

MODEL = "openai/gpt-4o-mini"


def weather_call(call_id: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": "get_weather", "arguments": {"city": "Bogor"}}]}


def run_reads() -> AbstractContextManager[list[str]]:
    """The statements that read the `runs` table meanwhile, but for a worker's take-up of a
    run handed to it (`store.runs.handed_runs`, which reads the account's tier with the run):
    the reads counted are those that answer clients."""
    return statements_sent(
        lambda statement: (
            statement.lstrip().upper().startswith("SELECT")
            and "FROM runs" in statement
            and "AS account_tier" not in statement
        )
    )


async def paused_run(hosted: HostedHarness) -> dict[str, Any]:
    """A run of the demo model paused on its weather call, as `GET` shows it."""
    run = await hosted.new_run()
    await hosted.work()
    shown = await hosted.get_run(run["id"])
    assert shown["status"] == "requires_action", shown
    return shown


async def resume_elsewhere(hosted: HostedHarness, run_id: str, output: str) -> None:
    """Resume the run the way another API process would: through the machine, unseen by this
    process's service."""
    record = await get_run(hosted.context.engine, run_id, hosted.account_id)
    assert isinstance(record, RunRecord)
    answers = {call["id"]: output for call in record.pending_tool_calls or []}
    assert await hosted.context.machine.submit_tool_outputs(record, answers) is not None


async def test_outputs_right_after_the_read_need_no_read_of_the_run(
    hosted: HostedHarness,
) -> None:
    shown = await paused_run(hosted)
    with run_reads() as reads:
        response = await hosted.answer(shown)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "running"
    assert reads == []
    await hosted.work()
    assert (await hosted.get_run(shown["id"]))["status"] == "succeeded"


async def test_a_run_ended_elsewhere_after_the_read_answers_409(hosted: HostedHarness) -> None:
    shown = await paused_run(hosted)
    await resume_elsewhere(hosted, shown["id"], '{"temp_c": 30}')
    await hosted.work()
    api_error(await hosted.answer(shown), 409, "run_not_waiting")
    done = await hosted.get_run(shown["id"])
    assert done["status"] == "succeeded" and "30" in done["output"]


async def test_a_new_pause_elsewhere_takes_its_own_outputs(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    hosted = hosted_openai
    fake_openai.script([weather_call("call_1"), weather_call("call_2"), {"content": "Done"}])
    first = await paused_run_of(hosted, MODEL)
    assert [call["id"] for call in first["pending_tool_calls"]] == ["call_1"]
    await resume_elsewhere(hosted, first["id"], "sunny")
    await hosted.work()
    # This process still remembers the first pause; the run now waits on call_2, and the
    # answer is the one a fresh read gives.
    message = api_error(await hosted.answer(first), 400, "invalid_tool_outputs")
    assert "not answered: call_2" in message and "not pending: call_1" in message
    outputs = [{"tool_call_id": "call_2", "output": "rainy"}]
    response = await hosted.client.post(
        f"/v1/runs/{first['id']}/tool_outputs", json={"outputs": outputs}
    )
    assert response.status_code == 200, response.text
    await hosted.work()
    done = await hosted.get_run(first["id"])
    assert done["status"] == "succeeded" and done["output"] == "Done"
    assert done["step_count"] == 3


async def paused_run_of(hosted: HostedHarness, model_id: str) -> dict[str, Any]:
    agent = await hosted.create_agent(model_id=model_id)
    thread = await hosted.create_thread(agent["id"])
    started = await hosted.start_run(thread["id"])
    assert started.status_code == 202, started.text
    await hosted.work()
    shown = await hosted.get_run(started.json()["id"])
    assert shown["status"] == "requires_action", shown
    return shown


async def test_another_accounts_run_stays_404_after_its_owner_read_it(
    hosted: HostedHarness,
) -> None:
    shown = await paused_run(hosted)
    hosted.act_as(await hosted.new_account("someone-else"))
    api_error(await hosted.answer(shown), 404, "not_found")
    hosted.act_as(None)
    assert (await hosted.answer(shown)).status_code == 200


async def test_outputs_that_do_not_match_the_pause_get_the_full_answer(
    hosted: HostedHarness,
) -> None:
    shown = await paused_run(hosted)
    wrong = [{"tool_call_id": "call_unknown", "output": "x"}]
    response = await hosted.client.post(
        f"/v1/runs/{shown['id']}/tool_outputs", json={"outputs": wrong}
    )
    message = api_error(response, 400, "invalid_tool_outputs")
    assert "call_unknown" in message
    assert (await hosted.get_run(shown["id"]))["status"] == "requires_action"
