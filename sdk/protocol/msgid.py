"""Message ids (docs/protocol.md §4.7).

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
from collections.abc import Callable
from functools import partial

from .. import _speedups

_OFFSET_ID = struct.Struct(">q")
_PORT = struct.Struct(">i")


def pack_ip(ip: str) -> bytes:
    """4 bytes for an IPv4 address, 16 for IPv6 (brackets tolerated).

    Raises:
        ValueError: not an IP address.
    """
    ip = ip.strip("[]")
    try:
        if ":" in ip:
            return socket.inet_pton(socket.AF_INET6, ip)
        return socket.inet_aton(ip)
    except OSError as exc:
        raise ValueError(f"not an IP address: {ip!r}") from exc


def offset_msg_id_from_packed(host_port: bytes, commit_log_offset: int) -> str:
    """Offset message id from an already packed ``ip(4|16) + int port`` (hot path of the codec)."""
    return (host_port + _OFFSET_ID.pack(commit_log_offset)).hex().upper()


def create_offset_msg_id(host: str | bytes, port: int, commit_log_offset: int | None = None) -> str:
    """Offset message id (the broker's ``msgId``, docs/protocol.md §4.7): upper-case hex of store host IP (4 or 16
    bytes) + int port + long commit log offset; 32 hex chars for IPv4, 56 for IPv6.

    Args:
        host: the store host IP (``"127.0.0.1"``, ``"::1"``), or ``"ip:port"`` when ``port`` is
            given as ``None``.
        port: the store host port.
        commit_log_offset: physical offset of the record in the CommitLog (bytes).

    The legacy two-argument form ``create_offset_msg_id(packed_ip_port: bytes, offset)`` is also
    accepted.

    Raises:
        ValueError: ``host`` is not an IP address.
    """
    if commit_log_offset is None:
        if isinstance(host, bytes | bytearray | memoryview):
            return offset_msg_id_from_packed(bytes(host), port)
        raise TypeError("create_offset_msg_id(host, port, commit_log_offset) needs three arguments")
    if isinstance(host, bytes | bytearray):
        ip_bytes = bytes(host)
    else:
        if port is None:
            host, _, p = host.rpartition(":")
            port = int(p)
        ip_bytes = pack_ip(host)
    return offset_msg_id_from_packed(ip_bytes + _PORT.pack(port), commit_log_offset)


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
        self._head = (-1, "")  # (ms, prefix + its time field): ids of one ms share it

    def create(self) -> str:
        now = int(time.time() * 1000)
        if now >= self._next_start_ms:
            with self._lock:
                if now >= self._next_start_ms:
                    self._set_month_start()
        n = next(self._counter) & 0xFFFF  # itertools.count is atomic under the GIL
        ms, head = self._head
        if ms != now:
            head = f"{self._prefix}{(now - self._start_ms) & 0xFFFFFFFF:08X}"
            self._head = (now, head)
        return f"{head}{n:04X}"


def _month_start_ms(now_ms: int) -> int:
    now = _dt.datetime.fromtimestamp(now_ms / 1000)
    return int(now.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp() * 1000)


def get_nearly_time_from_id(msg_id: str) -> int:
    """Approximate creation time (epoch ms) of a ``UNIQ_KEY`` id, as Java
    ``MessageClientIDSetter.getNearlyTimeFromID``: the ms-since-month-start field is added to the
    start of the current local month, or of the previous one if that lies in the future.
    Ids are only meaningful within about a month of their creation.

    Raises:
        ValueError: not a 32 (IPv4) or 56 (IPv6) hex character id.
    """
    raw = bytes.fromhex(msg_id)
    if len(raw) not in (16, 28):
        raise ValueError(f"not a unique message id: {msg_id!r}")
    ip_len = len(raw) - 12
    delta = int.from_bytes(raw[ip_len + 6:ip_len + 10], "big")
    now_ms = int(time.time() * 1000)
    start = _month_start_ms(now_ms)
    if start + delta > now_ms:  # Java uses >=, which sends an id made this very ms a month back
        prev = _dt.datetime.fromtimestamp(start / 1000) - _dt.timedelta(days=1)
        start = _month_start_ms(int(prev.timestamp() * 1000))
    return start + delta


def decode_uniq_id(msg_id: str) -> tuple[str, int, int, int]:
    """Split a ``UNIQ_KEY`` into (ip, pid low 16 bits, ms since month start, counter).

    The C++ 1.x client writes its IP in little-endian order (``0100007F`` for 127.0.0.1), so the
    ip is only meaningful for Java-made ids.

    Raises:
        ValueError: not a 32 or 56 hex character id.
    """
    raw = bytes.fromhex(msg_id)
    if len(raw) not in (16, 28):
        raise ValueError(f"not a unique message id: {msg_id!r}")
    ip_len = len(raw) - 12
    ip = socket.inet_ntop(socket.AF_INET if ip_len == 4 else socket.AF_INET6, raw[:ip_len])
    pid, _rand, delta, counter = struct.unpack(">HiIH", raw[ip_len:])
    return ip, pid, delta, counter


_GENERATOR: UniqIdGenerator | None = None


def create_uniq_id() -> str:
    """A new ``UNIQ_KEY`` from the process-wide generator.

    With the C accelerator the generator's state (prefix, month, counter) is handed to
    ``_cmsgid.uniq_create`` (``_cmsgid.c`` beside this file), which makes the ids until the month ends or the process forks;
    then this generator takes over again (and hands the new state back)."""
    if _c_uniq_create is not None:
        uid = _c_uniq_create()
        if uid is not None:
            return uid
    global _GENERATOR
    gen = _GENERATOR
    if gen is None:
        gen = _GENERATOR = UniqIdGenerator()
    uid = gen.create()
    if _c_uniq_configure is not None:
        _c_uniq_configure(gen._prefix, gen._start_ms, gen._next_start_ms, next(gen._counter) & 0xFFFF)
    return uid


# the C twin of create_uniq_id's generator (_cmsgid.c beside this file), or None
_cmsgid = _speedups.load("rocketmq_sdk.protocol._cmsgid")
_c_uniq_create: Callable[[], str | None] | None = None
_c_uniq_configure: Callable[..., None] | None = None
if _cmsgid is not None:
    _c_uniq_create, _c_uniq_configure = _cmsgid.uniq_create, _cmsgid.uniq_configure
    os.register_at_fork(after_in_child=partial(_c_uniq_configure, None))  # the child re-derives its prefix
