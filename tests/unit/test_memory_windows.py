"""The in-memory rate-limit windows: the same decisions as `limits`, expired entries trimmed in
place at most once a second instead of after every hit."""

from __future__ import annotations

from juru.billing.rate_limits import MemoryWindows, RateLimiter


async def test_a_full_window_refuses_and_reports_nothing_remaining() -> None:
    limiter = RateLimiter("memory://", {"free": "3/minute"})
    decisions = [await limiter.hit("acc_1", "free") for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert [d.remaining for d in decisions] == [2, 1, 0, 0]
    assert (await limiter.hit("acc_2", "free")).allowed  # another account's window


async def test_expired_entries_are_trimmed_and_live_ones_kept() -> None:
    windows = MemoryWindows()
    await windows.acquire_entry("live", 5, 60)
    windows.next_trim = float("inf")  # no trim while the entries are made
    for _ in range(3):
        await windows.acquire_entry("old", 5, 0)  # expires at once
    await windows.acquire_entry("live", 5, 60)
    windows.trim()
    assert "old" not in windows.events
    assert len(windows.events["live"]) == 2


async def test_hits_within_a_second_trim_once() -> None:
    windows = MemoryWindows()
    await windows.acquire_entry("old", 5, 0)  # the first hit trims (nothing expired yet)
    await windows.acquire_entry("old", 5, 0)
    assert len(windows.events["old"]) == 2  # the second did not trim: both are kept
    windows.next_trim = 0.0  # a second later
    await windows.acquire_entry("live", 5, 60)
    assert "old" not in windows.events
