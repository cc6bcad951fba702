"""Object ids: a prefix, then a time-ordered part, so ids sort in creation order."""

from __future__ import annotations

import secrets
import time


def new_id(prefix: str) -> str:
    """`prefix_` + 12 hex digits of milliseconds + 12 random hex digits."""
    return f"{prefix}_{time.time_ns() // 1_000_000:012x}{secrets.token_hex(6)}"
