"""The bench client's own pauses, kept out of what it measures and measured beside it.

A figure the client times itself (an event's delay on a stream, say) includes any time the
client's event loop was not running: a full collection of the client's garbage collector over
everything the sitting has left in its heap took 137 ms once in a streams window (bench/RESULTS.md,
forty-second round), and showed as the server's delay. So a measured window starts with
`settle_heap`, and `LoopLag` says how late the client's loop woke meanwhile, for the reader to
see that the client kept up.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from bench.stats import percentile

# How often the lag probe asks to be woken.
LAG_PROBE_SECONDS = 0.005


def settle_heap() -> None:
    """Collect the client's garbage and take what is left out of later collections
    (`gc.freeze`): a full collection in the window ahead looks only at what the window makes."""
    gc.collect()
    gc.freeze()


@dataclass
class LoopLag:
    """How late the client's event loop woke a probe asking every `LAG_PROBE_SECONDS`."""

    lags_ms: list[float] = field(default_factory=list)

    def p99_ms(self) -> float:
        return percentile(self.lags_ms, 0.99)

    def max_ms(self) -> float:
        return max(self.lags_ms, default=float("nan"))


@contextlib.asynccontextmanager
async def loop_lag() -> AsyncIterator[LoopLag]:
    """Probe the running loop's lag for as long as the block runs."""
    lag = LoopLag()

    async def probe() -> None:
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(LAG_PROBE_SECONDS)
            lag.lags_ms.append(1000 * (time.perf_counter() - asked - LAG_PROBE_SECONDS))

    task = asyncio.create_task(probe())
    try:
        yield lag
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
