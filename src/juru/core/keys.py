"""API keys: `juru_live_` and 40 random characters, shown once and stored as a SHA-256 hash.

A plain hash is enough (no slow KDF): the keys are long random strings, not passwords, and a
fast lookup keeps every request to one indexed query.
"""

from __future__ import annotations

import hashlib
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
