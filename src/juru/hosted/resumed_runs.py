"""`ResumedRuns`: the runs this process just resumed with tool outputs, each with a watch that
was open across the resume, so that the `?wait=` that follows needs no read of its run.

A client posts a paused run's tool outputs and asks at once for the run with `?wait=`. The
wait needs the run's status and every change to it from the moment it looks: the resume's
write returned the first, and a watch opened before that write and kept since gives the
second. The write's own notice is the watch's first change; when it is the only one by the
time the write returned, nothing else happened to the run in between, and any later change
of status wakes the watch (`RunChanged.changes`). Otherwise the run is read, as it is when
the wait comes to another process. Bounded: the oldest are forgotten (and their watches
closed) first.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from dataclasses import dataclass

from juru.engine.events import RunChanged
from juru.store.records import RunRecord

RESUMED_RUNS_REMEMBERED = 512


@dataclass
class Resumed:
    """A run as its resume left it (`running`), and the watch opened before that write."""

    run: RunRecord
    changed: RunChanged
    watching: contextlib.AsyncExitStack

    async def close(self) -> None:
        await self.watching.aclose()


class ResumedRuns:
    """The last `limit` runs resumed here, by id; each is given out once."""

    def __init__(self, limit: int = RESUMED_RUNS_REMEMBERED) -> None:
        self.limit = limit
        self._runs: OrderedDict[str, Resumed] = OrderedDict()

    async def keep(self, resumed: Resumed) -> None:
        """Remember `resumed` if its watch saw only the resume's own change, else close it."""
        if resumed.changed.changes != 1:
            await resumed.close()
            return
        resumed.changed.clear()
        resumed.changed.take_state()
        earlier = self._runs.pop(resumed.run.id, None)
        if earlier is not None:
            await earlier.close()
        self._runs[resumed.run.id] = resumed
        while len(self._runs) > self.limit:
            _, oldest = self._runs.popitem(last=False)
            await oldest.close()

    def take(self, run_id: str, account_id: str) -> Resumed | None:
        """The run as resumed here, with its watch, if it belongs to `account_id` (then
        forgotten: the caller closes the watch)."""
        resumed = self._runs.get(run_id)
        if resumed is None or resumed.run.account_id != account_id:
            return None
        del self._runs[run_id]
        return resumed

    def __len__(self) -> int:
        return len(self._runs)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._runs
