"""Which server and key the terminal commands use, and how a failed call reads on one line."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from juru.client import APIConnectionError, APIStatusError, Juru, JuruError

LOCAL_KEY_FILE = Path(".juru") / "local-api-key"


@dataclass(frozen=True)
class KeyChoice:
    """The key to send (None: none), and a note to print when it was found by itself."""

    api_key: str | None
    note: str | None = None


def choose_api_key(
    api_key: str | None, environ: Mapping[str, str] = os.environ, cwd: Path | None = None
) -> KeyChoice:
    """`--api-key`, else `JURU_API_KEY`, else the local key a SQLite install wrote in this
    directory (`.juru/local-api-key`), else no key."""
    if api_key:
        return KeyChoice(api_key)
    if environ.get("JURU_API_KEY"):
        return KeyChoice(environ["JURU_API_KEY"])
    local = (cwd or Path.cwd()) / LOCAL_KEY_FILE
    if local.is_file():
        key = local.read_text().strip()
        if key:
            return KeyChoice(key, f"using the local key in {LOCAL_KEY_FILE}")
    return KeyChoice(None)


def open_client(base_url: str | None, key: KeyChoice) -> Juru:
    """A client of `base_url` (else `JURU_BASE_URL`, else http://127.0.0.1:8000)."""
    return Juru(base_url or None, key.api_key if key.api_key is not None else "")


def error_line(error: JuruError, base_url: str) -> str:
    """`error: <code>: <message>` and the fields the API named, on one line."""
    if isinstance(error, APIStatusError):
        line = f"error: {error.code}: {error.message}"
        extra = [field for field in error.fields if field not in error.message]
        return f"{line} ({'; '.join(extra)})" if extra else line
    if isinstance(error, APIConnectionError):
        cause = error.__cause__ or error
        return f"error: the Juru server at {base_url} cannot be reached ({cause})"
    return f"error: {error}"
