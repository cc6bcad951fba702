"""Tables of the results (Rich on the terminal, Markdown in RESULTS.md) and the targets."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

Row = list[str]
TARGETS = {
    "overhead_ratio": 1.05,
    "server_cpu_ms_per_step_sqlite": 5.0,
    "waiting_added_mib": 50.0,
    "get_p99_ms": 20.0,
}


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


def overhead_table(results: Sequence[dict[str, Any]]) -> tuple[str, Row, list[Row]]:
    parts = list(results[0]["cpu_ms_per_step_by_part"]) if results else []
    header = ["db", "runs", "e2e / model time (median)", "max", "server CPU ms/step"]
    header += ["DB commits/step"]
    header += [f"{part} ms" for part in parts]
    rows = []
    for result in results:
        split = result["cpu_ms_per_step_by_part"]
        rows.append(
            [
                result["db"],
                str(result["runs"]),
                f"{result['ratio_median']:.3f} ({_verdict(result['ratio_median'], 1.05)})",
                f"{result['ratio_max']:.3f}",
                _f(result["server_cpu_ms_per_step"]),
                _f(result.get("db_commits_per_step")),
                *(_f(split.get(part)) for part in parts),
            ]
        )
    return "1. Overhead: 5 model steps at 200 ms, one run at a time", header, rows


def throughput_table(results: Sequence[dict[str, Any]]) -> tuple[str, Row, list[Row]]:
    header = ["db", "N", "steps/s", "ideal", "efficiency", "server CPU", "CPU ms/step"]
    header += ["fake model CPU", "client CPU", "runs ended", "errors", "stalled waits"]
    header += ["PG sessions/s"]
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
                f"{projected_10k_mib(result):.1f} ({_verdict(projected_10k_mib(result), 50)})",
                _f(result["get_p50_ms"]),
                f"{result['get_p99_ms']:.1f} ({_verdict(result['get_p99_ms'], 20)})",
                _f(result["get_max_ms"]),
                _f(result["reads_rate_achieved"], 0),
                _f(result["active_steps_per_s"]),
                f"{100 * result['server_cpu_util_under_load']:.0f}%",
                f"{_f(result.get('quiet_get_p50_ms'))} / {_f(result.get('quiet_get_p99_ms'))}",
                _f(result.get("quiet_cpu_ms_per_get"), 2),
            ]
        )
    return (
        "3. Waiting runs: memory, and GET /v1/runs/:id at 200 req/s with 100 active runs",
        (header),
        rows,
    )


def baseline_table(results: Sequence[dict[str, Any]]) -> tuple[str, Row, list[Row]]:
    header = ["checkpointer", "CPU ms/step (1 run)", "e2e / model time"]
    header += ["N", "steps/s", "ideal", "CPU", "CPU ms/step"]
    rows = []
    for result in results:
        for row in result["rows"]:
            for index, level in enumerate(row["concurrent"]):
                first = index == 0
                rows.append(
                    [
                        row["checkpointer"] if first else "",
                        _f(row["cpu_ms_per_step"]) if first else "",
                        f"{row['ratio']:.3f}" if first else "",
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
                f"ChatOpenAI {result['chatopenai_cpu_ms_per_call']:.2f} ms/call, "
                f"openai {result['openai_cpu_ms_per_call']:.2f} ms/call",
                *[""] * 6,
            ]
        )
    return "4. Baseline: the same graph in-process (LangGraph only, no server)", header, rows


TABLES: dict[str, Callable[[Sequence[dict[str, Any]]], tuple[str, Row, list[Row]]]] = {
    "overhead": overhead_table,
    "throughput": throughput_table,
    "waiting": waiting_table,
    "baseline": baseline_table,
}


def tables(results: Sequence[dict[str, Any]]) -> list[tuple[str, Row, list[Row]]]:
    found = []
    for name, build in TABLES.items():
        mine = [result for result in results if result["scenario"] == name]
        if mine:
            found.append(build(mine))
    return found


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


def targets(results: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """(target, limit, measured, met/missed) for every figure the issue sets a target for."""
    found = []
    for result in results:
        db = result["db"]
        if result["scenario"] == "overhead":
            ratio = result["ratio_median"]
            found.append(
                (f"overhead ratio ({db})", "≤ 1.05", f"{ratio:.3f}", _verdict(ratio, 1.05))
            )
            cpu = result["server_cpu_ms_per_step"]
            if db == "sqlite":
                found.append(
                    (
                        "server CPU per model step (sqlite)",
                        "≤ 5 ms",
                        f"{cpu:.1f} ms",
                        _verdict(cpu, 5),
                    )
                )
        if result["scenario"] == "waiting":
            parked = result["parked_runs"]
            added = projected_10k_mib(result)
            scaled = "" if parked == 10_000 else f" (projected from {parked})"
            found.append(
                (
                    f"RSS added by 10,000 waiting runs ({db})",
                    "≤ 50 MB",
                    f"{added:.1f} MiB{scaled}",
                    _verdict(added, 50),
                )
            )
            p99 = result["get_p99_ms"]
            found.append(
                (
                    f"GET /v1/runs/:id p99 under load ({db})",
                    "≤ 20 ms",
                    f"{p99:.1f} ms",
                    _verdict(p99, 20),
                )
            )
    return found
