"""The ``checkpoint`` file (docs/protocol.md §5.5): a 4 KiB mapped page holding, big-endian longs,
``physicMsgTimestamp`` @0 (store time of the last flushed CommitLog record),
``logicsMsgTimestamp`` @8 (consume queues) and ``indexMsgTimestamp`` @16 (index files)."""

from __future__ import annotations

import mmap
import os
import struct

from .mapped_file import reserve_range

CHECKPOINT_SIZE = 4096
_TS = struct.Struct(">qqq")


class StoreCheckpoint:
    """Read at start (abnormal recovery start point), written by the flush service.

    Args:
        path: the checkpoint file; created zeroed when missing.

    Raises:
        DiskFullError: no disk space for its page.
    """

    def __init__(self, path: str) -> None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size != CHECKPOINT_SIZE:
                os.ftruncate(fd, CHECKPOINT_SIZE)
            reserve_range(fd, 0, CHECKPOINT_SIZE, path)  # its page is written through the mapping: no SIGBUS
            self._mm = mmap.mmap(fd, CHECKPOINT_SIZE)
        finally:
            os.close(fd)
        self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = _TS.unpack_from(self._mm, 0)

    def get_min_timestamp(self, index_safe: bool = False) -> int:
        """``min(physic, logics) − 3000 ms`` (also bounded by the index time when
        ``index_safe``): records stored before this are known to be flushed everywhere."""
        low = min(self.physic_msg_timestamp, self.logics_msg_timestamp)
        if index_safe:
            low = min(low, self.index_msg_timestamp)
        return max(0, low - 3000)

    def flush(self) -> None:
        _TS.pack_into(self._mm, 0, self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp)
        self._mm.flush()

    def shutdown(self) -> None:
        if not self._mm.closed:
            self.flush()
            self._mm.close()
