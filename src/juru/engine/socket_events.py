"""Run events between the processes of one SQLite database: a Unix datagram socket per process.

Every process that opens the database binds `<pid>-<random>.sock` in one directory (beside the
database, or under the temporary directory when that path would be too long for a socket) and
sends each event to every other socket there. A socket left by a killed process refuses the
connection and is removed by the first sender that meets it.

Bound to its database (`send_from_writer`), a process has the SQLite writer's thread send a
write's notices as soon as it committed, before the write's result goes back to the event
loop, as a PostgreSQL transaction's NOTIFY goes out at its COMMIT; the loop sends the rest.
Sends from either thread take one lock; a datagram that finds its peer's queue full waits on
the loop, and later ones to that peer wait behind it, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
import tempfile
import threading
import uuid
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from juru.engine.events import HELLO, LocalRunEvents
from juru.store.database import Database

logger = logging.getLogger(__name__)
SOCKET_SUFFIX = ".sock"
# sockaddr_un holds 108 bytes; keep clear of it with the longest name this module makes.
MAX_SOCKET_PATH = 100
SEND_TIMEOUT_SECONDS = 5.0
RECEIVE_BYTES = 4096
# The channel of the notices a write keeps for the writer's thread to send (one: all go to
# every peer).
CHANNEL = "juru_sockets"


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
        self._loop: asyncio.AbstractEventLoop | None = None
        # The peers' connected sockets, and the datagrams waiting for a full queue to drain,
        # by peer: touched by the loop and the writer's thread, under the lock.
        self._lock = threading.Lock()
        self._peers: dict[str, socket.socket] = {}
        self._backlogs: dict[str, deque[bytes]] = {}
        self._from_writer = False

    def send_from_writer(self, engine: Database) -> None:
        """Have the writer's thread of `engine` send the notices of each write it commits
        (those `notices` makes), where it can (SQLite)."""
        self._from_writer = engine.tell_notices_with(self._tell)

    def notices(self, *payloads: str) -> list[tuple[str, str]]:
        if not self._from_writer:
            return []
        return [(CHANNEL, payload) for payload in payloads]

    async def committed(self, *payloads: str) -> None:
        if not self._from_writer:
            await super().committed(*payloads)
            return
        for payload in payloads:
            self.deliver(payload)  # the writer's thread told the other processes

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = self.directory / f"{os.getpid()}-{uuid.uuid4().hex[:8]}{SOCKET_SUFFIX}"
        receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        receiver.bind(str(self.path))
        receiver.setblocking(False)
        self._socket = receiver
        self._loop.add_reader(receiver.fileno(), self._receive)
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
        with self._lock:
            for peer in self._peers.values():
                peer.close()
            self._peers.clear()
            self._backlogs.clear()

    def _receive(self) -> None:
        while self._socket is not None:
            try:
                payload = self._socket.recv(RECEIVE_BYTES)
            except (BlockingIOError, InterruptedError):
                return
            self.hear(payload.decode())

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
        """Drop the connection to `name` and what waits for it (the caller holds the lock)."""
        peer = self._peers.pop(name, None)
        if peer is not None:
            peer.close()
        self._backlogs.pop(name, None)
        if remove:
            # Nobody is bound there any more: the process that made it has gone.
            with contextlib.suppress(FileNotFoundError):
                (self.directory / name).unlink()

    def _tell(self, notices: Sequence[tuple[str, str]]) -> None:
        """Send a committed write's notices (in the writer's thread)."""
        self._send_now(*(payload.encode() for _channel, payload in notices))

    async def _send(self, payload: str) -> None:
        self._send_now(payload.encode())

    def _send_now(self, *datagrams: bytes) -> None:
        """Send `datagrams`, in order, to every peer now, from any thread; to a peer whose
        queue is full, once it has read some (`_drain`, on the loop)."""
        with self._lock:
            for name in self._peer_names():
                for data in datagrams:
                    backlog = self._backlogs.get(name)
                    if backlog is not None:
                        backlog.append(data)
                        continue
                    peer = self._connected(name)
                    if peer is None:
                        break
                    try:
                        peer.send(data)
                    except BlockingIOError:
                        self._backlogs[name] = deque([data])
                        self._drain_later(name, peer)
                    except OSError as error:
                        self._dropped(name, error)
                        break

    def _dropped(self, name: str, error: OSError) -> None:
        """Forget `name` after a send to it failed with `error` (the caller holds the lock);
        its socket's file goes too when nobody is bound there any more."""
        gone = isinstance(error, ConnectionRefusedError | FileNotFoundError)
        if not gone:
            logger.warning("run event to %s not delivered; dropping its connection", name)
        self._forget(name, remove=gone)

    def _drain_later(self, name: str, peer: socket.socket) -> None:
        loop = self._loop
        if loop is None:
            self._backlogs.pop(name, None)
            return
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody to tell
            loop.call_soon_threadsafe(self._in_background, self._drain(name, peer))

    async def _drain(self, name: str, peer: socket.socket) -> None:
        """Send the datagrams waiting for `name`, in order, as its queue takes them."""
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                backlog = self._backlogs.get(name)
                if backlog is None or self._peers.get(name) is not peer:
                    return
                if not backlog:
                    del self._backlogs[name]
                    return
                data = backlog[0]
            try:
                await asyncio.wait_for(loop.sock_sendall(peer, data), SEND_TIMEOUT_SECONDS)
            except OSError as error:  # TimeoutError among them
                with self._lock:
                    self._dropped(name, error)
                return
            with self._lock:
                if self._backlogs.get(name) is backlog:
                    backlog.popleft()
