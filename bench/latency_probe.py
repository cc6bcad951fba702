"""Run a program with the step path's points stamped: the latency scenario's server runs under it.

    python bench/latency_probe.py STAMPS -- python -m juru serve --port 8000

Each stamp is one line appended to STAMPS, `<monotonic seconds> <pid> <thread> <point><mark>`, where
`>` marks a function's entry and `<` its return. Linux's monotonic clock is the machine's, so
the stamps of the server's processes (workers are forks: they inherit the probe), of the fake
model and of the bench's client line up. A line is one `write` to a file opened for appending,
a few microseconds, so a step's fifty-odd stamps cost far less than its latency.

The probe wraps the functions named in `POINTS` as their modules are imported, and listens to
SQLAlchemy's cursor executions (the driver's time, `db_*`). A name that no longer resolves
stops the server at once, and the scenario refuses stamps that miss a point of the path: the
probe must follow the code it measures (tests/e2e/test_bench_smoke.py).

This file imports nothing of the bench: it runs as a script, the server's first code.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import os
import runpy
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

# point name: (module, attribute path of the function whose entry and return are stamped)
POINTS: dict[str, tuple[str, str]] = {
    "edge": ("juru.http.edges", "EdgeMiddleware.__call__"),
    "service": ("juru.hosted.service", "HostedService.submit_tool_outputs"),
    "wait": ("juru.hosted.service", "HostedService._wait"),
    # A write's transaction, in the store's thread.
    "txn_sqlite": ("juru.store.write_queue", "SqliteWriter._transaction"),
    "txn_postgresql": ("juru.store.database", "ThreadedWriter._transaction"),
    # A worker takes up the runs handed to it: as their notices carried them, or read.
    "handed": ("juru.engine.worker", "Worker._take_up"),
    "claim": ("juru.engine.machine", "RunMachine.claim"),
    "record_step": ("juru.engine.machine", "RunMachine.record_step"),
    "thread_state": ("juru.runner", "thread_state"),
    "model": ("juru.models.openai_body", "PlainBodyCompletions.create"),
    # The driver's commit, and the sync of a pipeline (PostgreSQL's statements sent together).
    "db_commit": ("sqlalchemy.engine.default", "DefaultDialect.do_commit"),
    "db_pipeline": ("psycopg", "Pipeline.__exit__"),
}


class Stamps:
    """Lines appended to one file, from any process and thread."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def __call__(self, point: str) -> None:
        line = f"{time.monotonic():.6f} {os.getpid()} {threading.get_native_id()} {point}\n"
        os.write(self.fd, line.encode())


def stamped(function: Callable[..., Any], point: str, stamp: Stamps) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def awaited(*args: Any, **kwargs: Any) -> Any:
            stamp(point + ">")
            try:
                return await function(*args, **kwargs)
            finally:
                stamp(point + "<")

        return awaited

    @functools.wraps(function)
    def called(*args: Any, **kwargs: Any) -> Any:
        stamp(point + ">")
        try:
            return function(*args, **kwargs)
        finally:
            stamp(point + "<")

    return called


def wrap_points(module: ModuleType, stamp: Stamps) -> None:
    """Wrap the points of `module` (the attribute replaced where it is defined: every caller
        that looks it up there, or calls it as a method, meets the wrapper). A point that no longer
    resolves raises AttributeError: the server then fails to start."""
    for point, (module_name, path) in POINTS.items():
        if module_name != module.__name__:
            continue
        *owners, name = path.split(".")
        owner: Any = module
        for part in owners:
            owner = getattr(owner, part)
        setattr(owner, name, stamped(getattr(owner, name), point, stamp))


class _Wrapping(importlib.abc.MetaPathFinder):
    """Finds the modules of `POINTS` as the path finder would, and wraps their points once
    each module has run."""

    def __init__(self, stamp: Stamps) -> None:
        self.stamp = stamp
        self.modules = {module for module, _ in POINTS.values()}

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name not in self.modules:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run_module(module)
            wrap_points(module, self.stamp)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install(stamp: Stamps) -> None:
    """Wrap every point as its module is imported, and stamp the driver's executions."""
    sys.meta_path.insert(0, _Wrapping(stamp))
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    event.listen(Engine, "before_cursor_execute", lambda *_: stamp("db_execute>"))
    event.listen(Engine, "after_cursor_execute", lambda *_: stamp("db_execute<"))


def main(argv: Sequence[str]) -> None:
    stamps_path, separator, *command = argv
    if separator != "--" or command[1:2] != ["-m"]:
        raise SystemExit("usage: latency_probe.py STAMPS -- python -m MODULE [ARGUMENTS]")
    # The script's own folder (the bench's) must not shadow the standard library.
    sys.path.pop(0)
    install(Stamps(stamps_path))
    module = command[2]
    sys.argv = [module, *command[3:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
