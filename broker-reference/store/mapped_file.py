"""Fixed-size memory-mapped files named by their first global offset, and a directory of them.

A :class:`MappedFile` is one file of ``file_size`` bytes whose name is the zero-padded 20-digit
decimal of the global offset of its first byte (``00000000000000000000``,
``00000000001073741824``, ...). It is written strictly sequentially by one writer (the caller
holds the append lock) and read concurrently: readers only see bytes below ``wrote_position``,
which is advanced after the bytes are in place. The file is mapped with :mod:`mmap`: a slice
assignment is a plain ``memcpy`` into the page cache, several times faster than ``os.pwrite``
for small records in CPython; ``flush`` is ``fdatasync`` of the file (which, unlike
``mmap.flush``, releases the GIL) or ``msync`` where ``fdatasync`` is missing.

:class:`MappedFileQueue` is the ``commitlog/`` or ``consumequeue/<topic>/<queueId>/`` directory:
files are created on demand when the last one is full (rolling), looked up by global offset, and
reloaded at start (recovery then sets the real write positions).

Disk space: a file is created sparse at its full logical size (the on-disk format of RocketMQ)
with only its first ``reserve_ahead`` bytes reserved (``posix_fallocate``); each write that would
pass the reserved end reserves the next ``reserve_ahead`` bytes first. A write into a mapped page
with no disk behind it is a SIGBUS that kills the process; reserved pages always have it, so a
full disk shows up as :class:`DiskFullError` (ENOSPC) before the write, which the store turns into
a refused put. Loading reads no page that has nothing behind it either (on a full tmpfs reading
a hole through a mapping is a SIGBUS too): recovery asks :meth:`MappedFile.backed` before it
reads past the written data, and holes read as zeros anyway.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import shutil
import threading

log = logging.getLogger("rocketmq_broker.store.mapped_file")

_PAGE = mmap.PAGESIZE
_HAS_FDATASYNC = hasattr(os, "fdatasync")
_ZERO_CHUNK = bytes(1024 * 1024)
_SEEK_DATA = getattr(os, "SEEK_DATA", None)
_SEEK_HOLE = getattr(os, "SEEK_HOLE", None)


class DiskFullError(OSError):
    """No space for a new store file: the store refuses the write (code 14) instead of mapping
    pages with no disk behind them (a write to such a page is a SIGBUS that kills the process)."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.ENOSPC, message)


_fallocate_unsupported = False

DEFAULT_RESERVE_AHEAD = 8 * 1024 * 1024
"""Bytes reserved ahead of the write position when no setting says otherwise
(``StoreConfig.reserve_ahead_bytes``)."""


def reserve_range(fd: int, offset: int, size: int, path: str) -> None:
    """Reserve disk space for bytes ``[offset, offset + size)`` of the open file ``fd``
    (``posix_fallocate``: the file's size does not shrink, data is not touched), so no page of that
    range can lack backing store when it is written through a mapping. Where the file system cannot
    reserve (EOPNOTSUPP/EINVAL/ENOSYS) nothing happens and a WARNING is logged once.

    Raises:
        DiskFullError: the space is not available (ENOSPC/EDQUOT).
        OSError: any other failure.
    """
    global _fallocate_unsupported
    if _fallocate_unsupported or size <= 0:
        return
    try:
        _fallocate(fd, offset, size)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFullError(f"no space for {size} bytes at {path}: {exc.strerror}") from exc
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
        _fallocate_unsupported = True
        log.warning("the file system of %s cannot reserve space (%s): store files are sparse, "
                    "a full disk may then kill the process", path, exc)


def reserve_ahead(fd: int, path: str, reserved: int, end: int, file_size: int, ahead: int,
                  written: int = 0) -> int:
    """Extend the reservation ``[0, reserved)`` of a mapped file so it covers ``[0, end)`` and
    ``ahead`` bytes more (rounded up to a page, at most ``file_size``); returns the new reserved
    end (file-relative bytes). The free space is checked first: a disk without room for the whole
    new chunk refuses it (the chunk is the headroom left for the broker's other files, and no file
    system is left with a partly made reservation). Bytes below ``written`` hold data already (a
    file loaded at start: its reservation starts at 0): they are reserved again, which costs
    nothing, but need no free space.

    Raises:
        DiskFullError: no room for the chunk; nothing more is reserved.
    """
    if end <= reserved:
        return reserved
    target = min(file_size, -(-(end + ahead) // _PAGE) * _PAGE)
    needed = target - max(reserved, min(written, target))
    free = _free_bytes(path)
    if free < needed:
        raise DiskFullError(f"{free} bytes free at {path}, reserving the next {needed} bytes of it needs more")
    reserve_range(fd, reserved, target - reserved, path)
    return target


def create_reserved(path: str, size: int, reserve: int | None = None) -> int:
    """Create ``path`` with ``size`` bytes (a sparse file) and disk space reserved for its first
    ``reserve`` bytes (all of them when None; :func:`reserve_range`), so no page of that part of
    its mapping can lack backing store; returns the open descriptor.

    Raises:
        DiskFullError: the space is not available (the half-made file is removed).
        OSError: the file cannot be created.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # no inode or directory entry left
            raise DiskFullError(f"cannot create {path}: {exc.strerror}") from exc
        raise
    try:
        reserve_range(fd, 0, size if reserve is None else min(size, reserve), path)
        os.ftruncate(fd, size)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass
        raise
    return fd


def open_or_create_reserved(path: str, size: int, reserve: int | None = None) -> tuple[int, int]:
    """Open the existing file ``path``, or create it with :func:`create_reserved` (also when a
    crash left it empty); returns ``(descriptor, bytes known reserved from the start)``: the
    reservation of a new file, 0 for an existing one (its first write reserves again; reserving
    space a file already has costs nothing).

    Raises:
        DiskFullError: a new file finds no space.
    """
    initial = size if reserve is None else min(size, reserve)
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return create_reserved(path, size, initial), initial
    if os.fstat(fd).st_size:
        return fd, 0
    os.close(fd)  # left empty by a crash at creation
    os.unlink(path)
    return create_reserved(path, size, initial), initial


def map_reserved(path: str, size: int, reserve: int | None = None) -> tuple[int, int, mmap.mmap]:
    """:func:`open_or_create_reserved`, then map the whole file: ``(descriptor, bytes known
    reserved, mapping)``; the descriptor is closed again when the file cannot be mapped.

    Raises:
        DiskFullError: a new file finds no space.
        ValueError: an existing file is not ``size`` bytes long.
        OSError: the file cannot be opened or mapped.
    """
    fd, reserved = open_or_create_reserved(path, size, reserve)
    try:
        actual = os.fstat(fd).st_size
        if actual != size:
            raise ValueError(f"{path} has {actual} bytes, expected {size}")
        return fd, reserved, mmap.mmap(fd, size)
    except BaseException:
        os.close(fd)
        raise


def _free_bytes(path: str) -> int:  # tests replace it to simulate a full disk
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return 1 << 62  # unknown: let the reservation decide


def _fallocate(fd: int, offset: int, size: int) -> None:  # tests replace it to inject ENOSPC
    os.posix_fallocate(fd, offset, size)


def offset_to_file_name(offset: int) -> str:
    """``12345`` → ``"00000000000000012345"`` (RocketMQ ``UtilAll.offset2FileName``)."""
    return f"{offset:020d}"


class MappedFile:
    """One memory-mapped file of a fixed size.

    Disk space is reserved in chunks ahead of the write position: :attr:`reserved` is the end
    (file-relative bytes) of the part known to have space behind it, and every write first
    extends it (:meth:`reserve`) when it would pass it, so a full disk is a :class:`DiskFullError`
    before any byte is written, never a SIGBUS. Writers that bypass :meth:`append` (the C put path
    writing into :attr:`_mm`) call :meth:`reserve` for ``wrote_position + length`` first.

    Args:
        path: file path; its base name must be the 20-digit start offset.
        file_size: size in bytes; a new file is created sparse with this logical size and its
            first ``reserve_ahead`` bytes reserved (:func:`create_reserved`), an existing file
            must already have this size.
        reserve_ahead: bytes reserved beyond the end of each write that passes :attr:`reserved`
            (8 MiB by default; ``StoreConfig.reserve_ahead_bytes``).

    Raises:
        DiskFullError: no disk space for a new file.
        OSError: the file cannot be created or mapped.
        ValueError: an existing file has another size or the name is not a 20-digit offset.
    """

    __slots__ = ("path", "file_size", "file_from_offset", "wrote_position", "flushed_position", "reserved",
                 "reserve_ahead", "_fd", "_mm", "_closed", "_data_lo", "_data_hi")

    def __init__(self, path: str, file_size: int, reserve_ahead: int = DEFAULT_RESERVE_AHEAD) -> None:
        name = os.path.basename(path)
        if len(name) != 20 or not name.isdigit():
            raise ValueError(f"mapped file name must be a 20-digit offset: {path}")
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(name)
        self.reserve_ahead = reserve_ahead
        fd, self.reserved, self._mm = map_reserved(path, file_size, reserve_ahead)
        self._fd = fd
        self._closed = False
        self._data_lo = self._data_hi = 0
        self.wrote_position = 0
        self.flushed_position = 0

    # -- writing (single writer) -----------------------------------------------------------
    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def reserve(self, end: int) -> None:
        """Make sure disk space backs the bytes below file-relative ``end`` (at most
        ``file_size``) before they are written: when ``end`` passes :attr:`reserved`, reserve up
        to ``end + reserve_ahead`` (:func:`reserve_ahead`).

        Raises:
            DiskFullError: no disk space for the bytes up to ``end``; nothing was written.
        """
        if end > self.reserved:
            self.reserved = reserve_ahead(self._fd, self.path, self.reserved, end, self.file_size,
                                          self.reserve_ahead, self.wrote_position)

    def append(self, data) -> int:
        """Write ``data`` at the write position; returns the file-relative position it went to.

        The caller guarantees it fits (``len(data) <= remaining()``).

        Raises:
            DiskFullError: no disk space for it (:meth:`reserve`); nothing was written.
        """
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.reserved:
            self.reserve(end)
        self._mm[pos:end] = data
        self.wrote_position = end
        return pos

    def set_positions(self, pos: int, zero_up_to: int | None = None) -> None:
        """Set the write and flush positions to ``pos`` (recovery/truncation) and zero the bytes
        from ``pos`` up to ``zero_up_to`` (file-relative, exclusive) so stale data beyond the new
        end can never be mistaken for records later."""
        self.wrote_position = pos
        self.flushed_position = pos
        end = min(self.file_size, zero_up_to if zero_up_to is not None else pos)
        p = pos
        while p < end:
            if _SEEK_DATA is not None:  # holes read as zeros: only data regions are looked at
                try:
                    p = os.lseek(self._fd, p, _SEEK_DATA)
                    region_end = min(end, os.lseek(self._fd, p, _SEEK_HOLE))
                except OSError:  # ENXIO: no data from p on
                    return
            else:
                region_end = end
            while p < region_end:
                n = min(len(_ZERO_CHUNK), region_end - p)
                if self._mm[p:p + n].count(0) != n:  # leave untouched zero pages alone
                    self._mm[p:p + n] = _ZERO_CHUNK[:n]
                p += n

    def backed(self, pos: int, size: int = 1) -> bool:
        """Whether the file-relative bytes ``[pos, pos + size)`` lie in one region of written
        data (``SEEK_DATA``/``SEEK_HOLE``; always True where the system cannot tell). Recovery
        asks before reading past the known written data: a hole, or space only reserved, reads
        as zeros, and reading a hole through the mapping of a full tmpfs is a SIGBUS."""
        return pos + size <= self.data_end(pos)

    def data_end(self, pos: int) -> int:
        """End (file-relative) of the region of written data holding ``pos``; ``pos`` itself when
        ``pos`` is in a hole (see :meth:`backed`)."""
        if self._data_lo <= pos < self._data_hi:
            return self._data_hi
        if _SEEK_DATA is None:
            return self.file_size
        try:
            if os.lseek(self._fd, pos, _SEEK_DATA) != pos:
                return pos
            hi = os.lseek(self._fd, pos, _SEEK_HOLE)
        except OSError:  # ENXIO: no data from pos on
            return pos
        self._data_lo, self._data_hi = pos, hi
        return hi

    # -- reading (any thread) --------------------------------------------------------------
    def read(self, pos: int, size: int) -> bytes | None:
        """``size`` bytes at file-relative ``pos``, or None if not entirely written (or closed)."""
        if pos < 0 or size < 0 or pos + size > self.wrote_position:
            return None
        try:
            return self._mm[pos:pos + size]
        except ValueError:  # unmapped by a concurrent delete/shutdown
            return None

    def read_raw(self, pos: int, size: int) -> bytes:
        """Bytes regardless of the write position (recovery scans); clipped at the file end."""
        return self._mm[pos:min(self.file_size, pos + size)]

    def read_to_end(self, pos: int) -> bytes | None:
        """Bytes from ``pos`` to the write position, or None if ``pos`` is beyond it."""
        end = self.wrote_position
        if pos < 0 or pos > end:
            return None
        try:
            return self._mm[pos:end]
        except ValueError:
            return None

    def raw_view(self) -> mmap.mmap:
        """The mapping itself, for struct ``unpack_from`` scans during recovery (no copy)."""
        return self._mm

    # -- durability ------------------------------------------------------------------------
    def flush(self) -> int:
        """Make the written but unflushed range durable; returns the new flushed position."""
        end = self.wrote_position
        start = self.flushed_position
        if end > start and not self._closed:
            if _HAS_FDATASYNC:  # releases the GIL; on Linux it writes back MAP_SHARED pages too
                os.fdatasync(self._fd)
            else:
                aligned = start - start % _PAGE
                self._mm.flush(aligned, end - aligned)
            self.flushed_position = end
        return self.flushed_position

    def last_modified(self) -> float:
        try:
            return os.path.getmtime(self.path)
        except OSError:
            return 0.0

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._mm.close()
        except BufferError:  # an exported buffer is still alive; the OS unmaps at exit
            log.warning("mapping of %s still referenced at close", self.path)
        os.close(self._fd)

    def destroy(self) -> None:
        """Unmap and delete the file."""
        self.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r}, wrote={self.wrote_position}, flushed={self.flushed_position})"


class MappedFileQueue:
    """The files of one directory, ordered by start offset, all ``file_size`` bytes.

    Writers (one at a time, under the owner's lock) use :meth:`get_last_mapped_file`; readers
    use :meth:`find_mapped_file_by_offset` from any thread. The file list is replaced, never
    mutated in place, when files are removed, so readers can hold a snapshot safely.
    """

    def __init__(self, store_path: str, file_size: int, reserve_ahead: int = DEFAULT_RESERVE_AHEAD) -> None:
        self.store_path = store_path
        self.file_size = file_size
        self.reserve_ahead = reserve_ahead
        self._files: list[MappedFile] = []
        self.flushed_where = 0
        self._flush_lock = threading.Lock()

    @property
    def files(self) -> list[MappedFile]:
        return self._files

    def load(self) -> None:
        """Map every 20-digit file of the directory; positions are set to the full size until
        recovery corrects them (as RocketMQ does).

        Raises:
            ValueError: a file does not have ``file_size`` bytes.
        """
        if not os.path.isdir(self.store_path):
            return
        names = sorted(n for n in os.listdir(self.store_path) if len(n) == 20 and n.isdigit())
        files = []
        for name in names:
            mf = MappedFile(os.path.join(self.store_path, name), self.file_size, self.reserve_ahead)
            mf.wrote_position = mf.flushed_position = self.file_size
            files.append(mf)
        self._files = files
        log.info("loaded %d mapped files from %s", len(files), self.store_path)

    # -- writer side -----------------------------------------------------------------------
    def last_mapped_file(self) -> MappedFile | None:
        files = self._files
        return files[-1] if files else None

    def get_last_mapped_file(self, start_offset: int = 0) -> MappedFile:
        """The file to write into: the last one if not full, else a new one after it. With no
        file at all, creates the file containing global offset ``start_offset``.

        Raises:
            DiskFullError: a new file is needed and the disk has no room for it.
        """
        files = self._files
        last = files[-1] if files else None
        if last is not None and not last.is_full():
            return last
        if last is None:
            create_offset = start_offset - start_offset % self.file_size
        else:
            create_offset = last.file_from_offset + self.file_size
        os.makedirs(self.store_path, exist_ok=True)
        free = _free_bytes(self.store_path)
        first = min(self.file_size, self.reserve_ahead)  # what the new file reserves at once
        if free < first:  # checked before rolling, whatever the file system reserves
            raise DiskFullError(f"{free} bytes free at {self.store_path}, a new file reserves {first}")
        mf = MappedFile(os.path.join(self.store_path, offset_to_file_name(create_offset)), self.file_size,
                        self.reserve_ahead)
        if last is None:
            self.flushed_where = create_offset
        self._files = [*files, mf]
        return mf

    # -- reader side -----------------------------------------------------------------------
    def find_mapped_file_by_offset(self, offset: int) -> MappedFile | None:
        """The file holding global ``offset``, or None (deleted or not yet created)."""
        files = self._files
        if not files:
            return None
        first = files[0]
        idx = (offset - first.file_from_offset) // self.file_size
        if 0 <= idx < len(files):
            mf = files[idx]
            if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
                return mf
        for mf in files:  # gaps after deletions: fall back to a scan
            if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
                return mf
        return None

    def get_min_offset(self) -> int:
        """Start offset of the first file, or -1 when there is none."""
        files = self._files
        return files[0].file_from_offset if files else -1

    def get_max_offset(self) -> int:
        """Global offset just after the last written byte (0 when empty)."""
        files = self._files
        if not files:
            return 0
        last = files[-1]
        return last.file_from_offset + last.wrote_position

    # -- durability ------------------------------------------------------------------------
    def flush(self) -> int:
        """Flush every file with unflushed bytes; returns ``flushed_where`` (a global offset)."""
        with self._flush_lock:
            for mf in self._files:
                if mf.flushed_position < mf.wrote_position:
                    mf.flush()
            last = self.last_mapped_file()
            if last is not None:
                self.flushed_where = last.file_from_offset + last.flushed_position
            return self.flushed_where

    # -- truncation / deletion -------------------------------------------------------------
    def truncate_dirty_files(self, offset: int, zero_window: int) -> None:
        """Drop everything at or beyond global ``offset``: later files are deleted, the file
        holding it gets its positions set there and ``zero_window`` bytes zeroed after it."""
        keep = []
        for mf in self._files:
            end = mf.file_from_offset + self.file_size
            if end <= offset:
                keep.append(mf)
            elif offset >= mf.file_from_offset:
                rel = offset - mf.file_from_offset
                mf.set_positions(rel, rel + zero_window)
                keep.append(mf)
            else:
                log.info("deleting dirty file %s beyond offset %d", mf.path, offset)
                mf.destroy()
        self._files = keep
        self.flushed_where = min(self.flushed_where, offset) if keep else 0

    def delete_first_files(self, count: int) -> list[MappedFile]:
        """Remove and destroy the first ``count`` files; returns them."""
        files = self._files
        gone, self._files = files[:count], files[count:]
        for mf in gone:
            mf.destroy()
        return gone

    def destroy(self) -> None:
        for mf in self._files:
            mf.destroy()
        self._files = []
        self.flushed_where = 0
        try:
            os.rmdir(self.store_path)
        except OSError:
            pass

    def shutdown(self) -> None:
        for mf in self._files:
            mf.close()
