"""The threads the store's database work runs in, and the hand-over of a call to them.

Every read and write of a process runs whole in one of a few threads (`store.database`,
`store.write_queue`). `loop.run_in_executor` hands a call over through `concurrent.futures`: a
future, a work item, a lock and a condition, and a second future chained to the first. A
model step makes several of these calls, each way on its path; here a call travels through
one `queue.SimpleQueue` and comes back through one `call_soon_threadsafe` (87 against 17
microseconds a call on the bench's machine, bench/RESULTS.md, twenty-fifth round).

As with an executor: a call whose caller was cancelled before a thread took it up is never
made, one already taken up runs to its end, and `shutdown` lets the threads finish every call
they were given. The threads start at the first call, so a process that forks before using
its database has no thread to lose in the child.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
_Call = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...]]
_STOP = None


class DatabaseThreads:
    """`count` threads named `<name>_<i>` that make the calls given to them, in order, each
    call in whichever thread is free."""

    def __init__(self, count: int, name: str) -> None:
        self.count = count
        self.name = name
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._shut = False

    async def call(self, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` in one of the threads; its result or its exception. RuntimeError
        once the threads were shut down, as an executor's."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        # Under the lock, a call is either queued ahead of shutdown's stops or refused: never
        # queued behind them, where no thread would take it.
        with self._lock:
            if self._shut:
                raise RuntimeError(f"the {self.name} threads were shut down")
            if not self._threads:
                self._start()
            self._calls.put((loop, future, function, args))
        return await future

    def shutdown(self) -> None:
        """Let the threads make every call given so far, then stop them (blocks until then)."""
        with self._lock:
            threads, self._threads, self._shut = self._threads, [], True
            for _ in threads:
                self._calls.put(_STOP)
        for thread in threads:
            thread.join()

    def _start(self) -> None:
        """Start the threads (the caller holds the lock)."""
        self._threads = [
            threading.Thread(target=self._serve, name=f"{self.name}_{index}", daemon=True)
            for index in range(self.count)
        ]
        for thread in self._threads:
            thread.start()

    def _serve(self) -> None:
        while (given := self._calls.get()) is not _STOP:
            loop, future, function, args = given
            if future.cancelled():
                continue  # its caller gave up before the call began
            try:
                result = function(*args)
            except BaseException as error:
                _hand_back(loop, future, None, error)
            else:
                _hand_back(loop, future, result, None)


def _hand_back(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: Any,
    error: BaseException | None,
) -> None:
    # A loop that has closed meanwhile has nobody waiting for the call any more.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(_settle, future, result, error)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
