"""The bench client's own pauses: a measured window starts with the client's heap out of its
collector's passes, and the client's loop lag is measured beside what the window times."""

from __future__ import annotations

import asyncio
import gc
import math
import time

from bench.client_loop import LAG_PROBE_SECONDS, LoopLag, loop_lag, settle_heap


async def test_a_blocked_client_loop_shows_as_lag() -> None:
    async with loop_lag() as lag:
        while not lag.lags_ms:  # the probe has asked to be woken at least once
            await asyncio.sleep(LAG_PROBE_SECONDS)
        time.sleep(0.05)  # the client's loop blocked, as by a long collection
        seen = len(lag.lags_ms)
        while len(lag.lags_ms) == seen:
            await asyncio.sleep(LAG_PROBE_SECONDS)
    assert lag.max_ms() >= 40
    assert lag.p99_ms() <= lag.max_ms()


async def test_the_probe_counts_only_the_lag_past_its_own_wait() -> None:
    async with loop_lag() as lag:
        while len(lag.lags_ms) < 20:
            await asyncio.sleep(LAG_PROBE_SECONDS)
    # An unblocked loop wakes the probe about on time at least once in 20 asks.
    assert min(lag.lags_ms) < 1000 * LAG_PROBE_SECONDS / 2


def test_settling_the_heap_takes_what_is_left_out_of_collections() -> None:
    kept = [[index] for index in range(1000)]  # tracked objects that live on
    gc.unfreeze()
    try:
        settle_heap()
        assert gc.get_freeze_count() >= len(kept)
    finally:
        gc.unfreeze()


def test_no_lag_measured_is_not_a_number() -> None:
    assert math.isnan(LoopLag().max_ms()) and math.isnan(LoopLag().p99_ms())
