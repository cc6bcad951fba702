"""`PausedRuns`: the paused runs this process just showed, so that the tool outputs that follow
need no read of their run.

A client reads a run in `requires_action` (`GET /v1/runs/:id`, usually with `?wait=`) and posts
its tool outputs at once. The post needs the run as it is while paused: its account, its
pending calls, the next call's prompt size (for the hold) and its pause number. All of these
are fixed for the whole pause, and the write that resumes the run is guarded by the status and
the pause number, so a record remembered from the read is as good as a fresh one whenever that
write succeeds; when it does not (the run moved on, in this process or another), the caller
reads the run again. Bounded: the oldest are forgotten first, and a run is kept without its
input and output (which may be large, and which the post does not use).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

from juru.core.states import RunStatus
from juru.store.records import RunRecord

PAUSED_RUNS_REMEMBERED = 512


class PausedRuns:
    """The last `limit` runs seen in `requires_action`, by id; each is given out once."""

    def __init__(self, limit: int = PAUSED_RUNS_REMEMBERED) -> None:
        self.limit = limit
        self._runs: OrderedDict[str, RunRecord] = OrderedDict()

    def saw(self, run: RunRecord) -> None:
        """Remember `run` if it is paused for tool outputs, forget it otherwise."""
        if run.status != RunStatus.REQUIRES_ACTION:
            self._runs.pop(run.id, None)
            return
        self._runs[run.id] = replace(run, input=[], output=None, tool_outputs=None)
        self._runs.move_to_end(run.id)
        while len(self._runs) > self.limit:
            self._runs.popitem(last=False)

    def take(self, run_id: str, account_id: str) -> RunRecord | None:
        """The run as last seen paused, if it was and belongs to `account_id` (then forgotten)."""
        run = self._runs.pop(run_id, None)
        if run is None or run.account_id != account_id:
            return None
        return run

    def __len__(self) -> int:
        return len(self._runs)
