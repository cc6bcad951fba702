"""Who is calling `/v1`: the account behind a Bearer key, and whether its rate limit allows
the request."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

from juru.billing.rate_limits import RateLimitDecision, RateLimiter
from juru.core.clock import Clock
from juru.core.errors import AuthenticationError, RateLimitedError
from juru.core.keys import (
    KEY_PREFIX,
    hash_key,
    is_well_formed,
    key_prefix,
    read_stream_token,
    signed_by,
)
from juru.store.accounts import account_of_key, live_key_by_prefix
from juru.store.database import Database


@dataclass(frozen=True)
class Caller:
    account_id: str
    tier: str
    rate_limit: RateLimitDecision


def unauthorized(code: str, message: str) -> AuthenticationError:
    return AuthenticationError(message, code)


def bearer_secret(authorization: str | None) -> str:
    """The key of an `Authorization: Bearer <key>` header, or a 401 saying what is wrong."""
    if not authorization:
        raise unauthorized(
            "missing_api_key", "send your API key as the header 'Authorization: Bearer <key>'"
        )
    scheme, _, secret = authorization.strip().partition(" ")
    secret = secret.strip()
    if scheme.lower() != "bearer" or not secret:
        raise unauthorized("invalid_api_key", "the Authorization header must be 'Bearer <key>'")
    if not is_well_formed(secret):
        raise unauthorized(
            "invalid_api_key", f"that is not a Juru API key (they start with {KEY_PREFIX!r})"
        )
    return secret


class KeyCache:
    """The accounts of live keys seen in the last `seconds`, by key hash, so that a busy client
    costs one key lookup per period rather than one per request. A key revoked by another
    process keeps working here for at most `seconds`; one revoked through this process stops
    at once (`forget`). Unknown keys are never kept: a new key works at once."""

    def __init__(self, clock: Clock, seconds: float, capacity: int = 10_000) -> None:
        self.clock = clock
        self.seconds = seconds
        self.capacity = capacity
        self._entries: OrderedDict[str, tuple[datetime, str, tuple[str, str]]] = OrderedDict()

    def get(self, key_hash: str) -> tuple[str, str] | None:
        entry = self._entries.get(key_hash)
        if entry is None:
            return None
        seen, _prefix, found = entry
        if (self.clock.now() - seen).total_seconds() >= self.seconds:
            del self._entries[key_hash]
            return None
        return found

    def put(self, key_hash: str, prefix: str, found: tuple[str, str]) -> None:
        if self.seconds <= 0:
            return
        self._entries[key_hash] = (self.clock.now(), prefix, found)
        self._entries.move_to_end(key_hash)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def forget(self, prefix: str) -> None:
        """Drop the key with this prefix (it was just revoked)."""
        for key_hash, (_seen, known, _found) in list(self._entries.items()):
            if known == prefix:
                del self._entries[key_hash]


class Access:
    """Authentication and rate limiting of `/v1` requests."""

    def __init__(self, engine: Database, limiter: RateLimiter, keys: KeyCache) -> None:
        self.engine = engine
        self.limiter = limiter
        self.keys = keys
        self.clock = keys.clock

    async def account_of(self, secret: str) -> tuple[str, str] | None:
        """The (account id, tier) of a live key, from the cache or the database."""
        key_hash = hash_key(secret)
        found = self.keys.get(key_hash)
        if found is None:
            found = await account_of_key(self.engine, key_hash)
            if found is not None:
                self.keys.put(key_hash, key_prefix(secret), found)
        return found

    async def admit(self, authorization: str | None) -> Caller:
        """The caller, once its key is live and its window has room (else 401 or 429)."""
        secret = bearer_secret(authorization)
        found = await self.account_of(secret)
        if found is None:
            raise unauthorized("invalid_api_key", "the API key is unknown or was revoked")
        return await self._within_limit(*found)

    async def admit_stream_token(self, token: str, run_id: str) -> Caller:
        """The caller of a stream token for `run_id` (`core.keys.stream_token`): signed by a
        live key, not expired, for this run (else 401), within the account's limit (429)."""
        parsed = read_stream_token(token)
        if parsed is None:
            raise unauthorized("invalid_stream_token", "that is not a stream token")
        if parsed.run_id != run_id:
            raise unauthorized("invalid_stream_token", "the stream token is for another run")
        if parsed.expires <= self.clock.now().timestamp():
            raise unauthorized(
                "expired_stream_token", "the stream token expired; ask for a new one"
            )
        key = await live_key_by_prefix(self.engine, parsed.key_prefix)
        if key is None or not signed_by(parsed, key[0]):
            raise unauthorized(
                "invalid_stream_token", "the stream token is not valid, or its key was revoked"
            )
        return await self._within_limit(key[1], key[2])

    async def _within_limit(self, account_id: str, tier: str) -> Caller:
        decision = await self.limiter.hit(account_id, tier)
        if not decision.allowed:
            raise RateLimitedError(
                f"more than {decision.limit} requests in the account's window; retry after "
                f"{decision.headers()['Retry-After']} s",
                decision.limit,
                decision.reset_seconds,
            )
        return Caller(account_id, tier, decision)
