"""DLedger log entries on disk and in PUSH bodies (dledger-protocol.md §8).

Entry = 48-byte header + body, all big-endian::

    0 magic int32 (1; -1 marks an end-of-file blank)   4 size int32 (48 + bodySize)
    8 index int64     16 term int64     24 pos int64 (absolute byte position in the data files)
    32 channel int32  36 chainCrc int32 40 bodyCrc int32 (both 0 in DLedger 0.3.1.2)
    44 bodySize int32 48 body (one RocketMQ CommitLog message record)

Index record (32 bytes, record k at offset 32·k of the index files)::

    0 magic int32  4 pos int64  12 size int32  16 index int64  24 term int64
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = [
    "BLANK_MAGIC",
    "ENTRY_HEADER_SIZE",
    "ENTRY_MAGIC",
    "INDEX_RECORD_SIZE",
    "DLedgerEntry",
    "EntryFormatError",
    "decode_entry",
    "decode_index_record",
    "encode_index_record",
    "peek_header",
]

ENTRY_MAGIC = 1
BLANK_MAGIC = -1
ENTRY_HEADER_SIZE = 48
INDEX_RECORD_SIZE = 32
MAX_BODY_SIZE = 64 * 1024 * 1024  # bytes; refuses absurd sizes read from disk or from a peer

_HEADER = struct.Struct(">iiqqqiiii")
_INDEX = struct.Struct(">iqiqq")


class EntryFormatError(ValueError):
    """Bytes that are no valid DLedger entry or index record."""


@dataclass(slots=True)
class DLedgerEntry:
    """One log entry (Java ``DLedgerEntry``).

    Attributes:
        index: 0-based log index; term: the leader's term when it was appended.
        pos: absolute byte position in the data files (-1 before the store places it).
        body: the stored RocketMQ message record.
        magic: 1; channel / chain_crc / body_crc: 0 in DLedger 0.3.1.2.
    """

    index: int
    term: int
    pos: int
    body: bytes
    magic: int = ENTRY_MAGIC
    channel: int = 0
    chain_crc: int = 0
    body_crc: int = 0

    @property
    def size(self) -> int:
        """Total entry size in bytes: 48 + len(body)."""
        return ENTRY_HEADER_SIZE + len(self.body)

    def encode(self) -> bytes:
        """The entry as stored in a data file (header + body)."""
        return _HEADER.pack(self.magic, self.size, self.index, self.term, self.pos, self.channel,
                            self.chain_crc, self.body_crc, len(self.body)) + self.body

    def same_as(self, other: DLedgerEntry) -> bool:
        """DLedger's follower comparison: size, magic, index, term, channel, pos and body (not the CRCs)."""
        return (self.size == other.size and self.magic == other.magic and self.index == other.index
                and self.term == other.term and self.channel == other.channel and self.pos == other.pos
                and self.body == other.body)

    def index_record(self) -> bytes:
        """This entry's 32-byte index record."""
        return encode_index_record(self.pos, self.size, self.index, self.term, self.magic)


def decode_entry(buf: bytes | memoryview, offset: int = 0) -> DLedgerEntry:
    """Read the entry at ``buf[offset:]``.

    Raises:
        EntryFormatError: truncated bytes, wrong magic, or a size that disagrees with bodySize.
    """
    if len(buf) - offset < ENTRY_HEADER_SIZE:
        raise EntryFormatError(f"entry header truncated at {offset}")
    magic, size, index, term, pos, channel, chain_crc, body_crc, body_size = _HEADER.unpack_from(buf, offset)
    if magic != ENTRY_MAGIC:
        raise EntryFormatError(f"entry magic {magic} at {offset}")
    if not 0 <= body_size <= MAX_BODY_SIZE or size != ENTRY_HEADER_SIZE + body_size:
        raise EntryFormatError(f"entry size {size} / bodySize {body_size} at {offset}")
    start = offset + ENTRY_HEADER_SIZE
    if len(buf) < start + body_size:
        raise EntryFormatError(f"entry body truncated at {offset}")
    return DLedgerEntry(index, term, pos, bytes(buf[start:start + body_size]), magic, channel, chain_crc, body_crc)


def peek_header(buf: bytes | memoryview, offset: int = 0) -> tuple[int, int]:
    """(magic, size) of the entry or blank at ``buf[offset:]`` (zeros: the end of the log)."""
    return struct.unpack_from(">ii", buf, offset)


def encode_index_record(pos: int, size: int, index: int, term: int, magic: int = ENTRY_MAGIC) -> bytes:
    """One 32-byte index record."""
    return _INDEX.pack(magic, pos, size, index, term)


def decode_index_record(buf: bytes | memoryview, offset: int = 0) -> tuple[int, int, int, int, int]:
    """(magic, pos, size, index, term) of the index record at ``buf[offset:]``.

    Raises:
        EntryFormatError: fewer than 32 bytes.
    """
    if len(buf) - offset < INDEX_RECORD_SIZE:
        raise EntryFormatError(f"index record truncated at {offset}")
    return _INDEX.unpack_from(buf, offset)
