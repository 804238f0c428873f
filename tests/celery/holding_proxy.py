"""A TCP proxy in front of a name server that can hold requests of chosen RocketMQ request codes
(a name server slow for one admin call): tests of what must not wait for the name server."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator

from rocketmq_sdk.remoting.command import RemotingCommand

__all__ = ["HoldingProxy"]


class HoldingProxy:
    """Forwards 127.0.0.1:<free port> to ``upstream`` ("host:port"), frame by frame. While
    :meth:`hold` is armed for a request code, the first request of that code is kept back
    (``held`` is set) until :meth:`release`; later frames of that connection wait behind it, as
    behind a slow server. Threads are daemons; :meth:`close` stops everything."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self._server = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self._server.getsockname()[1]}"
        self._lock = threading.Lock()
        self._hold_codes: set[int] = set()
        self.held = threading.Event()
        self._released = threading.Event()
        self._released.set()
        self._closed = False
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, name="holding-proxy", daemon=True).start()

    def hold(self, code: int) -> None:
        """Keep back the next request with ``code`` until :meth:`release`."""
        with self._lock:
            self.held.clear()
            self._released.clear()
            self._hold_codes.add(code)

    def release(self) -> None:
        with self._lock:
            self._hold_codes.clear()
        self._released.set()

    def close(self) -> None:
        self._closed = True
        self.release()
        for s in [self._server, *self._socks]:
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream, timeout=5)
            upstream.settimeout(None)
            self._socks += [client, upstream]
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _requests(self, src: socket.socket, dst: socket.socket) -> None:
        _relay(self._held_frames(src), dst)

    def _held_frames(self, src: socket.socket) -> Iterator[bytes]:
        """The client's request frames, each after its hold (if armed for its code) ends."""
        while (frame := _read_frame(src)) is not None:
            code = RemotingCommand.decode(frame[4:]).code
            with self._lock:
                hold = code in self._hold_codes
                self._hold_codes.discard(code)
            if hold:
                self.held.set()
                self._released.wait(60)
            yield frame

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        _relay(iter(lambda: src.recv(65536), b""), dst)


def _relay(chunks: Iterator[bytes], dst: socket.socket) -> None:
    """Send every chunk to ``dst``, then shut its write side (a socket error ends it early)."""
    try:
        for chunk in chunks:
            dst.sendall(chunk)
    except OSError:
        return
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def _read_frame(sock: socket.socket) -> bytes | None:
    """One remoting frame, its 4-byte length prefix included (None at EOF)."""
    head = _read_exact(sock, 4)
    if head is None:
        return None
    body = _read_exact(sock, struct.unpack(">I", head)[0])
    return None if body is None else head + body
