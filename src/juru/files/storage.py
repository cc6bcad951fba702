"""File storage: a small interface, and the local-disk implementation used by default."""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from pathlib import Path
from typing import Protocol

_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+(?:/[A-Za-z0-9_.-]+)*$")


class FileStorage(Protocol):
    """Bytes by key (`account/file.ext`); metadata and ownership live in the database."""

    async def save(self, key: str, data: bytes) -> None: ...

    async def read(self, key: str) -> bytes: ...

    async def delete(self, key: str) -> None: ...


def check_key(key: str) -> str:
    """The key, if it is one Juru makes (path segments, no way out of the storage's root)."""
    if not _KEY_RE.match(key) or ".." in key:
        raise ValueError(f"invalid storage key {key!r}")
    return key


class MemoryFileStorage:
    """Files in a dict: for tests, and a second implementation the contract test holds to the
    interface."""

    def __init__(self) -> None:
        self._files: dict[str, bytes] = {}

    async def save(self, key: str, data: bytes) -> None:
        self._files[check_key(key)] = bytes(data)

    async def read(self, key: str) -> bytes:
        try:
            return self._files[check_key(key)]
        except KeyError:
            raise FileNotFoundError(key) from None

    async def delete(self, key: str) -> None:
        self._files.pop(check_key(key), None)


class LocalFileStorage:
    """Files under one directory on local disk (`JURU_FILES_DIR`)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        # Keys are made by Juru, but a path must never leave the root whatever they hold.
        return self.root / check_key(key)

    async def save(self, key: str, data: bytes) -> None:
        await asyncio.to_thread(self._write, self._path(key), data)

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written aside then renamed, so a reader never sees half a file.
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".part-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    async def read(self, key: str) -> bytes:
        return await asyncio.to_thread(self._path(key).read_bytes)

    async def delete(self, key: str) -> None:
        await asyncio.to_thread(self._path(key).unlink, True)
