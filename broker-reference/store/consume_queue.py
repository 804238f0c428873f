"""ConsumeQueue (docs/protocol.md §5.3): the per topic/queueId index of the CommitLog.

Entry N (20 bytes, big-endian) at byte ``N·20``: ``long commitLogOffset, int size, long
tagsCode``. Files of ``mapped_file_size_consume_queue`` bytes live under
``consumequeue/<topic>/<queueId>/`` and are named by their first byte offset. ``max offset`` is
bytes written / 20 (exclusive); ``min offset`` is the first entry still pointing into the
CommitLog. A queue first written at a non-zero logical offset is pre-filled with blank entries
``(0, Integer.MAX_VALUE, 0)``; valid entries have ``offset >= 0 and size > 0``.
"""

from __future__ import annotations

import logging
import struct

from rocketmq_sdk.protocol.validators import is_valid_name

from .mapped_file import DEFAULT_RESERVE_AHEAD, MappedFile, MappedFileQueue
from .paths import UnsafePathError, safe_join

log = logging.getLogger("rocketmq_broker.store.consume_queue")

CQ_STORE_UNIT_SIZE = 20
CQ_ENTRY = struct.Struct(">qiq")
INT_MAX = 0x7FFFFFFF
BLANK_ENTRY = CQ_ENTRY.pack(0, INT_MAX, 0)


class ConsumeQueue:
    """One logical queue.

    Written only by the store's dispatcher (under the CommitLog append lock or during
    recovery); read from any thread.

    Raises:
        UnsafePathError: ``topic`` is no legal topic name (it would not make a safe directory).

    Args:
        topic / queue_id: the queue.
        root_dir: the ``consumequeue`` directory.
        file_size: bytes per file, a multiple of 20.
        reserve_ahead: disk space reserved ahead of the write position (bytes; see
            :class:`~.mapped_file.MappedFile`).
    """

    def __init__(self, topic: str, queue_id: int, root_dir: str, file_size: int,
                 reserve_ahead: int = DEFAULT_RESERVE_AHEAD // 8) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        if not is_valid_name(topic):
            raise UnsafePathError(f"illegal topic name for a consume queue: {topic[:200]!r}")
        self.mapped_file_queue = MappedFileQueue(safe_join(root_dir, topic, str(int(queue_id))), file_size,
                                                 reserve_ahead)
        self.max_physic_offset = -1  # offset + size of the last entry
        self.min_logic_offset = 0  # bytes

    # -- load / recovery -------------------------------------------------------------------
    def load(self) -> None:
        self.mapped_file_queue.load()

    def recover(self) -> None:
        """Find the end of valid entries in the last three files and cut everything after."""
        files = self.mapped_file_queue.files
        if not files:
            return
        idx = max(0, len(files) - 3)
        process_offset = files[idx].file_from_offset
        while idx < len(files):
            mf = files[idx]
            buf = mf.raw_view()
            pos = 0
            data_end = 0
            while pos < self.file_size:
                if pos + CQ_STORE_UNIT_SIZE > data_end:  # past the written data: a hole reads as zeros,
                    data_end = mf.data_end(pos)  # and is never read through the mapping
                    if pos + CQ_STORE_UNIT_SIZE > data_end:
                        break
                phy, size, _tags = CQ_ENTRY.unpack_from(buf, pos)
                if phy >= 0 and size > 0:
                    pos += CQ_STORE_UNIT_SIZE
                    self.max_physic_offset = phy + size
                else:
                    break
            process_offset = mf.file_from_offset + pos
            if pos < self.file_size:
                break
            idx += 1
        self._truncate_at(process_offset)

    def _truncate_at(self, logic_bytes: int) -> None:
        """Keep entries below byte ``logic_bytes``, zeroing the stale entries of the cut file."""
        mfq = self.mapped_file_queue
        old_end = mfq.get_max_offset()
        mf = mfq.find_mapped_file_by_offset(logic_bytes)
        zero = self.file_size if mf is None else max(0, min(self.file_size, old_end - mf.file_from_offset)
                                                      - (logic_bytes - mf.file_from_offset))
        mfq.truncate_dirty_files(logic_bytes, zero)

    def correct_min_offset(self, phy_min_offset: int) -> None:
        """Set the min offset to the first real entry pointing at or after ``phy_min_offset``
        (RocketMQ ``correctMinOffset``; blank pre-fill entries are skipped)."""
        for mf in self.mapped_file_queue.files:
            data = mf.read_to_end(0) or b""
            for i, (phy, size, _tags) in enumerate(CQ_ENTRY.iter_unpack(data[:len(data) - len(data) % 20])):
                if phy >= phy_min_offset and 0 < size < INT_MAX:
                    self.min_logic_offset = mf.file_from_offset + i * CQ_STORE_UNIT_SIZE
                    return
        self.min_logic_offset = self.mapped_file_queue.get_max_offset()

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """Drop entries pointing at or beyond CommitLog offset ``phy_offset`` (torn tail)."""
        mfq = self.mapped_file_queue
        end = mfq.get_max_offset()
        lo = self.min_logic_offset if self.min_logic_offset < end else end
        start = mfq.files[0].file_from_offset if mfq.files else 0
        lo = max(lo, start)
        # entries are ordered by physical offset (blanks, at the start only, point at 0):
        # binary search for the first entry with phy >= phy_offset
        hi = end
        while lo < hi:
            mid = lo + ((hi - lo) // 40) * 20
            entry = self._entry_at(mid)
            if entry is not None and entry[0] >= phy_offset and entry[1] != INT_MAX:
                hi = mid
            else:
                lo = mid + 20
        if lo < end:
            log.info("consume queue %s-%d: truncating at entry %d (commitlog offset %d)",
                     self.topic, self.queue_id, lo // 20, phy_offset)
            self._truncate_at(lo)
        self.max_physic_offset = -1
        last = self.get_max_offset_in_queue() - 1
        if last >= 0:
            entry = self._entry_at(last * 20)
            if entry is not None:
                self.max_physic_offset = entry[0] + entry[1]
        if self.min_logic_offset > mfq.get_max_offset():
            self.min_logic_offset = mfq.get_max_offset()

    # -- writing (dispatcher) --------------------------------------------------------------
    def put_message_position_info(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """Write the entry for logical offset ``cq_offset``.

        An entry already present (re-dispatch during recovery) is skipped; a gap is filled with
        blank entries so every entry sits at ``cq_offset·20``.

        Raises:
            DiskFullError: no disk space for a new file or the entry (nothing of it written).
        """
        mfq = self.mapped_file_queue
        expect = cq_offset * CQ_STORE_UNIT_SIZE
        current = mfq.get_max_offset()
        if expect < current:
            return True
        first_file = current == 0
        mf = mfq.get_last_mapped_file(expect)
        if first_file and expect:
            self.min_logic_offset = expect
        current = mf.file_from_offset + mf.wrote_position
        while current < expect:  # pre-fill / gap
            if current != 0 and not first_file:
                log.warning("consume queue %s-%d: gap from %d to %d filled with blanks",
                            self.topic, self.queue_id, current // 20, cq_offset)
            first_file = True  # log once
            n = min(expect - current, mf.remaining())
            mf.append(BLANK_ENTRY * (n // CQ_STORE_UNIT_SIZE))
            mf = mfq.get_last_mapped_file(expect)
            current = mf.file_from_offset + mf.wrote_position
        mf.append(CQ_ENTRY.pack(offset, size, tags_code))
        self.max_physic_offset = offset + size
        return True

    def next_entries_file(self, first: int, nbytes: int = CQ_STORE_UNIT_SIZE) -> MappedFile | None:
        """The last file when the entries from logical offset ``first`` (``nbytes`` of them) come
        next in it and fit in its reserved space (the usual case), so they may be written into
        its mapping directly; else None (new queue, gap, re-dispatch, file end, reservation to
        extend: :meth:`put_message_position_info` does it)."""
        mf = self.mapped_file_queue.last_mapped_file()
        if (mf is not None and mf.file_from_offset + mf.wrote_position == first * CQ_STORE_UNIT_SIZE
                and mf.reserved - mf.wrote_position >= nbytes):
            return mf
        return None

    def put_message_position_infos(self, entries: list[tuple[int, int, int, int]]) -> None:
        """Write the entries ``(offset, size, tags_code, cq_offset)`` of consecutive logical
        offsets (a batch put) with one append when they continue the queue inside its last
        file; anything else (gap, re-dispatch, file end) goes entry by entry as above."""
        first = entries[0][3]
        if entries[-1][3] - first == len(entries) - 1:
            pack = CQ_ENTRY.pack
            self.put_packed_entries(b"".join([pack(offset, size, tags_code) for offset, size, tags_code, _ in entries]),
                                    first)
            return
        for offset, size, tags_code, cq_offset in entries:
            self.put_message_position_info(offset, size, tags_code, cq_offset)

    def reserve_for(self, first: int, count: int) -> None:
        """Reserve disk space for ``count`` entries from logical offset ``first`` in the queue's
        last file (if any) before their records are appended (entries past that file's end are
        not covered). Called with the append lock held.

        Raises:
            DiskFullError: no room for them.
        """
        mf = self.mapped_file_queue.last_mapped_file()
        if mf is not None:
            end = (first + count) * CQ_STORE_UNIT_SIZE - mf.file_from_offset
            if end > mf.reserved:
                mf.reserve(min(end, mf.file_size))

    def put_packed_entries(self, packed: bytes, first: int) -> None:
        """Write entries already packed (20 bytes each, :data:`CQ_ENTRY`) for the consecutive
        logical offsets from ``first``: one append when they continue the queue inside its last
        file, else entry by entry (:meth:`put_message_position_info`)."""
        mf = self.next_entries_file(first, len(packed))
        if mf is not None:
            mf.append(packed)
            offset, size, _tags = CQ_ENTRY.unpack_from(packed, len(packed) - CQ_STORE_UNIT_SIZE)
            self.max_physic_offset = offset + size
            return
        for i, (offset, size, tags_code) in enumerate(CQ_ENTRY.iter_unpack(packed)):
            self.put_message_position_info(offset, size, tags_code, first + i)

    # -- reading ---------------------------------------------------------------------------
    def get_min_offset_in_queue(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    def get_max_offset_in_queue(self) -> int:
        return self.mapped_file_queue.get_max_offset() // CQ_STORE_UNIT_SIZE

    def _entry_at(self, logic_bytes: int) -> tuple[int, int, int] | None:
        mf = self.mapped_file_queue.find_mapped_file_by_offset(logic_bytes)
        if mf is None:
            return None
        data = mf.read(logic_bytes - mf.file_from_offset, CQ_STORE_UNIT_SIZE)
        return CQ_ENTRY.unpack(data) if data is not None else None

    def get_entry(self, index: int) -> tuple[int, int, int] | None:
        """``(commitlog offset, size, tags code)`` of logical offset ``index``, or None."""
        if index < self.get_min_offset_in_queue():
            return None
        return self._entry_at(index * CQ_STORE_UNIT_SIZE)

    def get_index_buffer(self, start_index: int, max_bytes: int | None = None) -> bytes | None:
        """Entries from ``start_index`` to the end of written data within its file (at most
        ``max_bytes``), or None when that file does not exist (any more)."""
        offset = start_index * CQ_STORE_UNIT_SIZE
        if offset < self.min_logic_offset:
            return None
        mf: MappedFile | None = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if max_bytes is None:
            return mf.read_to_end(pos)
        size = min(max_bytes - max_bytes % CQ_STORE_UNIT_SIZE, mf.wrote_position - pos)
        return mf.read(pos, size) if size >= 0 else None

    def roll_next_file(self, index: int) -> int:
        """First logical offset of the file after the one holding ``index``."""
        per_file = self.file_size // CQ_STORE_UNIT_SIZE
        return index + per_file - index % per_file

    def delete_expired_files(self, phy_min_offset: int) -> int:
        """Delete leading files (never the last) whose entries all point below CommitLog
        ``phy_min_offset``, then move the min offset; returns the number of files deleted."""
        files = self.mapped_file_queue.files
        count = 0
        for mf in files[:-1]:
            last = mf.read(mf.wrote_position - CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE)
            if last is None:
                break
            phy, _size, _tags = CQ_ENTRY.unpack(last)
            if phy >= phy_min_offset:
                break
            count += 1
        if count:
            self.mapped_file_queue.delete_first_files(count)
        self.correct_min_offset(phy_min_offset)
        return count

    # -- durability / lifecycle ------------------------------------------------------------
    def flush(self) -> None:
        self.mapped_file_queue.flush()

    def shutdown(self) -> None:
        self.mapped_file_queue.shutdown()

    def destroy(self) -> None:
        self.mapped_file_queue.destroy()
        self.max_physic_offset = -1
        self.min_logic_offset = 0
