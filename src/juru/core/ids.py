"""Object ids: a prefix, then a time-ordered part, so ids sort in creation order."""

from __future__ import annotations

import secrets
import threading
import time

_lock = threading.Lock()
_state = {"last": 0}


def new_id(prefix: str) -> str:
    """`prefix_` + 14 hex digits of microseconds (strictly increasing within a process) + 10
    random hex digits."""
    with _lock:
        micros = max(time.time_ns() // 1_000, _state["last"] + 1)
        _state["last"] = micros
    return f"{prefix}_{micros:014x}{secrets.token_hex(5)}"
