"""The DLedger log on disk is byte-identical to what Apache RocketMQ 4.9.8 + DLedger 0.3.1.2 wrote."""

from __future__ import annotations

import base64
import os
import struct

import pytest
from rocketmq_broker.dledger.entry import DLedgerEntry, EntryFormatError, decode_entry
from rocketmq_broker.dledger.ledger import DLedgerLedger, LedgerError

from .golden import replicated_pushes, store_sample, xxd_bytes

FILE_SIZE = 64 * 1024


def golden_entries() -> list[DLedgerEntry]:
    out = []
    for f in replicated_pushes():
        e = f.json["entry"]
        out.append(DLedgerEntry(e["index"], e["term"], e["pos"], base64.b64decode(e["body"])))
    return out


def test_captured_stream_is_the_whole_log():
    entries = golden_entries()
    assert [e.index for e in entries] == list(range(200))
    assert entries[-1].pos == 54416 and entries[-1].size == 274  # sample: last entry of the leader's log


def test_entries_and_index_records_byte_identical_to_golden_files(tmp_path):
    ledger = DLedgerLedger(str(tmp_path / "dledger-n1"), FILE_SIZE)
    ledger.load()
    for e in golden_entries():
        ledger.append(DLedgerEntry(e.index, e.term, e.pos, e.body))
    sample = store_sample()
    data = ledger.data.files[0].read_raw(0, 54690 + 64)
    for ent in sample["entries"]:
        golden = xxd_bytes(ent["xxd"])[:ent["entry_len"]]
        assert data[ent["file_offset"]:ent["file_offset"] + ent["entry_len"]] == golden
    assert data[54690:] == bytes(64)  # the log ends where magic/size read 0
    index = ledger.index.files[0].read_raw(0, 3 * 32)
    for rec in sample["index_entries"]:
        assert index[rec["file_offset"]:rec["file_offset"] + 32].hex() == rec["hex"]
    assert (ledger.begin_index, ledger.end_index, ledger.end_term, ledger.end_pos) == (0, 199, 1, 54690)


def test_leader_append_patches_physical_offset_to_pos_plus_48(tmp_path):
    """The leader builds the record with PHYSICALOFFSET = pos + 48; the result equals Java's bytes."""
    ledger = DLedgerLedger(str(tmp_path / "dledger-n0"), FILE_SIZE)
    ledger.load()
    for e in golden_entries():
        record = bytearray(e.body)
        struct.pack_into(">q", record, 28, 0)
        pos = ledger.next_pos(len(record))
        struct.pack_into(">q", record, 28, pos + 48)
        stored = ledger.append(DLedgerEntry(e.index, e.term, -1, bytes(record)))
        assert stored.encode() == e.encode()


def test_restart_recovers_end_and_committed_index_and_repairs_index(tmp_path):
    base = str(tmp_path / "dledger-n0")
    ledger = DLedgerLedger(base, FILE_SIZE)
    ledger.load()
    for e in golden_entries()[:20]:
        ledger.append(e)
    ledger.update_committed(17)
    ledger.shutdown()
    with open(os.path.join(base, "checkpoint"), encoding="utf-8") as fh:
        assert fh.read() == "committedIndex=17\nendIndex=19\n"  # the sample's form
    # damage index record 5 and leave a half-written entry after the end
    with open(os.path.join(base, "index", "0" * 20), "r+b") as fh:
        fh.seek(5 * 32)
        fh.write(b"\xff" * 32)
    end = golden_entries()[20]
    with open(os.path.join(base, "data", "0" * 20), "r+b") as fh:
        fh.seek(end.pos)
        fh.write(end.encode()[:60])
    again = DLedgerLedger(base, FILE_SIZE)
    again.load()
    assert (again.end_index, again.committed_index, again.end_pos) == (19, 17, end.pos)
    assert again.get(5).encode() == golden_entries()[5].encode()
    assert again.data.files[0].read_raw(end.pos, 60) == bytes(60)  # torn tail zeroed
    assert again.read_committed(golden_entries()[18].pos, 10) is None  # uncommitted bytes are invisible
    assert again.read_committed(golden_entries()[17].pos, 10) is not None
    again.append(end)  # and the log continues at the right place
    assert again.get(20).encode() == end.encode()


def test_truncate_keeps_identical_entry_and_drops_the_tail(tmp_path):
    ledger = DLedgerLedger(str(tmp_path / "dledger-n1"), FILE_SIZE)
    ledger.load()
    entries = golden_entries()
    for e in entries[:10]:
        ledger.append(e)
    assert ledger.truncate(entries[6]) == 6
    assert ledger.end_pos == entries[7].pos
    assert ledger.data.files[0].read_raw(entries[7].pos, entries[9].pos - entries[7].pos) == bytes(
        entries[9].pos - entries[7].pos)
    with pytest.raises(LedgerError):
        ledger.get(7)
    ledger.append(entries[7])
    assert ledger.get(7).encode() == entries[7].encode()


def test_truncate_replaces_a_divergent_entry_and_fills_an_empty_log(tmp_path):
    ledger = DLedgerLedger(str(tmp_path / "dledger-n1"), FILE_SIZE)
    ledger.load()
    entries = golden_entries()
    assert ledger.truncate(entries[0]) == 0  # the empty follower's first entry arrives by TRUNCATE
    for e in entries[1:5]:
        ledger.append(e)
    other = DLedgerEntry(3, 2, entries[3].pos, entries[3].body[:-1] + b"X")  # same place, other term/bytes
    assert ledger.truncate(other) == 3
    assert ledger.get(3).term == 2 and ledger.end_term == 2
    with pytest.raises(LedgerError):
        ledger.append(entries[4])  # pos no longer in line: an entry of the old tail


def test_append_refuses_entries_out_of_line(tmp_path):
    ledger = DLedgerLedger(str(tmp_path / "dledger-n1"), FILE_SIZE)
    ledger.load()
    entries = golden_entries()
    ledger.append(entries[0])
    with pytest.raises(LedgerError):
        ledger.append(entries[2])  # gap
    with pytest.raises(LedgerError):
        ledger.append(DLedgerEntry(1, 1, entries[1].pos + 1, entries[1].body))  # wrong pos
    assert ledger.end_index == 0


def test_entry_rolls_to_next_file_behind_a_blank(tmp_path):
    ledger = DLedgerLedger(str(tmp_path / "dledger-n0"), 4096)
    ledger.load()
    body = bytes(1000)
    ledger.valid_body = lambda body: True
    positions = [ledger.append(DLedgerEntry(i, 1, -1, body)).pos for i in range(5)]
    assert positions == [0, 1048, 2096, 4096, 5144]  # 3 * 1048 + 1048 + 8 > 4096
    raw = ledger.data.files[0].read_raw(3144, 8)
    assert struct.unpack(">ii", raw) == (-1, 4096 - 3144)
    ledger.shutdown()
    again = DLedgerLedger(str(tmp_path / "dledger-n0"), 4096, valid_body=lambda body: True)
    again.load()
    assert (again.end_index, again.end_pos) == (4, 5144 + 1048)


def test_decode_entry_refuses_damaged_bytes():
    good = DLedgerEntry(0, 1, 0, b"abc").encode()
    with pytest.raises(EntryFormatError):
        decode_entry(good[:40])
    with pytest.raises(EntryFormatError):
        decode_entry(b"\0\0\0\2" + good[4:])
    with pytest.raises(EntryFormatError):
        decode_entry(good[:44] + struct.pack(">i", 4) + b"abcd")
