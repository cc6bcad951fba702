"""Who is calling `/v1`: the account behind a Bearer key, and whether its rate limit allows
the request."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from juru.billing.rate_limits import RateLimitDecision, RateLimiter
from juru.core.errors import AuthenticationError, RateLimitedError
from juru.core.keys import KEY_PREFIX, hash_key, is_well_formed
from juru.store.accounts import account_of_key


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


class Access:
    """Authentication and rate limiting of `/v1` requests."""

    def __init__(self, engine: AsyncEngine, limiter: RateLimiter) -> None:
        self.engine = engine
        self.limiter = limiter

    async def admit(self, authorization: str | None) -> Caller:
        """The caller, once its key is live and its window has room (else 401 or 429)."""
        secret = bearer_secret(authorization)
        found = await account_of_key(self.engine, hash_key(secret))
        if found is None:
            raise unauthorized("invalid_api_key", "the API key is unknown or was revoked")
        account_id, tier = found
        decision = await self.limiter.hit(account_id, tier)
        if not decision.allowed:
            raise RateLimitedError(
                f"more than {decision.limit} requests in the account's window; retry after "
                f"{decision.headers()['Retry-After']} s",
                decision.limit,
                decision.reset_seconds,
            )
        return Caller(account_id, tier, decision)
