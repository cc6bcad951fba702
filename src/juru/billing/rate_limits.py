"""Per-account rate limits on `/v1`: a moving window per account, counted by the `limits`
library in memory (one process) or in Redis (every replica shares the account's budget)."""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from limits import RateLimitItem, parse
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string

if TYPE_CHECKING:
    import coredis

KEY_PREFIX = "juru-rate"
EXPIRY_INTERVAL_SECONDS = 1.0


@dataclass(frozen=True)
class RateLimitDecision:
    """Whether a request may go on, and the `X-RateLimit-*` figures to tell the caller."""

    allowed: bool
    limit: int
    remaining: int
    reset_seconds: int

    def headers(self) -> dict[str, str]:
        headers = {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(self.reset_seconds),
        }
        if not self.allowed:
            headers["Retry-After"] = str(max(1, self.reset_seconds))
        return headers


class MemoryWindows(MemoryStorage):
    """`limits`' in-memory storage, trimming expired entries at most once a second, in place.

    The library starts a pass over every key after each hit, and its pass holds the key's lock
    across a hop to a thread and copies the key's entries: every request of an account waited
    behind it. A window is counted from each entry's own time, so trimming later changes no
    decision; it only frees memory up to a second later."""

    def __init__(self) -> None:
        super().__init__()
        self.next_trim = 0.0

    async def _MemoryStorage__schedule_expiry(self) -> None:  # the library's hook
        now = time.monotonic()
        if now >= self.next_trim:
            self.next_trim = now + EXPIRY_INTERVAL_SECONDS
            self.trim()

    def trim(self) -> None:
        """Drop the entries and counters that expired (newest entries come first)."""
        now = time.time()
        for key, entries in list(self.events.items()):
            del entries[bisect.bisect_left(entries, -now, key=lambda entry: -entry.expiry) :]
            if not entries:
                del self.events[key]
        for key, expires in list(self.expirations.items()):
            if expires <= now:
                self.storage.pop(key, None)
                del self.expirations[key]


def async_storage_uri(uri: str) -> str:
    """`memory://` and `redis://...` as the asyncio storages of `limits`."""
    return uri if uri.startswith("async+") else f"async+{uri}"


class RateLimiter:
    """One moving window per account, sized by the account's tier."""

    def __init__(self, storage_uri: str, tier_limits: Mapping[str, str]) -> None:
        uri = async_storage_uri(storage_uri)
        options: dict[str, Any] = {}
        self.pool: coredis.ConnectionPool | None = None
        if not uri.startswith("async+memory"):
            import coredis  # only for Redis (its import costs a server 0.2 s of start-up)

            # Our own pool, so that shutdown can close its connections.
            self.pool = coredis.ConnectionPool.from_url(uri.removeprefix("async+"))
            options = {"key_prefix": KEY_PREFIX, "connection_pool": self.pool}
        memory = uri.startswith("async+memory")
        self.storage = MemoryWindows() if memory else storage_from_string(uri, **options)
        self.strategy = MovingWindowRateLimiter(self.storage)
        self.limits: dict[str, RateLimitItem] = {
            tier: parse(limit) for tier, limit in tier_limits.items()
        }

    def close(self) -> None:
        if self.pool is not None:
            self.pool.disconnect()

    def limit_of(self, tier: str) -> RateLimitItem:
        # An account whose tier is no longer configured gets the strictest configured limit.
        return self.limits.get(tier) or min(
            self.limits.values(), key=lambda item: item.amount / item.get_expiry()
        )

    async def hit(self, account_id: str, tier: str) -> RateLimitDecision:
        """Count one request of the account; refused once its window is full."""
        item = self.limit_of(tier)
        allowed = await self.strategy.hit(item, account_id)
        stats = await self.strategy.get_window_stats(item, account_id)
        return RateLimitDecision(
            allowed=allowed,
            limit=item.amount,
            remaining=max(0, stats.remaining),
            reset_seconds=max(0, math.ceil(stats.reset_time - time.time())),
        )
