"""The store's database threads: calls handed over and back, as an executor would, without one."""

from __future__ import annotations

import asyncio
import threading

import pytest

from juru.store.threads import DatabaseThreads


async def test_a_call_runs_in_a_named_thread_and_gives_back_its_result_or_its_error() -> None:
    threads = DatabaseThreads(2, "juru-test")
    try:
        total, name = await threads.call(
            lambda a, b: (a + b, threading.current_thread().name), 2, 3
        )
        assert total == 5 and name.startswith("juru-test_")

        def fails() -> None:
            raise LookupError("no such row")

        with pytest.raises(LookupError, match="no such row"):
            await threads.call(fails)
        names = {await threads.call(lambda: threading.current_thread().name) for _ in range(20)}
        assert names <= {"juru-test_0", "juru-test_1"}
    finally:
        threads.shutdown()


async def test_no_thread_runs_before_the_first_call() -> None:
    # A process may fork before it uses its database: the child must not miss a thread.
    before = {thread.name for thread in threading.enumerate()}
    threads = DatabaseThreads(3, "juru-lazy")
    assert {thread.name for thread in threading.enumerate()} == before
    try:
        await threads.call(lambda: None)
        started = {t.name for t in threading.enumerate() if t.name.startswith("juru-lazy")}
        assert started == {"juru-lazy_0", "juru-lazy_1", "juru-lazy_2"}
    finally:
        threads.shutdown()
    assert not any(thread.name.startswith("juru-lazy") for thread in threading.enumerate())


async def test_a_call_cancelled_before_it_began_is_never_made() -> None:
    threads = DatabaseThreads(1, "juru-cancel")
    busy, release = threading.Event(), threading.Event()
    made: list[str] = []

    def hold_the_thread() -> None:
        busy.set()
        release.wait(timeout=30)
        made.append("first")

    try:
        first = asyncio.ensure_future(threads.call(hold_the_thread))
        second = asyncio.ensure_future(threads.call(made.append, "second"))
        third = asyncio.ensure_future(threads.call(made.append, "third"))
        while not busy.is_set():
            await asyncio.sleep(0)  # turns of the loop until the thread holds the first call
        second.cancel()
        release.set()
        await first
        await third
        assert made == ["first", "third"]
        assert second.cancelled()
    finally:
        threads.shutdown()


async def test_shutdown_lets_the_threads_make_every_call_given() -> None:
    threads = DatabaseThreads(1, "juru-drain")
    release = threading.Event()
    made: list[int] = []
    try:
        calls = [
            asyncio.ensure_future(threads.call(release.wait, 30)),
            *(asyncio.ensure_future(threads.call(made.append, index)) for index in range(5)),
        ]
        await asyncio.sleep(0)  # the calls are queued
    finally:
        release.set()
        await asyncio.to_thread(threads.shutdown)
    assert made == [0, 1, 2, 3, 4]
    await asyncio.gather(*calls)
    # Nothing is taken after it, as an executor refuses new work once shut down.
    with pytest.raises(RuntimeError, match="shut down"):
        await asyncio.wait_for(threads.call(made.append, 5), 10)
    assert made == [0, 1, 2, 3, 4]
