"""The DLedger log of one node on disk (dledger-protocol.md §5, §8; Java ``DLedgerMmapFileStore``).

``<root>/dledger-<selfId>/data/`` holds the entries (48-byte header + message record, at their
absolute ``pos``), ``index/`` one 32-byte record per index, ``checkpoint`` the committed and end
index (properties), ``currterm`` the current term and vote (see :mod:`.member_state`).

Only one writer (the node's loop) calls the mutating methods; readers may call :meth:`get` and
:meth:`read_committed` from other threads.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections.abc import Callable

from rocketmq_sdk.exceptions import FrameError
from rocketmq_sdk.properties import read_properties
from rocketmq_sdk.protocol.message_codec import body_crc, decode_message

from ..store.mapped_file import MappedFile, MappedFileQueue
from .entry import (
    BLANK_MAGIC,
    ENTRY_HEADER_SIZE,
    ENTRY_MAGIC,
    INDEX_RECORD_SIZE,
    DLedgerEntry,
    EntryFormatError,
    decode_entry,
    decode_index_record,
)

__all__ = ["DEFAULT_INDEX_FILE_SIZE", "DLedgerLedger", "LedgerError"]

log = logging.getLogger("rocketmq_broker.dledger.ledger")

DEFAULT_INDEX_FILE_SIZE = INDEX_RECORD_SIZE * 5 * 1024 * 1024  # 160 MiB, as DLedger
BLANK_SIZE = 8  # int magic -1, int remaining length
_BLANK = struct.Struct(">ii")
_ZERO_WINDOW = 8 * 1024 * 1024


def is_message_record(body: bytes) -> bool:
    """Whether ``body`` is exactly one whole CommitLog message record with a correct body CRC:
    recovery's test for a torn last entry (RocketMQ's checkCRCOnRecover)."""
    try:
        msg, end = decode_message(body, decompress=False)
    except (FrameError, ValueError, IndexError):
        return False
    return end == len(body) and msg.body_crc == body_crc(msg.body)


class LedgerError(Exception):
    """An append or truncate that would break the log (DLedger answers such pushes with 406)."""


class DLedgerLedger:
    """Data and index files of one DLedger member.

    Args:
        base_dir: ``<storePathRootDir>/dledger-<selfId>``.
        data_file_size: bytes per data file (``mappedFileSizeCommitLog``).
        index_file_size: bytes per index file (160 MiB; a multiple of 32).
        data_dir: data directory (``storePathDLedgerCommitLog``), default ``<base_dir>/data``.
        valid_body: recovery's check of an entry body (default :func:`is_message_record`); an
            entry failing it ends the log (a torn write).

    Attributes:
        begin_index / end_index / end_term: first and last entry on disk (-1 when empty).
        committed_index: highest index known committed (restored from ``checkpoint``).
    """

    def __init__(self, base_dir: str, data_file_size: int, index_file_size: int = DEFAULT_INDEX_FILE_SIZE,
                 data_dir: str | None = None, valid_body: Callable[[bytes], bool] = is_message_record) -> None:
        if index_file_size % INDEX_RECORD_SIZE or index_file_size <= 0:
            raise ValueError(f"index file size must be a positive multiple of 32, got {index_file_size}")
        if data_file_size < 4096:
            raise ValueError(f"data file size too small: {data_file_size}")
        self.base_dir = base_dir
        self.valid_body = valid_body
        self.data_file_size = data_file_size
        self.data = MappedFileQueue(data_dir or os.path.join(base_dir, "data"), data_file_size)
        self.index = MappedFileQueue(os.path.join(base_dir, "index"), index_file_size)
        self.checkpoint_path = os.path.join(base_dir, "checkpoint")
        self.lock = threading.RLock()
        self.begin_index = -1
        self.end_index = -1
        self.end_term = -1
        self.committed_index = -1
        self.committed_pos = 0  # byte position just after the committed entry

    # -- start-up -------------------------------------------------------------------------
    def load(self) -> None:
        """Map the files, find the end of the log, repair the index and read the checkpoint.

        The data files are walked entry by entry from the first one; the log ends at the first
        zero header or at the first entry that does not continue the log (wrong pos or index,
        bad size): everything from there on is zeroed. Index records are rewritten from the
        first one that disagrees with its entry.
        """
        os.makedirs(self.base_dir, exist_ok=True)
        with self.lock:
            self.data.load()
            self.index.load()
            end_pos = self._recover_data()
            self.data.truncate_dirty_files(end_pos, _ZERO_WINDOW)
            self._truncate_index(self.end_index + 1)
            props = read_properties(self.checkpoint_path) if os.path.exists(self.checkpoint_path) else {}
            try:
                committed = int(props.get("committedIndex", "-1"))
            except ValueError:
                committed = -1
            self._set_committed(min(committed, self.end_index))
            log.info("dledger ledger %s: begin %d end %d (term %d) committed %d", self.base_dir,
                     self.begin_index, self.end_index, self.end_term, self.committed_index)

    def _recover_data(self) -> int:
        """Walk the data files; returns the absolute end position of the valid log."""
        files = self.data.files
        if not files:
            return 0
        expected_index = -1
        end = files[0].file_from_offset
        for mf in files:
            rel = 0
            if mf.file_from_offset != end and expected_index >= 0:
                break  # a missing file in the middle: the log ends here
            view = mf.raw_view()
            while rel + BLANK_SIZE <= mf.file_size and mf.backed(rel, BLANK_SIZE):
                magic, size = struct.unpack_from(">ii", view, rel)
                if magic == 0 and size == 0:
                    return mf.file_from_offset + rel
                if magic == BLANK_MAGIC:
                    if size != mf.file_size - rel:
                        return mf.file_from_offset + rel
                    rel = mf.file_size
                    break
                if magic != ENTRY_MAGIC or size < ENTRY_HEADER_SIZE or rel + size > mf.file_size \
                        or not mf.backed(rel, size):
                    log.warning("dledger ledger: invalid entry header at %d; the log ends there", mf.file_from_offset + rel)
                    return mf.file_from_offset + rel
                try:
                    entry = decode_entry(view, rel) if size == ENTRY_HEADER_SIZE + struct.unpack_from(">i", view, rel + 44)[0] \
                        else None
                except EntryFormatError:
                    entry = None
                pos = mf.file_from_offset + rel
                if entry is None or entry.pos != pos or (expected_index >= 0 and entry.index != expected_index) \
                        or not self.valid_body(entry.body):
                    log.warning("dledger ledger: entry at %d does not continue the log; truncating there", pos)
                    return pos
                if expected_index < 0:
                    self.begin_index = entry.index
                self._repair_index(entry)
                expected_index = entry.index + 1
                self.end_index, self.end_term = entry.index, entry.term
                rel += size
            mf.wrote_position = mf.flushed_position = min(rel, mf.file_size)
            end = mf.file_from_offset + mf.file_size
            if rel < mf.file_size:
                return mf.file_from_offset + rel
        return end

    def _repair_index(self, entry: DLedgerEntry) -> None:
        off = entry.index * INDEX_RECORD_SIZE
        mf = self._index_file(off, create=True)
        rel = off - mf.file_from_offset
        record = entry.index_record()
        if mf.read_raw(rel, INDEX_RECORD_SIZE) != record:
            mf.reserve(rel + INDEX_RECORD_SIZE)
            mf.raw_view()[rel:rel + INDEX_RECORD_SIZE] = record
        mf.wrote_position = mf.flushed_position = rel + INDEX_RECORD_SIZE

    def _index_file(self, offset: int, create: bool) -> MappedFile:
        mf = self.index.find_mapped_file_by_offset(offset)
        while mf is None and create:
            last = self.index.last_mapped_file()
            if last is not None:
                last.wrote_position = last.file_size  # full: the queue creates the next file
            self.index.get_last_mapped_file(offset)
            mf = self.index.find_mapped_file_by_offset(offset)
        if mf is None:
            raise LedgerError(f"no index file for offset {offset}")
        return mf

    def _truncate_index(self, first_gone: int) -> None:
        off = max(0, first_gone) * INDEX_RECORD_SIZE
        if self.index.files:
            self.index.truncate_dirty_files(off, INDEX_RECORD_SIZE * 1024)

    # -- state ----------------------------------------------------------------------------
    @property
    def end_pos(self) -> int:
        """Absolute byte position where the next entry (or end blank) goes."""
        return self.data.get_max_offset()

    def _set_committed(self, index: int) -> None:
        self.committed_index = index
        if index < 0 or index < self.begin_index:
            self.committed_pos = self.data.get_min_offset() if self.data.files else 0
            return
        _, pos, size, _, _ = self._index_record(index)
        self.committed_pos = pos + size

    def update_committed(self, index: int) -> bool:
        """Raise the committed index to ``min(index, end_index)`` (never lowers it); True if it moved."""
        with self.lock:
            index = min(index, self.end_index)
            if index <= self.committed_index:
                return False
            self._set_committed(index)
            return True

    def write_checkpoint(self) -> None:
        """Write ``checkpoint`` (``committedIndex=…`` / ``endIndex=…``), as DLedger every 3 s and at shutdown."""
        text = f"committedIndex={self.committed_index}\nendIndex={self.end_index}\n"
        tmp = self.checkpoint_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, self.checkpoint_path)

    # -- appending ------------------------------------------------------------------------
    def _writable(self, size: int) -> MappedFile:
        """The data file the next ``size``-byte entry goes into; writes the end blank first when
        it does not fit with 8 bytes to spare."""
        mf = self.data.get_last_mapped_file(self.end_pos)
        if size + BLANK_SIZE > mf.remaining():
            mf.append(_BLANK.pack(BLANK_MAGIC, mf.remaining()))
            mf.wrote_position = mf.file_size
            mf = self.data.get_last_mapped_file(0)
        return mf

    def next_pos(self, body_size: int) -> int:
        """Where an entry with a ``body_size``-byte body will be stored (writes an end blank if
        it has to start the next file). The leader builds the message record with
        PHYSICALOFFSET = this + 48."""
        with self.lock:
            mf = self._writable(ENTRY_HEADER_SIZE + body_size)
            return mf.file_from_offset + mf.wrote_position

    def append(self, entry: DLedgerEntry) -> DLedgerEntry:
        """Store ``entry`` as the next one (index = end + 1; ``pos`` -1 means "wherever it goes").

        Raises:
            LedgerError: index or pos out of line (DLedger's follower check), or the entry does
                not fit a data file.
            DiskFullError: no disk space.
        """
        with self.lock:
            if self.end_index >= 0 and entry.index != self.end_index + 1:
                raise LedgerError(f"append index {entry.index}, log ends at {self.end_index}")
            if entry.term < self.end_term:
                raise LedgerError(f"append term {entry.term} below the last entry's term {self.end_term}")
            size = entry.size
            if size + BLANK_SIZE > self.data_file_size:
                raise LedgerError(f"entry of {size} bytes does not fit a data file")
            mf = self._writable(size)
            pos = mf.file_from_offset + mf.wrote_position
            if entry.pos < 0:
                entry.pos = pos
            elif entry.pos != pos:
                raise LedgerError(f"entry {entry.index} pos {entry.pos}, the log's next pos is {pos}")
            mf.append(entry.encode())
            off = entry.index * INDEX_RECORD_SIZE
            imf = self._index_file(off, create=True)
            rel = off - imf.file_from_offset
            if imf.wrote_position != rel:
                imf.set_positions(rel)
            imf.append(entry.index_record())
            if self.begin_index < 0:
                self.begin_index = entry.index
            self.end_index, self.end_term = entry.index, entry.term
            return entry

    def truncate(self, entry: DLedgerEntry) -> int:
        """Make ``entry`` the last one: keep it if an identical entry is stored at its index,
        otherwise cut at its pos and write it. Returns the new end index.

        Raises:
            LedgerError: the entry cannot be placed (pos out of line).
        """
        with self.lock:
            existing = self.get(entry.index) if self.begin_index <= entry.index <= self.end_index else None
            old_end = self.end_pos
            if existing is not None and existing.same_as(entry):
                cut, write = existing.pos + existing.size, False
            else:
                cut, write = entry.pos, True
            if cut > old_end + self.data_file_size or cut < 0:
                raise LedgerError(f"truncate pos {cut} outside the log (end {old_end})")
            self.data.truncate_dirty_files(cut, max(0, old_end - cut) + BLANK_SIZE)
            self._truncate_index(entry.index)
            if write:
                if not self.data.files:
                    self.data.get_last_mapped_file(cut)
                if self.end_pos != cut:
                    raise LedgerError(f"truncate pos {cut} is not where the log ends ({self.end_pos})")
                self.end_index = entry.index - 1 if self.begin_index >= 0 and entry.index > self.begin_index else -1
                if self.end_index < 0:
                    self.begin_index = -1
                self.end_term = -1
                self.append(entry)
            else:
                self._repair_index(entry)
                self.end_index, self.end_term = entry.index, entry.term
            if self.committed_index > self.end_index:
                self._set_committed(self.end_index)
            return self.end_index

    # -- retention ------------------------------------------------------------------------
    def pos_after(self, index: int) -> int:
        """Absolute position just after entry ``index`` (the log's first position when ``index``
        is below the first entry, the end position when above the last)."""
        with self.lock:
            if index < self.begin_index or self.end_index < 0:
                return self.data.get_min_offset() if self.data.files else 0
            if index >= self.end_index:
                return self.end_pos
            _, pos, size, _, _ = self._index_record(index)
            return pos + size

    def delete_first_data_files(self, count: int) -> int:
        """Delete the first ``count`` data files (never the last one) and the index files that
        only hold records of their entries; the first remaining entry becomes the begin index.
        Returns the number of data files deleted. The caller decides which files may go
        (DLedger's CleanSpaceService: expired, committed and replicated ones)."""
        with self.lock:
            count = min(count, len(self.data.files) - 1)
            if count <= 0:
                return 0
            self.data.delete_first_files(count)
            first = self.data.files[0]
            magic, _ = _BLANK.unpack_from(first.read_raw(0, BLANK_SIZE))
            if magic == ENTRY_MAGIC:
                self.begin_index = decode_entry(first.read_raw(0, ENTRY_HEADER_SIZE + struct.unpack_from(
                    ">i", first.read_raw(44, 4))[0])).index
            else:  # only an end blank, or nothing yet: the next entry is the first
                self.begin_index = self.end_index + 1
            keep_from = self.begin_index * INDEX_RECORD_SIZE
            gone = 0
            for imf in self.index.files[:-1]:
                if imf.file_from_offset + imf.file_size > keep_from:
                    break
                gone += 1
            if gone:
                self.index.delete_first_files(gone)
            if self.committed_index < self.begin_index:
                self._set_committed(self.committed_index)
            log.info("dledger ledger %s: deleted %d data and %d index files; log begins at index %d",
                     self.base_dir, count, gone, self.begin_index)
            return count

    # -- reading --------------------------------------------------------------------------
    def _index_record(self, index: int) -> tuple[int, int, int, int, int]:
        off = index * INDEX_RECORD_SIZE
        mf = self.index.find_mapped_file_by_offset(off)
        if mf is None:
            raise LedgerError(f"no index record for {index}")
        rel = off - mf.file_from_offset
        return decode_index_record(mf.read_raw(rel, INDEX_RECORD_SIZE))

    def get(self, index: int) -> DLedgerEntry:
        """The entry at ``index``.

        Raises:
            LedgerError: ``index`` outside [begin, end] or the bytes are not that entry.
        """
        if not self.begin_index <= index <= self.end_index or index < 0:
            raise LedgerError(f"index {index} outside [{self.begin_index}, {self.end_index}]")
        magic, pos, size, idx, _ = self._index_record(index)
        if magic != ENTRY_MAGIC or idx != index:
            raise LedgerError(f"index record {index} is damaged")
        raw = self.read_raw(pos, size)
        if raw is None:
            raise LedgerError(f"entry {index} at {pos} not readable")
        entry = decode_entry(raw)
        if entry.index != index or entry.pos != pos:
            raise LedgerError(f"entry {index} at {pos} does not match its index record")
        return entry

    def read_raw(self, pos: int, size: int) -> bytes | None:
        """``size`` written bytes at absolute ``pos`` (within one file), or None."""
        mf = self.data.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        return mf.read(pos - mf.file_from_offset, size)

    def read_committed(self, pos: int, size: int) -> bytes | None:
        """Like :meth:`read_raw`, but only bytes below the committed position are visible
        (DLedgerCommitLog.getData: consumers never see uncommitted entries)."""
        if pos + size > self.committed_pos:
            return None
        return self.read_raw(pos, size)

    # -- durability -----------------------------------------------------------------------
    def flush(self) -> None:
        self.data.flush()
        self.index.flush()

    def shutdown(self) -> None:
        with self.lock:
            self.flush()
            self.write_checkpoint()
            self.data.shutdown()
            self.index.shutdown()
