"""Run events between the processes of one SQLite database: a Unix datagram socket per process.

Every process that opens the database binds `<pid>-<random>.sock` in one directory (beside the
database, or under the temporary directory when that path would be too long for a socket) and
sends each event to every other socket there. A socket left by a killed process refuses the
connection and is removed by the first sender that meets it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
import tempfile
import uuid
from pathlib import Path

from juru.engine.events import HELLO, LocalRunEvents

logger = logging.getLogger(__name__)
SOCKET_SUFFIX = ".sock"
# sockaddr_un holds 108 bytes; keep clear of it with the longest name this module makes.
MAX_SOCKET_PATH = 100
SEND_TIMEOUT_SECONDS = 5.0
RECEIVE_BYTES = 4096


def events_directory(database_path: Path) -> Path:
    """Where the processes of `database_path` keep their event sockets."""
    beside = database_path.resolve().with_name(database_path.name + ".events")
    if len(str(beside)) + len(f"/{2**22}-{'0' * 8}{SOCKET_SUFFIX}") <= MAX_SOCKET_PATH:
        return beside
    digest = hashlib.sha256(str(database_path.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"juru-{os.getuid()}-{digest}"


class SocketRunEvents(LocalRunEvents):
    """Local fan-out fed by a datagram socket, so events cross the processes of one machine."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory
        self.path: Path | None = None
        self._socket: socket.socket | None = None
        self._peers: dict[str, socket.socket] = {}
        self._send_lock = asyncio.Lock()

    async def start(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = self.directory / f"{os.getpid()}-{uuid.uuid4().hex[:8]}{SOCKET_SUFFIX}"
        receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        receiver.bind(str(self.path))
        receiver.setblocking(False)
        self._socket = receiver
        asyncio.get_running_loop().add_reader(receiver.fileno(), self._receive)
        await self._send(HELLO)

    async def stop(self) -> None:
        receiver, self._socket = self._socket, None
        if receiver is not None:
            asyncio.get_running_loop().remove_reader(receiver.fileno())
            receiver.close()
        if self.path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            with contextlib.suppress(OSError):
                self.directory.rmdir()  # only when no other process is left in it
        for peer in self._peers.values():
            peer.close()
        self._peers.clear()

    def _receive(self) -> None:
        while self._socket is not None:
            try:
                payload = self._socket.recv(RECEIVE_BYTES)
            except (BlockingIOError, InterruptedError):
                return
            self.deliver(payload.decode())

    def _peer_names(self) -> list[str]:
        own = self.path.name if self.path is not None else None
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return [name for name in names if name.endswith(SOCKET_SUFFIX) and name != own]

    def _connected(self, name: str) -> socket.socket | None:
        peer = self._peers.get(name)
        if peer is not None:
            return peer
        peer = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        peer.setblocking(False)
        try:
            peer.connect(str(self.directory / name))
        except (ConnectionRefusedError, FileNotFoundError):
            peer.close()
            self._forget(name, remove=True)
            return None
        self._peers[name] = peer
        return peer

    def _forget(self, name: str, *, remove: bool) -> None:
        peer = self._peers.pop(name, None)
        if peer is not None:
            peer.close()
        if remove:
            # Nobody is bound there any more: the process that made it has gone.
            with contextlib.suppress(FileNotFoundError):
                (self.directory / name).unlink()

    async def _send(self, payload: str) -> None:
        data = payload.encode()
        loop = asyncio.get_running_loop()
        # One sender at a time: two waits for one socket's writability would replace each other.
        async with self._send_lock:
            for name in self._peer_names():
                peer = self._connected(name)
                if peer is None:
                    continue
                try:
                    try:
                        peer.send(data)
                    except BlockingIOError:
                        # The peer's queue is full: wait until it has read some.
                        await asyncio.wait_for(loop.sock_sendall(peer, data), SEND_TIMEOUT_SECONDS)
                except (ConnectionRefusedError, FileNotFoundError):
                    self._forget(name, remove=True)
                except (TimeoutError, OSError):
                    logger.warning("run event to %s not delivered; dropping its connection", name)
                    self._forget(name, remove=False)
