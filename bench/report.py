"""Tables of the results (Rich on the terminal, Markdown in RESULTS.md) and the targets."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

# The fake model's latency in the baseline's runs, for results saved before they recorded it.
BASELINE_LATENCY = 0.2

Row = list[str]
# The targets ("The peer in the bench"); every limit is a maximum unless named AT_LEAST.
CPU_MS_PER_STEP = {"sqlite": 15.0, "postgresql": 18.0}  # server CPU per model step
OVERHEAD_RATIO = {"sqlite": 1.06, "postgresql": 1.08}  # e2e / model time
SQL_STATEMENTS_PER_STEP = 8.0  # the SQL census (JURU_BENCH_SQL=1)
SQL_COMMITS_PER_STEP = 3.0
PG_TRANSACTIONS_PER_STEP = 8.0  # pg_stat_database.xact_commit
AT_LEAST_SATURATION = 60.0  # model steps/s
CPU_FLAT = 1.20  # CPU per step at N=200 over N=10
GET_P99_MS = 50.0
WAITING_10K_MIB = 25.0
PLAYGROUND_OVER_BARE = 1.0  # CPU per step
AT_LEAST_JURU_OVER_AEGRA = 2.0  # steps/s
# The streaming issue's targets.
STREAM_DELAY_P99_MS = 50.0  # from an event's write to its arrival, 100 concurrent streams
OPEN_STREAMS_MIB = 50.0  # RSS of 1,000 open streams on one process
STREAM_EXTRA_CPU_MS = 2.0  # CPU per step with streams attached, over the `?wait=` figure


def _f(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def projected_10k_mib(result: dict[str, Any]) -> float:
    """RSS added by 10,000 parked runs: as measured, or (quick mode) the measured growth plus
    the second half's growth per run for the runs not parked."""
    missing = 10_000 - result["parked_runs"]
    return float(result["rss_added_mib"] + result["marginal_kib_per_parked_run"] * missing / 1024)


def _verdict(value: float, limit: float) -> str:
    return "met" if value <= limit else "missed"


# A floor of a figure on this machine: its value, and Juru's figure measured beside it in
# blocks that took turns with it (None when the floor was measured at another moment).
Floor = tuple[float, float | None]


def _against_floor(value: float, limit: float, floor: Floor | None, digits: int) -> str:
    """The verdict of a figure that has a floor on this machine: for a figure missed, how far
    the floor is from the limit and from Juru."""
    if value <= limit or floor is None:
        return _verdict(value, limit)
    lowest, beside = floor
    shown = f"{lowest:.{digits}f}"
    if lowest > limit:
        return f"missed: the floor on this machine, {shown}, is above the limit"
    if beside is None:
        return f"missed: {value - lowest:.{digits}f} above the floor on this machine, {shown}"
    return (
        f"missed: {beside - lowest:.{digits}f} above the floor on this machine, {shown}, "
        "in blocks that took turns with it"
    )


def overhead_floors(
    result: dict[str, Any], baseline: dict[str, Any] | None
) -> tuple[Floor | None, Floor | None]:
    """The floors of an overhead result's CPU per step and e2e ÷ model time: those measured in
    blocks alternating with Juru's runs (`against_floor`), else the baseline's of its database
    (`kept_floors`), else none."""
    alternated = result.get("against_floor")
    if alternated:
        floor, juru = alternated["floor"], alternated["juru"]
        return (
            (floor["cpu_ms_per_step"], juru["cpu_ms_per_step"]),
            (floor["ratio_median"], juru["ratio_median"]),
        )
    for saver, cpu, e2e, _request in kept_floors(baseline) if baseline else []:
        if saver == result["db"]:
            return (cpu, None), (e2e, None)
    return None, None


def _at_least(value: float, limit: float) -> str:
    return "met" if value >= limit else "missed"


def _ratio_limit(db: str) -> float:
    return OVERHEAD_RATIO.get(db, OVERHEAD_RATIO["sqlite"])


def overhead_table(results: Sequence[dict[str, Any]]) -> tuple[str, Row, list[Row]]:
    parts = list(results[0]["cpu_ms_per_step_by_part"]) if results else []
    header = ["db", "runs", "requests/step", "e2e / model time (median)", "max"]
    header += [
        "server CPU ms/step",
        "API process ms",
        "worker processes ms",
        "DB commits/step",
        "DB rollbacks/step",
    ]
    header += ["alternating blocks, 1 / 2 requests per step: CPU ms/step"]
    header += ["profiled runs (the split's): CPU ms/step, e2e / model time"]
    header += ["blocks taking turns with the floor: Juru / floor, CPU ms/step; e2e"]
    header += [f"{part} ms" for part in parts]
    rows = []
    for result in results:
        split = result["cpu_ms_per_step_by_part"]
        api = result.get("api_cpu_ms_per_step")  # absent from results of before 2026-12-04
        rows.append(
            [
                result["db"],
                str(result["runs"]),
                _f(result.get("requests_per_step")),
                f"{result['ratio_median']:.3f} "
                f"({_verdict(result['ratio_median'], _ratio_limit(result['db']))})",
                f"{result['ratio_max']:.3f}",
                _f(result["server_cpu_ms_per_step"]),
                _f(api),
                _f(None if api is None else result["server_cpu_ms_per_step"] - api),
                _f(result.get("db_commits_per_step")),
                _f(result.get("db_rollbacks_per_step")),
                _alternating(result.get("alternating")),
                _profiled(result),
                _against_floor_blocks(result.get("against_floor")),
                *(_f(split.get(part)) for part in parts),
            ]
        )
    return "1. Overhead: 5 model steps at 200 ms, one run at a time", header, rows


def _profiled(result: dict[str, Any]) -> str:
    """The figures of the runs py-spy sampled, taken apart from the measured ones since
    2026-12-06 (absent before: the measured runs were the profiled ones)."""
    cpu = result.get("profiled_cpu_ms_per_step")
    if cpu is None:
        return "-"
    return f"{_f(cpu)}, {result['profiled_ratio_median']:.3f}"


def _against_floor_blocks(figures: dict[str, Any] | None) -> str:
    """Juru's figures and the floor's, in blocks that took turns (absent before 2026-12-06)."""
    if not figures:
        return "-"
    juru, floor = figures["juru"], figures["floor"]
    return (
        f"{_f(juru['cpu_ms_per_step'])} / {_f(floor['cpu_ms_per_step'])}; "
        f"{juru['ratio_median']:.3f} / {floor['ratio_median']:.3f}"
    )


def _alternating(figures: dict[str, dict[str, float]] | None) -> str:
    """CPU per step of runs driven with one and two requests per step, in alternate blocks
    (absent from results before 2026-12-04)."""
    if figures is None:
        return "-"
    one, two = figures["one_request"], figures["two_requests"]
    return f"{one['server_cpu_ms_per_step']:.1f} / {two['server_cpu_ms_per_step']:.1f}"


def _wait_percentiles(row: dict[str, Any]) -> str:
    """A throughput row's step waits, p50 / p99 in seconds (absent before 2026-12-04)."""
    if row.get("wait_p50_s") is None:
        return "-"
    return f"{row['wait_p50_s']:.2f} / {row['wait_p99_s']:.2f}"


def throughput_table(results: Sequence[dict[str, Any]]) -> tuple[str, Row, list[Row]]:
    header = ["db", "N", "steps/s", "ideal", "efficiency", "server CPU", "CPU ms/step"]
    header += ["fake model CPU", "client CPU", "runs ended", "errors", "stalled waits"]
    header += ["step wait p50 / p99 s", "PG sessions/s"]
    rows = []
    for result in results:
        for row in result["rows"]:
            rows.append(
                [
                    result["db"],
                    str(row["concurrency"]),
                    _f(row["steps_per_s"]),
                    _f(row["ideal_steps_per_s"], 0),
                    f"{100 * row['efficiency']:.0f}%",
                    f"{100 * row['server_cpu_util']:.0f}%",
                    _f(row["server_cpu_ms_per_step"]),
                    f"{100 * row['fake_model_cpu_util']:.0f}%",
                    f"{100 * row['client_cpu_util']:.0f}%",
                    str(row["runs_ended"]),
                    str(row["run_errors"]),
                    str(row["stalled_waits"]),
                    _wait_percentiles(row),
                    _f(row.get("pg_sessions_per_s")),
                ]
            )
    peaks = ", ".join(
        f"{result['db']} {result['saturation_steps_per_s']:.1f} steps/s" for result in results
    )
    title = f"2. Throughput: N concurrent runs at 200 ms per model call (peak: {peaks})"
    return title, header, rows


def waiting_table(results: Sequence[dict[str, Any]]) -> tuple[str, Row, list[Row]]:
    header = ["db", "parked runs", "parking s", "RSS before MiB", "RSS parked MiB", "added MiB"]
    header += [
        "KiB/run",
        "2nd half KiB/run",
        "10k projected MiB",
        "GET p50 ms",
        "p99 ms",
        "max ms",
        "GETs done/s",
        "active steps/s",
        "server CPU",
        "p50 / p99 ms, no active run",
        "CPU ms per GET",
    ]
    rows = []
    for result in results:
        added = result["rss_added_mib"]
        rows.append(
            [
                result["db"],
                str(result["parked_runs"]),
                _f(result["parking_s"]),
                _f(result["rss_before_mib"]),
                _f(result["rss_parked_mib"]),
                f"{added:.1f}",
                _f(result["kib_per_parked_run"], 2),
                _f(result["marginal_kib_per_parked_run"], 2),
                f"{projected_10k_mib(result):.1f} "
                f"({_verdict(projected_10k_mib(result), WAITING_10K_MIB)})",
                _f(result["get_p50_ms"]),
                f"{result['get_p99_ms']:.1f} ({_verdict(result['get_p99_ms'], GET_P99_MS)})",
                _f(result["get_max_ms"]),
                _f(result["reads_rate_achieved"], 0),
                _f(result["active_steps_per_s"]),
                f"{100 * result['server_cpu_util_under_load']:.0f}%",
                f"{_f(result.get('quiet_get_p50_ms'))} / {_f(result.get('quiet_get_p99_ms'))}",
                _f(result.get("quiet_cpu_ms_per_get"), 2),
            ]
        )
    return (
        f"3. Waiting runs: memory, and GET /v1/runs/:id at {_rate(results)} req/s "
        "with 100 active runs",
        (header),
        rows,
    )


def baseline_table(results: Sequence[dict[str, Any]]) -> tuple[str, Row, list[Row]]:
    header = ["checkpointer", "CPU ms/step (1 run)", "e2e / model time"]
    header += ["N", "steps/s", "ideal", "CPU", "CPU ms/step"]
    rows = []
    for result in results:
        for row in result["rows"]:
            first = [row["checkpointer"], _f(row["cpu_ms_per_step"]), f"{row['ratio']:.3f}"]
            if not row["concurrent"]:
                rows.append([*first, *[""] * 5])
            for index, level in enumerate(row["concurrent"]):
                rows.append(
                    [
                        *(first if index == 0 else [""] * 3),
                        str(level["concurrency"]),
                        _f(level["steps_per_s"]),
                        _f(level["ideal_steps_per_s"], 0),
                        f"{100 * level['cpu_util']:.0f}%",
                        _f(level["cpu_ms_per_step"]),
                    ]
                )
        rows.append(
            [
                "model client alone",
                f"ChatOpenAI {result['chatopenai_cpu_ms_per_call']:.2f} ms/call "
                f"(httpx; on aiohttp: "
                f"{result.get('chatopenai_aiohttp_cpu_ms_per_call', float('nan')):.2f}; "
                f"Juru's catalog model, posted without the SDK's request path: "
                f"{result.get('juru_catalog_cpu_ms_per_call', float('nan')):.2f}), "
                f"openai {result['openai_cpu_ms_per_call']:.2f} ms/call",
                *[""] * 6,
            ]
        )
        if "streamed_juru_cpu_ms_per_call" in result:  # absent before 2026-12-04
            rows.append(
                [
                    f"a streamed reply of {result['streamed_words']} chunks",
                    f"read by Juru {result['streamed_juru_cpu_ms_per_call']:.2f} ms/call, "
                    f"by LangChain's defaults "
                    f"{result['streamed_langchain_defaults_cpu_ms_per_call']:.2f}, "
                    f"not streamed {result['streamed_not_streamed_cpu_ms_per_call']:.2f}",
                    *[""] * 6,
                ]
            )
        floor = hosted_step_floor(result)
        if floor is not None:
            graph, http = floor
            wall = float(result["http_step_wall_ms"])
            tight = result.get("http_step_back_to_back") or {}
            rows.append(
                [
                    "a client-tool step's request, FastAPI with nothing behind it",
                    f"{http:.2f} ms of server CPU, {wall:.2f} ms from the client's send to its "
                    f"answer, after a model call's {1000 * _latency(result):.0f} ms wait as in "
                    f"a hosted step (back to back: {_f(tight.get('cpu_ms'), 2)} / "
                    f"{_f(tight.get('wall_ms'), 2)} ms; bench/http_floor.py)",
                    *[""] * 6,
                ]
            )
            rows.append(
                [
                    "floor of a hosted step's server CPU on this machine",
                    f"{graph + http:.1f} ms: the graph with the saver at pauses "
                    f"{graph:.1f} + the request {http:.2f}",
                    *[""] * 6,
                ]
            )
            floors = [
                f"{saver} {ratio:.3f} + {wall:.2f} ms a step = {total:.3f}"
                for saver, ratio, total in hosted_e2e_floors(result)
            ]
            rows.append(
                [
                    "floor of a hosted step's e2e ÷ model time on this machine",
                    "the graph with the saver at pauses, and the request: " + "; ".join(floors),
                    *[""] * 6,
                ]
            )
        for saver, cpu, e2e, kept in kept_floors(result):
            rows.append(
                [
                    f"floor of a hosted step that keeps its outputs, {saver}",
                    f"the request with its outputs committed and a hop to a second process and "
                    f"back: {kept['cpu_ms']:.2f} ms of server CPU, {kept['wall_ms']:.2f} ms; "
                    f"with the graph saving at pauses: {cpu:.1f} ms of CPU a step, e2e ÷ model "
                    f"time {e2e:.3f}",
                    *[""] * 6,
                ]
            )
    return "4. Baseline: the same graph in-process (LangGraph only, no server)", header, rows


def hosted_step_floor(result: dict[str, Any]) -> tuple[float, float] | None:
    """(CPU per step of the graph in-process with the saver at pauses, CPU of a step's
    request on an empty FastAPI app), where the baseline measured both."""
    http = result.get("http_step_cpu_ms")
    at_pauses = _saved_at_pauses(result)
    if http is None or not at_pauses:
        return None
    return float(at_pauses[0]["cpu_ms_per_step"]), float(http)


def hosted_e2e_floors(result: dict[str, Any]) -> list[tuple[str, float, float]]:
    """For each saver the baseline ran at pauses (SQLite, PostgreSQL): its name, the graph's
    e2e ÷ model time in-process, and that with a step's request on an empty FastAPI app added
    to every model step (`bench.http_floor`): what a hosted step cannot go below here."""
    wall = result.get("http_step_wall_ms")
    if wall is None:
        return []
    model_ms = 1000 * _latency(result)
    return [
        (
            str(row["checkpointer"]).split(",")[0],
            float(row["ratio"]),
            float(row["ratio"]) + float(wall) / model_ms,
        )
        for row in _saved_at_pauses(result)
    ]


def kept_floors(
    result: dict[str, Any],
) -> list[tuple[str, float, float, dict[str, float]]]:
    """For each saver the baseline ran at pauses with a request measured on the same database
    with its outputs kept (`http_step_kept`): its name, the floor of a hosted step's CPU and
    of its e2e ÷ model time when the step keeps the outputs it was sent and runs its graph
    in another process than the one serving HTTP, and that request's own figures."""
    kept = result.get("http_step_kept") or {}
    model_ms = 1000 * _latency(result)
    floors = []
    for row in _saved_at_pauses(result):
        saver = str(row["checkpointer"]).split(",")[0]
        request = kept.get(saver)
        if request is None:
            continue
        cpu = float(row["cpu_ms_per_step"]) + float(request["cpu_ms"])
        e2e = float(row["ratio"]) + float(request["wall_ms"]) / model_ms
        floors.append((saver, cpu, e2e, request))
    return floors


def _saved_at_pauses(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The baseline's rows of the graph saving only at pauses, as hosted runs save."""
    return [row for row in result["rows"] if row.get("durability") == "exit"]


def _latency(result: dict[str, Any]) -> float:
    return float(result.get("model_latency_s", BASELINE_LATENCY))


def _rate(results: Sequence[dict[str, Any]]) -> str:
    rates = {f"{result.get('read_rate', 200):g}" for result in results}
    return "/".join(sorted(rates))


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _peer_rows(name: str, db: str, measured: dict[str, Any]) -> list[Row]:
    one = measured["sequential"]
    rows = []
    for index, level in enumerate(measured["rows"]):
        first = index == 0
        rows.append(
            [
                name if first else "",
                db if first else "",
                _f(one["cpu_ms_per_step"]) if first else "",
                f"{one['ratio']:.3f}" if first else "",
                _f(one.get("pg_commits_per_step")) if first else "",
                str(level["concurrency"]),
                _f(level["steps_per_s"]),
                _f(level["ideal_steps_per_s"], 0),
                f"{100 * level['cpu_util']:.0f}%",
                _f(level["cpu_ms_per_step"]),
                _percent(level["client_cpu_util"]),
                str(level["runs_ended"]),
                str(level["errors"]),
            ]
        )
    return rows


# The playground saving its thread after every step (LangGraph's default, as the bare runtime
# and Aegra do), beside Juru's default of once per turn: the like-for-like figure.
EVERY_STEP = "Juru playground, saving every step"


def peers_table(results: Sequence[dict[str, Any]]) -> tuple[str, Row, list[Row]]:
    header = ["peer", "db / saver", "CPU ms/step (1 run)", "e2e / model time"]
    header += ["PG commits/step", "N", "steps/s", "ideal", "CPU", "CPU ms/step", "client CPU"]
    header += ["runs ended", "errors"]
    rows: list[Row] = []
    for result in results:
        if result["scenario"] == "bare":
            for saver in result["savers"]:
                rows += _peer_rows("bare runtime", f"{saver['checkpointer']} saver", saver)
        elif result["scenario"] == "playground":
            rows += _peer_rows("Juru playground", result["db"], result)
            if "every_step" in result:
                rows += _peer_rows(EVERY_STEP, result["db"], result["every_step"])
        elif result["scenario"] == "aegra":
            name = f"Aegra {result.get('version', '')}".strip()
            if "unavailable" in result:
                rows.append([name, result["db"], f"not measured: {result['unavailable']}"])
                rows[-1] += [""] * (len(header) - 3)
            else:
                rows += _peer_rows(name, result["db"], result)
    title = (
        "5. Peers: one ReAct graph with a server-side tool (bench/graphs.py), 5 model steps "
        "at 200 ms, in-process, as a Juru playground feature, and on Aegra"
    )
    return title, header, rows


def _one(results: Sequence[dict[str, Any]], scenario: str, db: str | None = None) -> Any:
    for result in results:
        if result["scenario"] == scenario and (db is None or result["db"] == db):
            return result
    return None


def _bare_sqlite(results: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    bare = _one(results, "bare")
    if bare is None:
        return None
    for saver in bare["savers"]:
        if saver["checkpointer"] == "sqlite":
            found: dict[str, Any] = saver
            return found
    return None


def _playground_over_bare(playground: dict[str, Any], bare: dict[str, Any] | None) -> float | None:
    """The median ratio of the alternating blocks (`peers.alternating`); from results
    without them, the two peers' own figures."""
    if "against_bare" in playground:
        return float(playground["against_bare"]["ratio_median"])
    if bare is None:
        return None
    return float(
        playground["sequential"]["cpu_ms_per_step"] / bare["sequential"]["cpu_ms_per_step"]
    )


def peer_ratios(results: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """Juru playground CPU/step ÷ bare runtime (SQLite saver) CPU/step, one run at a time, in
    alternating blocks; and Juru playground saturation steps/s ÷ Aegra's, for every database
    measured."""
    found = []
    bare = _bare_sqlite(results)
    aegra = _one(results, "aegra")
    if aegra is not None and "unavailable" in aegra:
        aegra = None
    for playground in (result for result in results if result["scenario"] == "playground"):
        db = playground["db"]
        ratio = _playground_over_bare(playground, bare)
        if ratio is not None:
            found.append(
                (
                    f"Juru playground CPU/step ÷ bare runtime (sqlite saver) CPU/step ({db})",
                    f"≤ {PLAYGROUND_OVER_BARE:.1f}x",
                    f"{ratio:.2f}x",
                    _verdict(ratio, PLAYGROUND_OVER_BARE),
                )
            )
        if aegra is not None:
            ratio = playground["saturation_steps_per_s"] / aegra["saturation_steps_per_s"]
            found.append(
                (
                    f"Juru playground ({db}) steps/s ÷ Aegra {aegra.get('version', '')} steps/s",
                    f"≥ {AT_LEAST_JURU_OVER_AEGRA:.0f}x",
                    f"{ratio:.2f}x",
                    _at_least(ratio, AT_LEAST_JURU_OVER_AEGRA),
                )
            )
    return found


def peer_summary(results: Sequence[dict[str, Any]]) -> tuple[str, Row, list[Row]]:
    header = ["peer", "CPU ms per model step (1 run)", "saturation steps/s", "at N", "CPU there"]
    rows: list[Row] = []

    def add(name: str, measured: dict[str, Any]) -> None:
        best = max(measured["rows"], key=lambda row: row["steps_per_s"])
        rows.append(
            [
                name,
                _f(measured["sequential"]["cpu_ms_per_step"]),
                _f(measured["saturation_steps_per_s"]),
                str(best["concurrency"]),
                f"{100 * best['cpu_util']:.0f}%",
            ]
        )

    bare = _bare_sqlite(results)
    if bare is not None:
        add("bare runtime (LangGraph, AsyncSqliteSaver)", bare)
    for playground in (result for result in results if result["scenario"] == "playground"):
        add(f"Juru playground ({playground['db']})", playground)
        if "every_step" in playground:
            add(f"{EVERY_STEP} ({playground['db']})", playground["every_step"])
    aegra = _one(results, "aegra")
    if aegra is not None and "unavailable" not in aegra:
        add(f"Aegra {aegra.get('version', '')} (postgresql)", aegra)
    for playground in (result for result in results if result["scenario"] == "playground"):
        if "against_bare" in playground:
            alternated = playground["against_bare"]
            name = (
                f"alternating blocks of {alternated['runs_per_block']} runs: Juru playground "
                f"({playground['db']}) / bare runtime (sqlite saver), CPU ms per step"
            )
            pairs = ", ".join(
                f"{block['juru']:.1f} / {block['bare']:.1f}" for block in alternated["blocks"]
            )
            rows.append([name, pairs, "", "", ""])
    for name, limit, value, verdict in peer_ratios(results):
        rows.append([name, f"{value} (target {limit}: {verdict})", "", "", ""])
    return "6. Peers in one sitting: the figures the ratios come from", header, rows


def streams_table(results: Sequence[dict[str, Any]]) -> tuple[str, Row, list[Row]]:
    header = [
        "db",
        "streamed runs",
        "server CPU ms/step",
        "same server, `?wait=` runs: CPU ms/step",
        "streamed minus `?wait=` ms/step",
        "e2e / model time",
        "DB commits/step",
        "concurrent streams",
        "steps/s there",
        "server CPU there",
        "event delay p50 / p99 / max ms",
        "client loop lag p99 / max ms",
        "runs ended (failed, lane errors)",
        "open idle streams",
        "RSS added MiB",
        "idle CPU",
    ]
    rows = []
    for result in results:
        one, many, idle = result["sequential"], result["concurrent"], result["idle"]
        rows.append(
            [
                result["db"],
                str(one["runs"]),
                _f(one["server_cpu_ms_per_step"]),
                _f(one.get("waited_cpu_ms_per_step")),
                _signed(_stream_extra(results, result)),
                f"{one['ratio_median']:.3f}",
                _f(one.get("db_commits_per_step")),
                str(many["streams"]),
                _f(many.get("steps_per_s")),
                _percent(many.get("server_cpu_util")),
                f"{_f(many['delay_p50_ms'])} / {_f(many['delay_p99_ms'])} / "
                f"{_f(many['delay_max_ms'])}",
                f"{_f(many.get('client_lag_p99_ms'))} / {_f(many.get('client_lag_max_ms'))}",
                f"{many['runs_ended']} ({many['runs_failed']}, {many.get('lane_errors', 0)})",
                str(idle["open_streams"]),
                _f(idle["added_mib"]),
                _percent(idle["idle_cpu_util"]),
            ]
        )
    title = "7. Streams: runs followed by their event stream (`stream: true`)"
    return title, header, rows


def _stream_extra(results: Sequence[dict[str, Any]], streams: dict[str, Any]) -> float | None:
    """What following a run with its stream adds to a step's server CPU, against `?wait=`: the
    two kinds of runs alternated on one server (scenario 7), or, in results of a bench that
    did not yet alternate them, against scenario 1 of the same sitting."""
    one = streams["sequential"]
    if "streamed_minus_waited_ms" in one:
        return float(one["streamed_minus_waited_ms"])
    waited = _one(results, "overhead", streams["db"])
    if waited is None:
        return None
    return float(one["server_cpu_ms_per_step"] - waited["server_cpu_ms_per_step"])


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}"


def stream_targets(results: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """The streaming issue's figures: delay, idle memory, and CPU per step with streams
    attached against `?wait=` (`_stream_extra`)."""
    found = []
    for result in results:
        if result["scenario"] != "streams":
            continue
        db = result["db"]
        p99 = result["concurrent"]["delay_p99_ms"]
        found.append(
            (
                f"event delay p99, {result['concurrent']['streams']} streams ({db})",
                f"≤ {STREAM_DELAY_P99_MS:g} ms",
                f"{p99:.1f} ms",
                _verdict(p99, STREAM_DELAY_P99_MS),
            )
        )
        added = result["idle"]["added_mib"]
        found.append(
            (
                f"RSS of {result['idle']['open_streams']} open streams ({db})",
                f"≤ {OPEN_STREAMS_MIB:g} MiB",
                f"{added:.1f} MiB",
                _verdict(added, OPEN_STREAMS_MIB),
            )
        )
        extra = _stream_extra(results, result)
        if extra is not None:
            found.append(
                (
                    f"CPU per step, streamed minus `?wait=` ({db})",
                    f"≤ {STREAM_EXTRA_CPU_MS:g} ms",
                    f"{extra:+.1f} ms",
                    _verdict(extra, STREAM_EXTRA_CPU_MS),
                )
            )
    return found


def census_table(results: Sequence[dict[str, Any]]) -> tuple[str, Row, list[Row]]:
    header = ["db", "runs", "statements/step", "commits/step", "by verb and table, per step"]
    rows = []
    for result in results:
        statements, commits = sql_census(result) or (0.0, 0.0)
        shapes = (result["sql_per_step"] or {}).items()  # most frequent first
        rows.append(
            [
                result["db"],
                str(result["runs"]),
                f"{statements:.1f}",
                f"{commits:.1f}",
                ", ".join(f"`{shape}` {count:.2f}" for shape, count in shapes if count >= 0.01),
            ]
        )
    title = "8. SQL census: statements on Juru's engine, besides BEGIN, PRAGMA and COMMIT"
    return title, header, rows


def instructions_table(results: Sequence[dict[str, Any]]) -> tuple[str, Row, list[Row]]:
    header = ["db", "runs", "model steps", "processes", "instructions/step", "API process"]
    rows = []
    for result in results:
        if "error" in result:
            rows.append([result["db"], str(result["runs"]), result["error"], "", "", ""])
            continue
        rows.append(
            [
                result["db"],
                str(result["runs"]),
                str(result["model_steps"]),
                str(result["processes"]),
                f"{result['instructions_per_step'] / 1e6:.2f} M",
                f"{result['api_instructions_per_step'] / 1e6:.2f} M",
            ]
        )
    title = (
        "9. Instructions per model step (valgrind's callgrind, every process of `juru serve`; "
        "the overhead scenario's runs, a figure that does not drift with the machine)"
    )
    return title, header, rows


def latency_table(results: Sequence[dict[str, Any]]) -> tuple[str, Row, list[Row]]:
    """One row per part of a step, one column per database."""
    header = ["part of a step (ms, median)", *(result["db"] for result in results)]
    parts = list(results[0]["parts_ms"])
    rows = [[part, *(f"{result['parts_ms'][part]:.2f}" for result in results)] for part in parts]
    rows.append(["sum of the parts", *(f"{sum(r['parts_ms'].values()):.2f}" for r in results)])
    rows.append(["a step besides its model call", *(f"{r['step_ms']:.2f}" for r in results)])
    rows.append(["steps", *(f"{r['steps']} of {r['steps'] + r['steps_missed']}" for r in results)])
    title = (
        "10. Where a step's latency goes: the overhead scenario's steps stamped in every process "
        f"(bench/latency_probe.py), the model answering after {results[0]['model_ms']:.0f} ms"
    )
    return title, header, rows


TABLES: dict[str, Callable[[Sequence[dict[str, Any]]], tuple[str, Row, list[Row]]]] = {
    "overhead": overhead_table,
    "throughput": throughput_table,
    "waiting": waiting_table,
    "baseline": baseline_table,
    "streams": streams_table,
    "census": census_table,
    "instructions": instructions_table,
    "latency": latency_table,
}
PEERS = ("bare", "playground", "aegra")


def tables(results: Sequence[dict[str, Any]]) -> list[tuple[str, Row, list[Row]]]:
    found = []
    for name, build in TABLES.items():
        mine = [result for result in results if result["scenario"] == name]
        if mine:
            found.append(build(mine))
    mine = [result for result in results if result["scenario"] in PEERS]
    if mine:
        found.append(peers_table(mine))
        found.append(peer_summary(mine))
    # In the order of their numbers ("5. Peers: ..."), whatever order the scenarios ran in.
    return sorted(found, key=lambda table: int(table[0].split(".", 1)[0]))


def print_tables(results: Sequence[dict[str, Any]], console: Console | None = None) -> None:
    console = console or Console()
    for title, header, rows in tables(results):
        table = Table(title=title, title_justify="left")
        for column in header:
            table.add_column(column)
        for row in rows:
            table.add_row(*row)
        console.print(table)


def markdown(results: Sequence[dict[str, Any]]) -> str:
    lines = []
    for title, header, rows in tables(results):
        lines += [f"### {title}", "", "| " + " | ".join(header) + " |"]
        lines.append("|" + "---|" * len(header))
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        lines.append("")
    return "\n".join(lines)


def cpu_flatness(result: dict[str, Any]) -> tuple[int, float] | None:
    """(N, CPU per step at N over CPU per step at N=10) of a throughput result, for the largest
    N up to 200 it measured (200 in a full run); None without both figures."""
    by_level = {row["concurrency"]: row["server_cpu_ms_per_step"] for row in result["rows"]}
    high = max((level for level in by_level if 10 < level <= 200), default=None)
    if high is None or not by_level.get(10) or not by_level.get(high):
        return None
    return high, by_level[high] / by_level[10]


# What the census counts that is no statement of a write's or a read's own: a transaction's
# start and end (SQLite's `BEGIN IMMEDIATE`; psycopg begins implicitly) and SQLite's
# `PRAGMA synchronous` switches around an unsynced COMMIT.
NOT_STATEMENTS = ("(commit)", "BEGIN", "PRAGMA")


def sql_census(result: dict[str, Any]) -> tuple[float, float] | None:
    """(statements, commits) per model step from the SQL census (besides `BEGIN`, `PRAGMA`
    and `COMMIT`), None when it was off."""
    sql = result.get("sql_per_step")
    if not sql:
        return None
    statements = sum(count for shape, count in sql.items() if shape not in NOT_STATEMENTS)
    return statements, sql.get("(commit)", 0.0)


def _census_targets(db: str, result: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    census = sql_census(result)
    if census is None:
        return []
    statements, commits = census
    return [
        (
            f"SQL statements per model step ({db}, census)",
            f"≤ {SQL_STATEMENTS_PER_STEP:g}",
            f"{statements:.1f}",
            _verdict(statements, SQL_STATEMENTS_PER_STEP),
        ),
        (
            f"SQL commits per model step ({db}, census)",
            f"≤ {SQL_COMMITS_PER_STEP:g}",
            f"{commits:.1f}",
            _verdict(commits, SQL_COMMITS_PER_STEP),
        ),
    ]


def targets(results: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """(target, limit, measured, met/missed) for every figure the issue sets a target for."""
    found = []
    baseline = _one(results, "baseline")
    for result in results:
        db = result["db"]
        if result["scenario"] in ("overhead", "census"):
            found.extend(_census_targets(db, result))
        if result["scenario"] == "overhead":
            cpu = result["server_cpu_ms_per_step"]
            limit = CPU_MS_PER_STEP.get(db, CPU_MS_PER_STEP["sqlite"])
            cpu_floor, e2e_floor = overhead_floors(result, baseline)
            found.append(
                (
                    f"server CPU per model step ({db})",
                    f"≤ {limit:g} ms",
                    f"{cpu:.1f} ms",
                    _against_floor(cpu, limit, cpu_floor, 1),
                )
            )
            ratio, limit = result["ratio_median"], _ratio_limit(db)
            found.append(
                (
                    f"e2e ÷ model time ({db})",
                    f"≤ {limit:g}",
                    f"{ratio:.3f}",
                    _against_floor(ratio, limit, e2e_floor, 3),
                )
            )
            transactions = result.get("db_commits_per_step")
            if transactions is not None:
                found.append(
                    (
                        "PostgreSQL transactions per model step (xact_commit)",
                        f"≤ {PG_TRANSACTIONS_PER_STEP:g}",
                        f"{transactions:.1f}",
                        _verdict(transactions, PG_TRANSACTIONS_PER_STEP),
                    )
                )
        if result["scenario"] == "throughput":
            peak = result["saturation_steps_per_s"]
            found.append(
                (
                    f"saturation ({db})",
                    f"≥ {AT_LEAST_SATURATION:g} steps/s",
                    f"{peak:.1f} steps/s",
                    _at_least(peak, AT_LEAST_SATURATION),
                )
            )
            flat = cpu_flatness(result)
            if flat is not None:
                level, ratio = flat
                found.append(
                    (
                        f"CPU per step, N={level} ÷ N=10 ({db})",
                        f"≤ {CPU_FLAT:.2f}",
                        f"{ratio:.2f}",
                        _verdict(ratio, CPU_FLAT),
                    )
                )
        if result["scenario"] == "waiting":
            parked = result["parked_runs"]
            added = projected_10k_mib(result)
            scaled = "" if parked == 10_000 else f" (projected from {parked})"
            found.append(
                (
                    f"RSS added by 10,000 waiting runs ({db})",
                    f"≤ {WAITING_10K_MIB:g} MiB",
                    f"{added:.1f} MiB{scaled}",
                    _verdict(added, WAITING_10K_MIB),
                )
            )
            p99 = result["get_p99_ms"]
            found.append(
                (
                    f"GET /v1/runs/:id p99 at {result.get('read_rate', 200):g} req/s, "
                    f"100 active runs ({db})",
                    f"≤ {GET_P99_MS:g} ms",
                    f"{p99:.1f} ms",
                    _verdict(p99, GET_P99_MS),
                )
            )
    found.extend(peer_ratios(results))
    found.extend(stream_targets(results))
    return found
