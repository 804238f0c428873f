"""IndexFile and IndexService (docs/protocol.md §5.4): a hash index from ``topic#key`` to CommitLog offsets,
used by QUERY_MESSAGE (by key or by ``UNIQ_KEY``).

File layout (big-endian): 40-byte header ``beginTimestamp(8) endTimestamp(8)
beginPhyOffset(8) endPhyOffset(8) hashSlotCount(4) indexCount(4)``; then ``max_hash_slot_num``
int slots (index of the newest entry of the slot, 0 = empty); then ``max_index_num`` 20-byte
entries ``keyHash(4) phyOffset(8) timeDiff(4, seconds since beginTimestamp) prevIndex(4)``.
``indexCount`` starts at 1 (entry 0 unused). Files live under ``index/`` and are named by their
creation local time ``yyyyMMddHHmmssSSS``.

The write path (:func:`index_key_hash`, :meth:`IndexFile.put_keys`) has an optional C twin,
``_cindex_file.c`` beside this file (``rocketmq_broker.store._cindex_file``, loaded through
:func:`rocketmq_sdk._speedups.load`); the Python code here is the reference and the fallback, with
the same file bytes and the same exceptions.
"""

from __future__ import annotations

import datetime as _dt
import functools
import logging
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import mul

from rocketmq_sdk._speedups import load
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.codes import MessageSysFlag
from rocketmq_sdk.protocol.javahash import java_string_hash

from .mapped_file import DEFAULT_RESERVE_AHEAD, DiskFullError, map_reserved, reserve_ahead

log = logging.getLogger("rocketmq_broker.store.index")

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_SIZE = 20
_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")
_SLOT = struct.Struct(">i")
_INT_MAX = 0x7FFFFFFF

_cindex_file = load("rocketmq_broker.store._cindex_file")


# Index keys ``topic#UNIQ_KEY`` of one producer share all but the last 12 characters (topic, then
# the UNIQ_KEY's ip/pid/class-loader part): hashCode(p + s) = hashCode(p)·31^len(s) + hashCode(s)
# (mod 2^32), so the shared prefix is hashed once (memoised) and only the suffix per message.
_SUFFIX = 12
_POW31_SUFFIX_DESC = [pow(31, _SUFFIX - 1 - i, 1 << 32) for i in range(_SUFFIX)]
_POW31_SUFFIX = pow(31, _SUFFIX, 1 << 32)


@functools.lru_cache(maxsize=1024)
def _prefix_hash(prefix: str) -> int:
    return java_string_hash(prefix) & 0xFFFFFFFF


def _index_key_hash_py(key: str) -> int:
    """``abs(key.hashCode())`` with ``Integer.MIN_VALUE`` → 0, as RocketMQ (pure-Python twin of
    ``_cindex_file.key_hash``; a lone surrogate raises UnicodeEncodeError in both)."""
    if not isinstance(key, str):
        raise TypeError(f"index key must be str, not {type(key).__name__}")
    if len(key) > 24 and key.isascii():
        h = (_prefix_hash(key[:-_SUFFIX]) * _POW31_SUFFIX
             + sum(map(mul, key[-_SUFFIX:].encode("ascii"), _POW31_SUFFIX_DESC))) & 0xFFFFFFFF
        if h & 0x80000000:
            h -= 0x100000000
    else:
        h = java_string_hash(key)
    return 0 if h == -0x80000000 else abs(h)


index_key_hash = _cindex_file.key_hash if _cindex_file is not None else _index_key_hash_py
"""``abs(key.hashCode())`` of an index key (``topic#key``) with ``Integer.MIN_VALUE`` → 0."""


def build_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"


def add_index_items(items: list[tuple[str, int, int]], topic: str, phy_offset: int, store_timestamp: int,
                    properties: dict[str, str]) -> None:
    """Append the index items of one record to ``items``: ``(topic#UNIQ_KEY, phy_offset,
    store_timestamp)``, then one per non-empty KEYS item (space separated), as :meth:`IndexService.build_index`
    indexes them."""
    uniq = properties.get(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if uniq:
        items.append((f"{topic}#{uniq}", phy_offset, store_timestamp))
    keys = properties.get(MC.KEYS)
    if keys:
        items.extend((f"{topic}#{k}", phy_offset, store_timestamp) for k in keys.split(MC.KEY_SEPARATOR) if k)


class IndexFile:
    """One index file.

    Disk space: a new file is sparse at its full size with its header and hash slots (written
    anywhere) and the first ``reserve_ahead`` bytes of entries reserved; entries (written in
    order) reserve the next ``reserve_ahead`` bytes before they pass the reserved end.

    Args:
        path: file path (base name ``yyyyMMddHHmmssSSS``).
        hash_slot_num / index_num: geometry (5,000,000 / 20,000,000 by default).
        end_phy_offset / end_timestamp: carried over from the previous file for a new one.
        reserve_ahead: bytes of entries reserved ahead (1 MiB by default).

    Raises:
        DiskFullError: no disk space for a new file's header, slots and first entries.
    """

    def __init__(self, path: str, hash_slot_num: int, index_num: int,
                 end_phy_offset: int = 0, end_timestamp: int = 0,
                 reserve_ahead: int = DEFAULT_RESERVE_AHEAD // 8) -> None:
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self._entries_base = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
        self.file_size = self._entries_base + index_num * INDEX_SIZE
        self._mm = _MappedIndex(path, self.file_size, self._entries_base, reserve_ahead)
        self._reserved_count = self._entries_reserved()  # entries below this index have disk space
        buf = self._mm.buf
        (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
         self.hash_slot_count, self.index_count) = _HEADER.unpack_from(buf, 0)
        if self.index_count <= 0:  # new file
            self._mm.reserve(self._entries_base)  # (done at creation; not for a file left empty by a crash)
            self._reserved_count = self._entries_reserved()
            self.index_count = 1
            self.end_phy_offset = end_phy_offset
            self.end_timestamp = end_timestamp
            self._write_header()

    def _write_header(self) -> None:
        _HEADER.pack_into(self._mm.buf, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                          self.end_phy_offset, self.hash_slot_count, self.index_count)

    def _entries_reserved(self) -> int:
        """How many entries (from index 0) the reserved space holds."""
        return max(0, (self._mm.reserved - self._entries_base) // INDEX_SIZE)

    def _reserve_entries(self, count: int) -> None:
        """Disk space for entries below index ``count`` (at most the file's). Raises DiskFullError."""
        self._mm.reserve(min(self._entries_base + count * INDEX_SIZE, self.file_size),
                         self._entries_base + self.index_count * INDEX_SIZE)
        self._reserved_count = self._entries_reserved()

    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Index ``key`` → ``phy_offset`` (``store_timestamp`` in ms); False when the file is full.
        (With the C twin: :meth:`put_keys` of one item; the Python body is kept for the pure-Python
        single-send path, where a one-item batch costs ~1 µs more.)"""
        if _cindex_file is not None:
            return self.put_keys([(key, phy_offset, store_timestamp)]) == 1
        if self.is_write_full():
            return False
        if self.index_count >= self._reserved_count:
            self._reserve_entries(self.index_count + 1)
        buf = self._mm.buf
        key_hash = _index_key_hash_py(key)
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
        slot_value = _SLOT.unpack_from(buf, slot_pos)[0]
        if slot_value <= 0 or slot_value > self.index_count:
            slot_value = 0
        if self.index_count <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp
        diff = 0 if self.begin_timestamp <= 0 else (store_timestamp - self.begin_timestamp) // 1000
        diff = min(max(diff, 0), _INT_MAX)
        entry_pos = INDEX_HEADER_SIZE + self.hash_slot_num * HASH_SLOT_SIZE + self.index_count * INDEX_SIZE
        _ENTRY.pack_into(buf, entry_pos, key_hash, phy_offset, diff, slot_value)
        _SLOT.pack_into(buf, slot_pos, self.index_count)
        if slot_value == 0:
            self.hash_slot_count += 1
        self.index_count += 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        self._write_header()
        return True

    def put_keys(self, items: list[tuple[str, int, int]]) -> int:
        """Index many ``(key, phy_offset, store_timestamp)`` (ms) in order, the header written
        once at the end; returns how many were indexed (fewer when the file fills up, 0 when it
        is full). The C twin writes the same bytes; it declines (None) anything unusual, which
        the Python code then handles (and raises for).

        Raises:
            DiskFullError: no disk space for the entries (nothing written).
        """
        if self.index_count + len(items) > self._reserved_count:  # before the C writer touches the mapping
            self._reserve_entries(self.index_count + len(items))
        if _cindex_file is not None:
            r = _cindex_file.put_keys(self._mm.buf, self.hash_slot_num, self.index_num, self.index_count,
                                      self.hash_slot_count, self.begin_phy_offset, self.begin_timestamp, items)
            if r is not None:
                (n, self.index_count, self.hash_slot_count, self.begin_phy_offset, self.begin_timestamp,
                 self.end_phy_offset, self.end_timestamp) = r
                return n
        return self._put_keys_py(items)

    def _put_keys_py(self, items: list[tuple[str, int, int]]) -> int:
        """Pure-Python twin of ``_cindex_file.put_keys``: every key is hashed before anything is
        written, so a bad key changes neither the file nor the counters."""
        count = self.index_count
        room = self.index_num - count
        if room <= 0 or not items:
            return 0
        if len(items) > room:
            items = items[:room]
        hashes = [_index_key_hash_py(key) for key, _, _ in items]
        buf = self._mm.buf
        slots = self.hash_slot_num
        entries_base = INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE
        slot_unpack, slot_pack, entry_pack = _SLOT.unpack_from, _SLOT.pack_into, _ENTRY.pack_into
        begin_ts = self.begin_timestamp
        new_slots = 0
        for key_hash, (_, phy_offset, store_timestamp) in zip(hashes, items, strict=True):
            slot_pos = INDEX_HEADER_SIZE + (key_hash % slots) * HASH_SLOT_SIZE
            slot_value = slot_unpack(buf, slot_pos)[0]
            if slot_value <= 0 or slot_value > count:
                slot_value = 0
                new_slots += 1
            if count <= 1:
                self.begin_phy_offset = phy_offset
                self.begin_timestamp = begin_ts = store_timestamp
            diff = 0 if begin_ts <= 0 else (store_timestamp - begin_ts) // 1000
            diff = min(max(diff, 0), _INT_MAX)
            entry_pack(buf, entries_base + count * INDEX_SIZE, key_hash, phy_offset, diff, slot_value)
            slot_pack(buf, slot_pos, count)
            count += 1
        self.hash_slot_count += new_slots
        self.index_count = count
        self.end_phy_offset = items[-1][1]
        self.end_timestamp = items[-1][2]
        self._write_header()
        return len(items)

    def is_time_matched(self, begin: int, end: int) -> bool:
        return begin <= self.end_timestamp and end >= self.begin_timestamp

    def select_phy_offset(self, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """CommitLog offsets indexed under ``key`` with a store time in [begin, end] (ms),
        newest first, at most ``max_num``."""
        out: list[int] = []
        buf = self._mm.buf
        key_hash = index_key_hash(key)
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
        count = self.index_count
        nxt = _SLOT.unpack_from(buf, slot_pos)[0]
        if nxt <= 0 or nxt > count or count <= 1:
            return out
        base = INDEX_HEADER_SIZE + self.hash_slot_num * HASH_SLOT_SIZE
        while len(out) < max_num:
            h, phy, diff, prev = _ENTRY.unpack_from(buf, base + nxt * INDEX_SIZE)
            if diff < 0:
                break
            t = self.begin_timestamp + diff * 1000
            if h == key_hash and begin <= t <= end:
                out.append(phy)
            if prev <= 0 or prev > count or prev == nxt or t < begin:
                break
            nxt = prev
        return out

    def flush(self) -> None:
        self._mm.flush()

    def close(self) -> None:
        self._mm.close()

    def destroy(self) -> None:
        self._mm.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass


class _MappedIndex:
    """A whole-file mapping of an index file (its name is not an offset, unlike MappedFile),
    with disk space reserved below :attr:`reserved`: for a new file the first ``fixed`` bytes
    (header and hash slots) and ``reserve_ahead`` more; an existing file reserves from its
    start at its first write (space it already has costs nothing)."""

    def __init__(self, path: str, size: int, fixed: int, reserve_ahead: int) -> None:
        fd, self.reserved, self.buf = map_reserved(path, size, fixed + reserve_ahead)
        self.path = path
        self.size = size
        self.reserve_ahead = reserve_ahead
        self._fd: int | None = fd

    def reserve(self, end: int, written: int = 0) -> None:
        """Disk space for the bytes below ``end`` before they are written (then ``reserve_ahead``
        more; bytes below ``written`` hold data already, see :func:`reserve_ahead`). Raises
        DiskFullError."""
        if end > self.reserved and self._fd is not None:
            self.reserved = reserve_ahead(self._fd, self.path, self.reserved, end, self.size, self.reserve_ahead,
                                          written)

    def flush(self) -> None:
        if not self.buf.closed:
            self.buf.flush()

    def close(self) -> None:
        if not self.buf.closed:
            self.buf.flush()
            self.buf.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@dataclass(slots=True)
class QueryOffsetResult:
    phy_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0


class IndexService:
    """The ``index/`` directory: builds entries for dispatched records and answers queries.

    Args:
        store_path: the ``index`` directory.
        hash_slot_num / index_num: per-file geometry.
        reserve_ahead: bytes of entries each file reserves ahead (:class:`IndexFile`).
    """

    def __init__(self, store_path: str, hash_slot_num: int, index_num: int,
                 reserve_ahead: int = DEFAULT_RESERVE_AHEAD // 8) -> None:
        self.store_path = store_path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.reserve_ahead = reserve_ahead
        self.files: list[IndexFile] = []

    def progress(self) -> tuple[str, int]:
        """(last file's path, its entry count): changes whenever an entry is added."""
        files = self.files
        return (files[-1].path, files[-1].index_count) if files else ("", 0)

    def load(self, last_exit_ok: bool, index_checkpoint_timestamp: int) -> None:
        """Open existing files; after a crash, drop files written past the checkpoint (their
        entries are rebuilt by re-dispatch)."""
        if not os.path.isdir(self.store_path):
            return
        files = []
        for name in sorted(os.listdir(self.store_path)):
            if not name.isdigit():
                continue
            f = IndexFile(os.path.join(self.store_path, name), self.hash_slot_num, self.index_num,
                          reserve_ahead=self.reserve_ahead)
            if not last_exit_ok and f.end_timestamp > index_checkpoint_timestamp:
                log.info("dropping index file %s written after the checkpoint", f.path)
                f.destroy()
                continue
            files.append(f)
        self.files = files

    def _new_file(self) -> IndexFile:
        os.makedirs(self.store_path, exist_ok=True)
        now = _dt.datetime.now()
        while True:
            name = now.strftime("%Y%m%d%H%M%S") + f"{now.microsecond // 1000:03d}"
            path = os.path.join(self.store_path, name)
            if not os.path.exists(path):
                break
            now += _dt.timedelta(milliseconds=1)
        last = self.files[-1] if self.files else None
        f = IndexFile(path, self.hash_slot_num, self.index_num,
                      last.end_phy_offset if last else 0, last.end_timestamp if last else 0, self.reserve_ahead)
        if last is not None:
            last.flush()
        self.files = [*self.files, f]
        return f

    def build_index_many(self, records: Iterable[tuple[str, int, int, int, dict[str, str]]]) -> None:
        """:meth:`build_index` for the records ``(topic, phy_offset, store_timestamp, sys_flag,
        properties)`` of one batch put (ascending offsets), written with :meth:`IndexFile.put_keys`."""
        end = self.files[-1].end_phy_offset if self.files else -1
        items: list[tuple[str, int, int]] = []
        for topic, phy_offset, store_timestamp, sys_flag, properties in records:
            if (sys_flag & MessageSysFlag.TRANSACTION_MASK == MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
                    or phy_offset < end):
                continue
            add_index_items(items, topic, phy_offset, store_timestamp, properties)
        self.put_items(items)

    def put_items(self, items: list[tuple[str, int, int]]) -> None:
        """Index ``(key, phy_offset, store_timestamp)`` items in order, into the last file and new
        ones as files fill up (a disk-full error is logged: the index is an aid)."""
        while items:
            try:
                f = self.files[-1] if self.files else self._new_file()
                n = f.put_keys(items)
                if n == 0:
                    if f.index_count <= 1:  # a fresh file takes nothing: give up rather than spin
                        log.warning("index file %s cannot take entries", f.path)
                        return
                    self._new_file()
            except DiskFullError as exc:  # the index is an aid: the messages are stored and queued
                log.error("index: %s; %d keys from the record at %d not indexed", exc, len(items), items[0][1])
                return
            items = items[n:]

    def build_index(self, topic: str, phy_offset: int, store_timestamp: int, sys_flag: int,
                    properties: dict[str, str]) -> None:
        """Index ``topic#UNIQ_KEY`` and ``topic#key`` per KEYS item; rollback records and
        offsets already indexed are skipped."""
        if sys_flag & MessageSysFlag.TRANSACTION_MASK == MessageSysFlag.TRANSACTION_ROLLBACK_TYPE:
            return
        files = self.files
        if files and phy_offset < files[-1].end_phy_offset:
            return
        items: list[tuple[str, int, int]] = []
        add_index_items(items, topic, phy_offset, store_timestamp, properties)
        self.put_items(items)

    def query_offset(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryOffsetResult:
        """Offsets of ``topic#key`` stored within [begin, end] ms, newest files first."""
        res = QueryOffsetResult()
        files = self.files
        if not files:
            return res
        res.index_last_update_timestamp = files[-1].end_timestamp
        res.index_last_update_phyoffset = files[-1].end_phy_offset
        full_key = build_key(topic, key)
        for f in reversed(files):
            if len(res.phy_offsets) >= max_num:
                break
            if f.is_time_matched(begin, end):
                res.phy_offsets += f.select_phy_offset(full_key, max_num - len(res.phy_offsets), begin, end)
            if f.begin_timestamp < begin:
                break
        return res

    def truncate(self, phy_offset: int) -> None:
        """Forget index data at or beyond CommitLog ``phy_offset`` (torn tail): files starting
        there are deleted; the last file's end offset is pulled back so the records appended
        again from there get indexed. (Stale entries of that file may remain; query callers
        verify keys.)"""
        keep = []
        for f in self.files:
            if f.index_count > 1 and f.begin_phy_offset >= phy_offset:
                f.destroy()
            else:
                keep.append(f)
        self.files = keep
        if keep and keep[-1].end_phy_offset > phy_offset:
            keep[-1].end_phy_offset = phy_offset

    def delete_expired_files(self, phy_min_offset: int) -> int:
        """Delete files (never the last) whose entries all point below ``phy_min_offset``."""
        files = self.files
        gone = [f for f in files[:-1] if f.end_phy_offset < phy_min_offset]
        if gone:
            self.files = [f for f in files if f not in gone]
            for f in gone:
                f.destroy()
        return len(gone)

    def flush(self) -> None:
        for f in list(self.files):
            f.flush()

    def shutdown(self) -> None:
        for f in self.files:
            f.close()

    def all_files(self) -> Iterable[IndexFile]:
        return list(self.files)


