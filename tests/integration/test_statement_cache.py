"""The hosted step path's statements are compiled once: a statement SQLAlchemy cannot cache
(it has no cache key, as a multi-row VALUES) is compiled again at every execution, which on
the step's path costs more than running it."""

from __future__ import annotations

from tests.integration.test_run_engine import OPENAI_MODEL, WEATHER_CALL
from tests.support.fake_openai import FakeOpenAIServer
from tests.support.hosted import HostedHarness
from tests.support.statements import statements_compiled_each_time


async def test_a_paid_run_that_pauses_sends_only_statements_compiled_once(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script([WEATHER_CALL, WEATHER_CALL, {"content": "Sunny."}])
    with statements_compiled_each_time() as compiled:
        run = await hosted_openai.new_run(model_id=OPENAI_MODEL)
        await hosted_openai.work()
        for _ in range(2):
            await hosted_openai.answer(await hosted_openai.get_run(run["id"]))
            await hosted_openai.work()
        done = await hosted_openai.get_run(run["id"])
    assert done["status"] == "succeeded" and done["step_count"] == 3
    assert compiled == []
