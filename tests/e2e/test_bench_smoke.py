"""The benchmark harness must not rot: its fake model answers the real OpenAI client, the profile
attribution charges the right parts, the overhead scenario runs end to end in quick mode, and
the bare-runtime and playground peers run the bench graph (Aegra is left out: it installs a
virtual environment of its own)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import openai
import psycopg
import pytest

from bench import http_floor, report, run
from bench.client import TOOL
from bench.harness import POSTGRES_URL, FakeModel, create_postgres_database, drop_postgres_database
from bench.profile import attribute
from bench.scenarios import baseline, instructions, latency, overhead, peers, streams, throughput
from juru.agents.hosted import build_hosted_agent

pytestmark = pytest.mark.e2e


def test_fake_model_calls_the_tool_k_times_then_answers(tmp_path: Path) -> None:
    model = FakeModel(tmp_path / "fake.log", latency=0.0, tool_calls=2).start()
    try:
        client = openai.OpenAI(base_url=model.base_url, api_key="bench", max_retries=0)
        messages: Any = [{"role": "user", "content": "go"}]
        tools: Any = [TOOL]
        for step in range(2):
            reply = client.chat.completions.create(
                model="gpt-4o",
                messages=messages,
                tools=[TOOL],  # type: ignore[arg-type, list-item]
            )
            call: Any = (reply.choices[0].message.tool_calls or [])[0]
            assert call.function.arguments == json.dumps({"step": step}, separators=(",", ":"))
            messages.append(reply.choices[0].message.model_dump(exclude_none=True))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "ok"})
        chunks = client.chat.completions.create(
            model="gpt-4o",
            messages=messages,
            tools=tools,
            stream=True,
            stream_options={"include_usage": True},
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "done"
        assert model.stats()["requests"] == 3
    finally:
        model.stop()


def test_fake_model_streams_a_long_answer_one_word_a_chunk(tmp_path: Path) -> None:
    model = FakeModel(tmp_path / "fake.log", latency=0.0, tool_calls=0, answer_words=5).start()
    try:
        client = openai.OpenAI(base_url=model.base_url, api_key="bench", max_retries=0)
        messages: Any = [{"role": "user", "content": "go"}]
        chunks = client.chat.completions.create(model="gpt-4o", messages=messages, stream=True)
        pieces = [c.choices[0].delta.content for c in chunks if c.choices]
        assert [piece for piece in pieces if piece] == [
            "word0",
            " word1",
            " word2",
            " word3",
            " word4",
        ]
        whole = client.chat.completions.create(model="gpt-4o", messages=messages)
        assert whole.choices[0].message.content == "word0 word1 word2 word3 word4"
    finally:
        model.stop()


async def test_baseline_reads_a_streamed_reply_three_ways(tmp_path: Path) -> None:
    figures = await baseline.streamed_reading(tmp_path, calls=4)
    assert set(figures) == {
        "streamed_juru_cpu_ms_per_call",
        "streamed_langchain_defaults_cpu_ms_per_call",
        "streamed_not_streamed_cpu_ms_per_call",
    }
    assert all(value > 0 for value in figures.values())


@pytest.mark.postgresql
@pytest.mark.parametrize("durability", ["async", "exit"])
async def test_baseline_runs_the_hosted_graph_on_langgraphs_postgres_saver(
    tmp_path: Path, durability: str
) -> None:
    model = FakeModel(tmp_path / "fake.log", latency=0.0, tool_calls=2).start()
    http = openai.DefaultAsyncHttpxClient()
    try:
        chat = baseline.stock_chat(model.base_url, http)
        async with baseline.saver("postgresql") as checkpointer:
            graph = build_hosted_agent(chat, [TOOL], "").copy({"checkpointer": checkpointer})
            assert await baseline.one_run(graph, durability) == 3
            saved = [item async for item in checkpointer.alist(None)]
        # Every node saves a checkpoint of its own; at pauses, one per pause and one at the end.
        assert len(saved) > 3 if durability == "async" else len(saved) == 3
    finally:
        await http.aclose()
        model.stop()


def test_profile_charges_the_innermost_known_part() -> None:
    collapsed = "\n".join(
        [
            "run (/x/uvicorn/server.py:1);ainvoke (/x/langchain_core/a.py:2);"
            "post (/x/openai/_base_client.py:3);dumps (/usr/lib/json/__init__.py:4) 3",
            "run (/x/uvicorn/server.py:1);put (/x/langgraph/checkpoint/sqlite/aio.py:5) 2",
            "run (/x/uvicorn/server.py:1);execute (/x/sqlalchemy/engine/base.py:6) 1",
            "run (/x/uvicorn/server.py:1);Runner.run (/usr/lib/asyncio/runners.py:118) 4",
            "run (/x/uvicorn/server.py:1);Runner.run (/usr/lib/asyncio/runners.py:118);"
            "step (/usr/lib/asyncio/tasks.py:9);get (/x/juru/store/runs.py:1) 5",
            "run (/x/uvicorn/server.py:1);create (/x/juru/models/openai_body.py:7);"
            "post (/x/aiohttp/client.py:8) 6",
        ]
    )
    assert attribute(collapsed) == {
        "openai client + HTTP pool": 9,
        "checkpointer": 2,
        "database": 1,
        "event loop + other": 4,
        "juru": 5,
    }


# Baseline rows as the scenario writes them: a saver saving at every node, and two at pauses.
BASELINE_ROWS: list[dict[str, Any]] = [
    {"checkpointer": "sqlite", "durability": "async", "cpu_ms_per_step": 14.0, "ratio": 1.07},
    {
        "checkpointer": "sqlite, saved at pauses",
        "durability": "exit",
        "cpu_ms_per_step": 9.5,
        "ratio": 1.05,
    },
    {
        "checkpointer": "postgresql, saved at pauses",
        "durability": "exit",
        "cpu_ms_per_step": 10.5,
        "ratio": 1.06,
    },
]


async def test_the_http_floor_serves_a_steps_request_and_reports_the_floors(
    tmp_path: Path,
) -> None:
    step = await http_floor.measure(tmp_path / "floor.log", 10)
    assert 0 < step.cpu_ms < 100 and 0 < step.wall_ms < 100
    assert step.hopped == 0
    # Every request was answered (the access log has them), after the 20 of the warm-up.
    log = (tmp_path / "floor.log").read_text()
    assert log.count('POST /v1/runs/run_1/tool_outputs?wait=30 HTTP/1.1" 200') == 30
    # Paced as a hosted step is, a model call's wait before each request.
    paced = await http_floor.measure(tmp_path / "paced.log", 5, pause=0.05)
    assert paced.seconds >= 5 * 0.05 > step.seconds
    assert 0 < paced.cpu_ms < 100 and 0 < paced.wall_ms < 100
    rows = BASELINE_ROWS
    result = {
        "rows": rows,
        "model_latency_s": 0.2,
        "http_step_cpu_ms": step.cpu_ms,
        "http_step_wall_ms": 2.0,
    }
    assert report.hosted_step_floor(result) == (9.5, step.cpu_ms)
    assert report.hosted_step_floor({**result, "rows": rows[:1]}) is None
    # A step's request adds its time to every model step of 200 ms: 2 ms is 0.01.
    floors = report.hosted_e2e_floors(result)
    savers = [(saver, ratio) for saver, ratio, _ in floors]
    assert savers == [("sqlite", 1.05), ("postgresql", 1.06)]
    assert [round(total, 6) for _, _, total in floors] == [1.06, 1.07]
    assert report.hosted_e2e_floors({"rows": rows}) == []


@pytest.mark.parametrize(
    "database", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)]
)
async def test_the_http_floor_keeps_a_steps_outputs_and_hops_to_a_second_process(
    tmp_path: Path, database: str
) -> None:
    if database == "sqlite":
        name, store = None, str(tmp_path / "outputs.db")
    else:
        name = create_postgres_database("juru_test_floor")
        store = f"{POSTGRES_URL}/{name}"
    try:
        step = await http_floor.measure(tmp_path / "kept.log", 10, store=store, hop=True)
        query = f"SELECT run_id, outputs FROM {http_floor.OUTPUTS_TABLE}"
        if name is None:
            with contextlib.closing(sqlite3.connect(store)) as connection:
                kept = connection.execute(query).fetchall()
        else:
            with psycopg.connect(store) as connection:
                kept = connection.execute(query).fetchall()
    finally:
        if name is not None:
            drop_postgres_database(name)
    assert 0 < step.cpu_ms < 100 and 0 < step.wall_ms < 100
    # Every request's outputs, the 20 of the warm-up too, committed before it was answered.
    assert len(kept) == 30
    outputs = [{"tool_call_id": "call_1", "output": '{"ok": true}'}]
    # SQLite gives the JSON's text back, PostgreSQL its value (a `jsonb` column).
    decoded = [(run, o if isinstance(o, list) else json.loads(o)) for run, o in kept]
    assert decoded == [("run_1", outputs)] * 30
    # Each measured request went to another process and back before it was answered.
    assert step.hopped == 10


def test_the_floors_of_a_step_that_keeps_its_outputs_pair_each_saver_with_its_database() -> None:
    rows = BASELINE_ROWS
    kept = {
        "sqlite": {"cpu_ms": 2.0, "wall_ms": 3.0},
        "postgresql": {"cpu_ms": 2.5, "wall_ms": 4.0},
    }
    result = {"rows": rows, "model_latency_s": 0.2, "http_step_kept": kept}
    floors = [
        (saver, round(cpu, 6), round(e2e, 6)) for saver, cpu, e2e, _ in report.kept_floors(result)
    ]
    # 3 ms over each 200 ms step is 0.015; 4 ms, 0.02.
    assert floors == [("sqlite", 11.5, 1.065), ("postgresql", 13.0, 1.08)]
    # A database measured without its saver's row, or no such request at all: no floor.
    assert [f[0] for f in report.kept_floors({**result, "rows": rows[:2]})] == ["sqlite"]
    assert report.kept_floors({"rows": rows}) == []


def test_a_missed_overhead_target_names_the_floor_measured_in_the_same_sitting() -> None:
    kept = {
        "sqlite": {"cpu_ms": 2.0, "wall_ms": 3.0},
        "postgresql": {"cpu_ms": 2.5, "wall_ms": 4.0},
    }
    baseline = {
        "scenario": "baseline",
        "db": "in-process",
        "rows": BASELINE_ROWS,
        "model_latency_s": 0.2,
        "http_step_kept": kept,
    }

    def overhead(db: str, cpu: float, ratio: float) -> dict[str, Any]:
        return {
            "scenario": "overhead",
            "db": db,
            "server_cpu_ms_per_step": cpu,
            "ratio_median": ratio,
        }

    # Floors (kept_floors): SQLite 11.5 ms and 1.065 (over its 1.06 limit), PostgreSQL 13.0 ms
    # and 1.08 (at its limit, so still reachable).
    results = [overhead("sqlite", 14.0, 1.07), overhead("postgresql", 19.0, 1.09), baseline]
    verdicts = {name: verdict for name, _limit, _value, verdict in report.targets(results)}
    assert verdicts["server CPU per model step (sqlite)"] == "met"
    assert verdicts["e2e ÷ model time (sqlite)"] == (
        "missed: the floor on this machine, 1.065, is above the limit"
    )
    assert verdicts["server CPU per model step (postgresql)"] == (
        "missed: 6.0 above the floor on this machine, 13.0"
    )
    assert verdicts["e2e ÷ model time (postgresql)"] == (
        "missed: 0.010 above the floor on this machine, 1.080"
    )
    # Without the baseline in the sitting, no floor to name.
    alone = {name: verdict for name, _limit, _value, verdict in report.targets(results[:2])}
    assert alone["e2e ÷ model time (sqlite)"] == "missed"
    # A floor measured in blocks that took turns with Juru's runs comes before the baseline's,
    # and the gap is Juru's in those blocks.
    alternated = {
        "blocks": 6,
        "juru": {"cpu_ms_per_step": 17.5, "ratio_median": 1.085},
        "floor": {"cpu_ms_per_step": 15.0, "ratio_median": 1.07},
    }
    turns = [{**results[1], "against_floor": alternated}, baseline]
    verdicts = {name: verdict for name, _limit, _value, verdict in report.targets(turns)}
    assert verdicts["server CPU per model step (postgresql)"] == (
        "missed: 2.5 above the floor on this machine, 15.0, in blocks that took turns with it"
    )
    assert verdicts["e2e ÷ model time (postgresql)"] == (
        "missed: 0.015 above the floor on this machine, 1.070, in blocks that took turns with it"
    )


def test_overhead_scenario_quick(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(overhead, "LATENCY", 0.02)  # the scenario's path, at a tenth of the wait
    # Smaller than quick mode: every set of runs (measured, profiled, each kind of the
    # alternation, Juru's against the floor) is one block of 2 runs.
    monkeypatch.setattr(overhead, "QUICK_RUNS", 2)
    monkeypatch.setattr(overhead, "BLOCK_RUNS", 2)
    assert (
        run.main(["--db", "sqlite", "--scenarios", "overhead", "--quick", "--out", str(tmp_path)])
        == 0
    )
    result = json.loads((tmp_path / "overhead-sqlite.json").read_text())
    assert result["model_steps"] == result["runs"] * 5
    assert result["model_latency_s"] == 0.02
    assert result["ratio_median"] > 1.0
    assert result["server_cpu_ms_per_step"] > 0
    # Both sides of a step work: the API process (HTTP, the outputs' write) and a worker.
    assert 0 < result["api_cpu_ms_per_step"] < result["server_cpu_ms_per_step"]
    # Measured after every worker process has run once (its first run pays its imports).
    assert result["warmed_workers"] == result["worker_processes"] >= 1
    # A run: its creation, waiting for the first pause, then one request per pause (the
    # outputs', waiting for the next). Driven the older way: creation, `GET ?wait=`, and two
    # requests per pause.
    assert result["requests_per_step"] == pytest.approx(5 / 5)
    # The CPU's split comes from as many runs again, sampled apart from the measured ones.
    assert result["profiled_cpu_ms_per_step"] > 0 and result["profiled_ratio_median"] > 1.0
    one, two = result["alternating"]["one_request"], result["alternating"]["two_requests"]
    assert one["requests_per_step"] == pytest.approx(5 / 5)
    assert two["requests_per_step"] == pytest.approx(10 / 5)
    for driven in (one, two):
        assert driven["server_cpu_ms_per_step"] > driven["api_cpu_ms_per_step"] > 0
        assert driven["ratio_median"] > 1.0
    # And blocks of them taking turns with blocks of the floor on the same kind of database:
    # the graph in-process saving at pauses, and a request that keeps the outputs.
    turns = result["against_floor"]
    assert turns["blocks"] == 1
    floor = turns["floor"]
    assert floor["cpu_ms_per_step"] == pytest.approx(
        floor["graph_cpu_ms_per_step"] + floor["request_cpu_ms"]
    )
    assert floor["graph_cpu_ms_per_step"] > 0 and floor["request_cpu_ms"] > 0
    assert floor["ratio_median"] > floor["graph_ratio_median"] > 1.0
    assert turns["juru"]["cpu_ms_per_step"] > 0 and turns["juru"]["ratio_median"] > 1.0
    saved = json.loads((tmp_path / "latest.json").read_text())
    assert [r["scenario"] for r in saved["results"]] == ["overhead"]


def test_census_scenario_counts_a_steps_statements_and_makes_them_a_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(overhead, "LATENCY", 0.05)
    monkeypatch.setattr(overhead, "CENSUS_RUNS", 2)  # statements per step: 2 runs count them
    # Runs on a server of its own: the census is never on for the overhead scenario's.
    monkeypatch.delenv("JURU_BENCH_SQL", raising=False)
    argv = ["--db", "sqlite", "--scenarios", "census", "--out", str(tmp_path)]
    assert run.main(argv) == 0
    result = json.loads((tmp_path / "census-sqlite.json").read_text())
    assert result["model_steps"] == result["runs"] * 5
    sql = result["sql_per_step"]
    # A paused step writes its one charge, then changes the run, then writes the rest (its
    # transcript rows among them) in one statement; so do the tool outputs, after the run.
    assert sql["INSERT INTO usage_charges"] == pytest.approx(1.0)
    assert sql["UPDATE runs"] >= 2.0
    assert sql["INSERT INTO juru_parts"] >= 2.0
    assert "INSERT INTO thread_messages" not in sql
    # SQLite's write queue begins every write itself, and a statement is one of a write.
    assert sql["BEGIN"] >= sql["(commit)"] > 0
    statements, commits = report.sql_census(result) or (0.0, 0.0)
    control = sql["BEGIN"] + sql.get("PRAGMA", 0.0) + commits
    assert statements == pytest.approx(sum(sql.values()) - control)
    found = {name: (value, verdict) for name, _, value, verdict in report.targets([result])}
    assert found["SQL statements per model step (sqlite, census)"][0] == f"{statements:.1f}"
    assert found["SQL commits per model step (sqlite, census)"] == (f"{commits:.1f}", "met")
    title, _header, rows = report.census_table([result])
    assert title.startswith("8. SQL census") and rows[0][2] == f"{statements:.1f}"


def test_instructions_scenario_counts_the_measured_runs_of_every_server_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Smaller than quick mode: one measured run (a run under callgrind takes seconds), after
    # the warm-up of every worker process and no other warm run.
    monkeypatch.setattr(instructions, "QUICK_RUNS", (1, 0))
    # One worker process beside the API process: each starts and warms under valgrind.
    slow_server = {**instructions.SLOW_SERVER, "JURU_WORKER_PROCESSES": "1"}
    monkeypatch.setattr(instructions, "SLOW_SERVER", slow_server)
    argv = ["--db", "sqlite", "--scenarios", "instructions", "--quick", "--out", str(tmp_path)]
    assert run.main(argv) == 0
    result = json.loads((tmp_path / "instructions-sqlite.json").read_text())
    assert "error" not in result, result.get("error")
    assert result["model_steps"] == result["runs"] * 5
    # The API process and at least one worker, each counted (a dump of its own each).
    assert result["processes"] >= 2
    dumps = list((tmp_path / "callgrind-sqlite").glob("callgrind.*.*"))
    assert len(dumps) >= result["processes"]
    # A step's work is millions of instructions, some of them the API process's; the count
    # starts after the warm runs (counted too, a step would carry its share of them).
    assert 0 < result["api_instructions_per_step"] < result["instructions_per_step"]
    assert result["instructions_per_step"] > 1e6
    title, _header, rows = report.instructions_table([result])
    assert title.startswith("9. Instructions per model step")
    assert rows[0][4] == f"{result['instructions_per_step'] / 1e6:.2f} M"


def test_latency_scenario_takes_every_step_apart_in_parts_that_add_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(latency, "LATENCY", 0.05)  # every part of the path, a quarter of the wait
    argv = ["--db", "sqlite", "--scenarios", "latency", "--quick", "--out", str(tmp_path)]
    assert run.main(argv) == 0
    result = json.loads((tmp_path / "latency-sqlite.json").read_text())
    # Every tool outputs' request of the measured runs (four a run), each split: the probe
    # found every point of the path in the API process and in the worker that ran the step.
    assert (result["steps"], result["steps_missed"]) == (result["runs"] * 4, 0)
    # The parts follow one another from the client's sending to its answer.
    assert result["unexplained_ms"] < 0.001
    parts = result["parts_ms"]
    assert list(parts) == [name for name, _, _ in latency.SEGMENTS]
    # Both writes went through the driver, and both the API and the worker did work of their
    # own on the way.
    for part in ("the tool outputs' write: in the driver", "the step's write: in the driver"):
        assert parts[part] > 0
    assert parts["HTTP, key, rate limit, body (API)"] > 0
    assert parts["LangGraph to the model call"] > 0
    assert 0 < result["step_ms"] < 1000
    title, _header, rows = report.latency_table([result])
    assert title.startswith("10. Where a step's latency goes")
    assert rows[-1] == ["steps", f"{result['steps']} of {result['steps']}"]


def test_throughput_scenario_times_each_steps_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(throughput, "LATENCY", 0.05)
    monkeypatch.setenv("JURU_BENCH_LEVELS", "4")
    # Smaller than quick mode: a second of warm-up (every lane past its first run), a window
    # of 1.5 s (some twenty runs' steps, their waits, at 4 lanes).
    monkeypatch.setattr(throughput, "QUICK_WINDOWS", (1.0, 1.5))
    arguments = ["--db", "sqlite", "--scenarios", "throughput", "--quick", "--out", str(tmp_path)]
    assert run.main(arguments) == 0
    [row] = json.loads((tmp_path / "throughput-sqlite.json").read_text())["rows"]
    assert row["concurrency"] == 4 and row["model_steps"] > 0
    assert row["stalled_waits"] == 0
    # One waiting request per model step (the creation's, then each answer's), give or take
    # the requests in flight at either end of the window.
    assert abs(row["step_waits"] - row["model_steps"]) <= 2 * 4
    # A step's wait holds at least the model's call.
    assert throughput.LATENCY <= row["wait_p50_s"] <= row["wait_p99_s"] < throughput.WAIT_SECONDS


def test_peer_scenarios_run_the_same_graph_in_process_and_in_the_playground(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Smaller than quick mode: model calls of 50 ms, one sequential run, one level of 2 clients
    # for half a second, and alternating blocks of one run each.
    monkeypatch.setattr(peers, "LATENCY", 0.05)
    monkeypatch.setattr(peers, "levels", lambda quick: ([2], 0.2, 0.5, 1))
    monkeypatch.setattr(peers, "alternation", lambda quick: (2, 1))
    argv = ["--db", "sqlite", "--scenarios", "bare,playground", "--quick", "--out", str(tmp_path)]
    assert run.main(argv) == 0
    bare = json.loads((tmp_path / "bare-in-process.json").read_text())
    playground = json.loads((tmp_path / "playground-sqlite.json").read_text())
    # Juru's playground as it is served (a turn saved once), then saving every step as well.
    assert playground["durability"] == "exit"
    assert playground["every_step"]["durability"] == "async"
    for measured in [*bare["savers"], playground, playground["every_step"]]:
        assert measured["sequential"]["model_steps"] == 5  # 4 get_weather calls, then the answer
        assert measured["sequential"]["cpu_ms_per_step"] > 0
        assert measured["rows"][0]["errors"] == 0
        assert measured["saturation_steps_per_s"] > 0
    # The ratio to the bare runtime comes from blocks that alternate on the playground's server.
    alternated = playground["against_bare"]
    assert len(alternated["blocks"]) == alternated["pairs"] == 2
    ratios = [block["juru"] / block["bare"] for block in alternated["blocks"]]
    assert alternated["ratio_median"] == pytest.approx(sum(ratios) / 2)
    assert all(block["juru"] > 0 and block["bare"] > 0 for block in alternated["blocks"])
    # Each block's model steps are its own runs' (5 a run), none of runs still going before it.
    steps = alternated["runs_per_block"] * 5
    assert all(b["juru_steps"] == b["bare_steps"] == steps for b in alternated["blocks"])
    saved = json.loads((tmp_path / "latest.json").read_text())
    targets = {name: value for name, _limit, value, _verdict in report.targets(saved["results"])}
    ratio = targets["Juru playground CPU/step ÷ bare runtime (sqlite saver) CPU/step (sqlite)"]
    assert ratio == f"{alternated['ratio_median']:.2f}x"


def test_streams_scenario_follows_runs_and_holds_streams_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Smaller than quick mode: model calls of 50 ms, 2 runs of each kind one at a time, 3
    # concurrent streams, 20 open ones, half-second windows.
    for name, value in {
        "LATENCY": 0.05,
        "QUICK_RUNS": 2,
        "CONCURRENT_STREAMS": 3,
        "CONCURRENT_LATENCY": 0.2,
        "OPEN_STREAMS": 20,
        "QUICK_WINDOW": 0.5,
    }.items():
        monkeypatch.setattr(streams, name, value)
    argv = ["--db", "sqlite", "--scenarios", "streams", "--quick", "--out", str(tmp_path)]
    assert run.main(argv) == 0
    result = json.loads((tmp_path / "streams-sqlite.json").read_text())
    one = result["sequential"]
    assert one["model_steps"] == one["runs"] * 5
    # The same server drove as many runs with `?wait=`, in alternating blocks.
    assert one["waited_runs"] == one["runs"] and one["waited_cpu_ms_per_step"] > 0
    difference = one["server_cpu_ms_per_step"] - one["waited_cpu_ms_per_step"]
    assert one["streamed_minus_waited_ms"] == pytest.approx(difference)
    # Both kinds of run are timed from their creation: every model step's wait is in it.
    assert one["ratio_median"] > 1.0 and one["waited_ratio_median"] > 1.0
    assert result["concurrent"]["events_timed"] > 0 and result["concurrent"]["lane_errors"] == 0
    assert 0 <= result["concurrent"]["delay_p50_ms"] <= result["concurrent"]["delay_p99_ms"]
    # The client's own loop lag, measured over the same window, beside the delays.
    lag = result["concurrent"]
    assert 0 <= lag["client_lag_p99_ms"] <= lag["client_lag_max_ms"]
    assert result["idle"]["open_streams"] == 20
    saved = json.loads((tmp_path / "latest.json").read_text())
    names = [name for name, _limit, _value, _verdict in report.targets(saved["results"])]
    assert any(name.startswith("event delay p99") for name in names)
    # Without scenario 1 in the sitting, the stream's extra CPU comes from scenario 7 alone.
    assert any(name.startswith("CPU per step, streamed minus") for name in names)


def test_tables_follow_their_numbers_whatever_order_the_scenarios_ran_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def titled(title: str) -> Any:
        return lambda results: (title, [], [])

    # The scenarios' own tables first (9 before 10 and 7 as numbers, not as text), the peers'
    # last, as `tables` builds them.
    built = {"latency": titled("10. l"), "census": titled("9. c"), "streams": titled("7. s")}
    monkeypatch.setattr(report, "TABLES", built)
    monkeypatch.setattr(report, "peers_table", titled("5. peers"))
    monkeypatch.setattr(report, "peer_summary", titled("6. peers in one sitting"))
    ran = [{"scenario": name} for name in ("latency", "aegra", "census", "streams")]
    numbers = [title.split(".")[0] for title, _, _ in report.tables(ran)]
    assert numbers == ["5", "6", "7", "9", "10"]
