"""Message ids (§4.7).

* offset message id: hex of store host IP + port + commit log offset (assigned by the broker);
* unique message id (``UNIQ_KEY``): hex of client IP + pid + a per-process random int + ms since
  the start of the current month + a 16-bit counter, the shape Java's ``MessageClientIDSetter``
  produces. The counter wraps as an unsigned short, and the per-process prefix is re-derived
  after ``fork()`` so parent and child never produce the same ids.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import os
import random
import socket
import struct
import threading
import time

_OFFSET_ID = struct.Struct(">q")


def create_offset_msg_id(host_port: bytes, commit_log_offset: int) -> str:
    """Offset message id from packed ``ip(4|16) + int port`` and the commit log offset."""
    return (host_port + _OFFSET_ID.pack(commit_log_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """Return (ip, port, commit_log_offset) of an offset message id (32 or 56 hex chars).

    Raises:
        ValueError: not an offset message id.
    """
    raw = bytes.fromhex(msg_id)
    if len(raw) == 16:
        ip = socket.inet_ntop(socket.AF_INET, raw[:4])
        port, off = struct.unpack(">iq", raw[4:])
    elif len(raw) == 28:
        ip = socket.inet_ntop(socket.AF_INET6, raw[:16])
        port, off = struct.unpack(">iq", raw[16:])
    else:
        raise ValueError(f"not an offset message id: {msg_id!r}")
    return ip, port, off


def _local_ip_bytes() -> bytes:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent; picks the outbound interface
            return socket.inet_aton(s.getsockname()[0])
    except OSError:
        return socket.inet_aton("127.0.0.1")


class UniqIdGenerator:
    """Thread-safe generator of ``UNIQ_KEY`` ids (32 upper-case hex chars)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ip = _local_ip_bytes()
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._prefix = (self._ip + struct.pack(">HI", os.getpid() & 0xFFFF, random.getrandbits(32))).hex().upper()
        self._counter = itertools.count(random.getrandbits(16))
        self._set_month_start()

    def _set_month_start(self) -> None:
        now = _dt.datetime.now()
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        nxt = (start + _dt.timedelta(days=32)).replace(day=1)
        self._start_ms = int(start.timestamp() * 1000)
        self._next_start_ms = int(nxt.timestamp() * 1000)

    def create(self) -> str:
        now = int(time.time() * 1000)
        if now >= self._next_start_ms:
            with self._lock:
                if now >= self._next_start_ms:
                    self._set_month_start()
        n = next(self._counter) & 0xFFFF  # itertools.count is atomic under the GIL
        return f"{self._prefix}{(now - self._start_ms) & 0xFFFFFFFF:08X}{n:04X}"


_GENERATOR: UniqIdGenerator | None = None


def create_uniq_id() -> str:
    """A new ``UNIQ_KEY`` from the process-wide generator."""
    global _GENERATOR
    if _GENERATOR is None:
        _GENERATOR = UniqIdGenerator()
    return _GENERATOR.create()
