"""API keys: `juru_live_` and 40 random characters, shown once and stored as a SHA-256 hash.

A plain hash is enough (no slow KDF): the keys are long random strings, not passwords, and a
fast lookup keeps every request to one indexed query.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string
from dataclasses import dataclass

KEY_PREFIX = "juru_live_"
SECRET_LENGTH = 40
VISIBLE_CHARACTERS = 8
_ALPHABET = string.ascii_letters + string.digits
KEY_PATTERN = re.compile(rf"^{KEY_PREFIX}[A-Za-z0-9]{{{SECRET_LENGTH}}}$")


@dataclass(frozen=True)
class NewKey:
    """A key just made: the secret (never stored) and what is stored about it."""

    secret: str
    prefix: str
    key_hash: str


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def key_prefix(secret: str) -> str:
    """The part of a key that identifies it in lists and in `juru keys revoke`."""
    return secret[: len(KEY_PREFIX) + VISIBLE_CHARACTERS]


def new_key() -> NewKey:
    secret = KEY_PREFIX + "".join(secrets.choice(_ALPHABET) for _ in range(SECRET_LENGTH))
    return NewKey(secret=secret, prefix=key_prefix(secret), key_hash=hash_key(secret))


def is_well_formed(secret: str) -> bool:
    return KEY_PATTERN.fullmatch(secret) is not None


# A stream token lets a client that cannot send headers (the browser's EventSource) read one
# run's event stream: `jst.<key prefix>.<run id>.<expiry, Unix seconds>.<signature>`, signed
# with the key's SHA-256, so revoking the key revokes its tokens and no secret is added.
STREAM_TOKEN_PREFIX = "jst"
_TOKEN_PART = re.compile(r"^[A-Za-z0-9_]{1,80}$")


@dataclass(frozen=True)
class StreamToken:
    key_prefix: str
    run_id: str
    expires: int
    signature: str


def _signature(key_hash: str, prefix: str, run_id: str, expires: int) -> str:
    message = f"{prefix}.{run_id}.{expires}".encode()
    return hmac.new(key_hash.encode(), message, hashlib.sha256).hexdigest()


def stream_token(secret: str, run_id: str, expires: int) -> str:
    """A token for `run_id`'s events, valid until `expires`, signed for the key `secret`."""
    prefix = key_prefix(secret)
    signature = _signature(hash_key(secret), prefix, run_id, expires)
    return f"{STREAM_TOKEN_PREFIX}.{prefix}.{run_id}.{expires}.{signature}"


def read_stream_token(token: str) -> StreamToken | None:
    """The parts of a well-formed stream token (not yet checked), or None."""
    parts = token.split(".")
    if len(parts) != 5 or parts[0] != STREAM_TOKEN_PREFIX:
        return None
    _, prefix, run_id, expires, signature = parts
    if not all(_TOKEN_PART.fullmatch(part) for part in (prefix, run_id, expires, signature)):
        return None
    if not expires.isdigit():
        return None
    return StreamToken(prefix, run_id, int(expires), signature)


def signed_by(token: StreamToken, key_hash: str) -> bool:
    expected = _signature(key_hash, token.key_prefix, token.run_id, token.expires)
    return hmac.compare_digest(expected, token.signature)
