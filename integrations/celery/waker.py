"""A readable file descriptor that other threads make readable (a self-pipe): the SDK's pull
threads and the acknowledgements signal it, and the connection's consumer loop waits on it,
either in :meth:`Transport.drain_events` or in the worker's event loop (kombu hub), which
watches it with ``add_reader`` as kombu's Redis transport watches its sockets."""

from __future__ import annotations

import os
import select
import threading

__all__ = ["Waker"]


class Waker:
    """Set from any thread; :meth:`clear` before looking for work, then :meth:`wait` (or let an
    event loop poll :meth:`fileno`): a :meth:`set` after the :meth:`clear` is never missed."""

    def __init__(self) -> None:
        self._read_fd, self._write_fd = os.pipe()
        for fd in (self._read_fd, self._write_fd):
            os.set_blocking(fd, False)
            os.set_inheritable(fd, False)
        self._lock = threading.Lock()
        self._pending = False
        self._closed = False

    def fileno(self) -> int:
        return self._read_fd

    def set(self) -> None:
        """Make the descriptor readable (one byte at most in the pipe: repeated calls are cheap)."""
        with self._lock:
            if self._pending or self._closed:
                return
            self._pending = True
            try:
                os.write(self._write_fd, b"\x01")
            except (BlockingIOError, OSError):
                pass

    def clear(self) -> None:
        """Empty the pipe: the descriptor is readable again only after the next :meth:`set`."""
        with self._lock:
            self._pending = False
            if self._closed:
                return
            try:
                while os.read(self._read_fd, 4096):
                    pass
            except (BlockingIOError, OSError):
                pass

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds for the descriptor to be readable; whether it is."""
        if self._closed:
            return False
        poller = select.poll()
        poller.register(self._read_fd, select.POLLIN)
        return bool(poller.poll(max(0.0, timeout_s) * 1000))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for fd in (self._read_fd, self._write_fd):
                try:
                    os.close(fd)
                except OSError:
                    pass
