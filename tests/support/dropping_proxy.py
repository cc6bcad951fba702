"""A TCP proxy in front of a server that cuts every event stream it carries after a number of
events, as a restarting server or an impatient load balancer would: the client sees the
connection drop in the middle of a stream."""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType

STREAM_HEADER = b"text/event-stream"
FRAME_END = b"\n\n"


class DroppingProxy:
    def __init__(self, upstream_port: int, frames_per_stream: int) -> None:
        self.upstream_port = upstream_port
        self.frames_per_stream = frames_per_stream
        self.drops = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._closed = False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> DroppingProxy:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._answers, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            _cut(source, target)

    def _answers(self, upstream: socket.socket, client: socket.socket) -> None:
        """The server's bytes to the client, until a stream has carried its frames."""
        streaming, frames = False, 0
        try:
            while data := upstream.recv(65536):
                streaming = streaming or STREAM_HEADER in data
                if streaming:
                    frames += data.count(FRAME_END)
                    if frames >= self.frames_per_stream:
                        cut = _after_frames(
                            data, data.count(FRAME_END) - (frames - self.frames_per_stream)
                        )
                        client.sendall(data[:cut])
                        with self._lock:
                            self.drops += 1
                        return
                client.sendall(data)
        except OSError:
            pass
        finally:
            _cut(upstream, client)


def _cut(*ends: socket.socket) -> None:
    """Close both ends now: `shutdown` first, since a thread blocked in `recv` on a socket keeps
    a plain `close` from reaching the peer."""
    for end in ends:
        with contextlib.suppress(OSError):
            end.shutdown(socket.SHUT_RDWR)
        end.close()


def _after_frames(data: bytes, count: int) -> int:
    """The offset just past the `count`-th frame end in `data`."""
    offset = 0
    for _ in range(count):
        offset = data.index(FRAME_END, offset) + len(FRAME_END)
    return offset
