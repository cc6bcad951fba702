"""Contract tests of the swappable backends: every implementation of file storage and of
rate-limit storage behaves the same (run events have theirs in test_run_events.py; the database
dialects run the whole suite, parametrized by `database_url`)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from juru.billing.rate_limits import RateLimiter
from juru.files.storage import FileStorage, LocalFileStorage, MemoryFileStorage

REDIS_URL = "redis://127.0.0.1:6379"

# --- file storage ----------------------------------------------------------------------------

STORAGES: dict[str, Callable[[Path], FileStorage]] = {
    "local": lambda root: LocalFileStorage(root),
    "memory": lambda _root: MemoryFileStorage(),
}


@pytest.fixture(params=sorted(STORAGES))
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> FileStorage:
    return STORAGES[request.param](tmp_path)


async def test_saved_bytes_read_back_and_a_second_save_replaces_them(
    storage: FileStorage,
) -> None:
    await storage.save("acc_1/file_a.wav", b"\x00first")
    assert await storage.read("acc_1/file_a.wav") == b"\x00first"
    await storage.save("acc_1/file_a.wav", b"second")
    assert await storage.read("acc_1/file_a.wav") == b"second"


async def test_keys_are_apart(storage: FileStorage) -> None:
    await storage.save("acc_1/file.wav", b"one")
    await storage.save("acc_2/file.wav", b"two")
    assert await storage.read("acc_1/file.wav") == b"one"
    assert await storage.read("acc_2/file.wav") == b"two"


async def test_a_missing_key_raises_and_delete_is_idempotent(storage: FileStorage) -> None:
    with pytest.raises(FileNotFoundError):
        await storage.read("acc_1/never.wav")
    await storage.save("acc_1/gone.wav", b"x")
    await storage.delete("acc_1/gone.wav")
    await storage.delete("acc_1/gone.wav")
    with pytest.raises(FileNotFoundError):
        await storage.read("acc_1/gone.wav")


@pytest.mark.parametrize("key", ["../escape", "acc/../../etc/passwd", "/absolute", "a b", ""])
async def test_keys_that_could_leave_the_storage_are_refused(
    storage: FileStorage, key: str
) -> None:
    with pytest.raises(ValueError):
        await storage.save(key, b"x")
    with pytest.raises(ValueError):
        await storage.read(key)


# --- rate-limit storage ----------------------------------------------------------------------


@pytest.fixture(params=["memory://", pytest.param(REDIS_URL, marks=pytest.mark.redis)])
async def limiter(request: pytest.FixtureRequest) -> AsyncIterator[RateLimiter]:
    limiter = RateLimiter(request.param, {"paid": "3/minute", "corporate": "5/minute"})
    try:
        yield limiter
    finally:
        limiter.close()


def account() -> str:
    return f"acc_{uuid.uuid4().hex}"  # fresh in a Redis other test runs share


async def test_the_window_admits_its_limit_then_refuses(limiter: RateLimiter) -> None:
    who = account()
    decisions = [await limiter.hit(who, "paid") for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert [d.remaining for d in decisions[:3]] == [2, 1, 0]
    refused = decisions[-1]
    assert refused.limit == 3 and 0 < refused.reset_seconds <= 60
    assert int(refused.headers()["Retry-After"]) >= 1


async def test_accounts_and_tiers_have_their_own_windows(limiter: RateLimiter) -> None:
    first, second = account(), account()
    for _ in range(3):
        assert (await limiter.hit(first, "paid")).allowed
    assert not (await limiter.hit(first, "paid")).allowed
    assert (await limiter.hit(second, "paid")).allowed
    corporate = account()
    assert all([(await limiter.hit(corporate, "corporate")).allowed for _ in range(5)])
    assert not (await limiter.hit(corporate, "corporate")).allowed
