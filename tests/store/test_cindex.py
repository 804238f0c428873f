"""The C twin of the IndexFile write path (``rocketmq_broker.store._cindex_file``) against the pure
Python code of ``index_file``: same hashes, same file bytes and counters after the same puts
(colliding slots, stale slot values, timestamps before / long after the file's begin, a file
filling up), same exceptions. The C module is imported directly, so these run (when it is built)
also under ``ROCKETMQ_PURE_PYTHON=1``; the pure-Python path is run explicitly with ``_C`` = None."""

from __future__ import annotations

import importlib
import os
import struct
import tempfile
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocketmq_broker.store import index_file
from rocketmq_broker.store.index_file import INDEX_HEADER_SIZE, IndexFile, IndexService, _index_key_hash_py
from rocketmq_sdk.protocol.javahash import java_string_hash

try:
    cindex = importlib.import_module("rocketmq_broker.store._cindex_file")
except ImportError:  # not built (no compiler): only the pure-Python tests below run
    cindex = None

needs_c = pytest.mark.skipif(cindex is None, reason="rocketmq_broker.store._cindex_file not built")

TS0 = 1_764_000_000_000
_INT64 = 1 << 63


def outcome(fn, *args):
    """``("ok", value)`` or ``("err", exception type, message)``."""
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # noqa: BLE001 - compared between the twins
        return ("err", type(exc), str(exc))


# ---- key hash ---------------------------------------------------------------------------------

KNOWN = [  # (key, abs(Java hashCode)) - values from Java's String.hashCode
    ("", 0),
    ("TagA", 2598919),
    ("Aa", 2112), ("BB", 2112),  # the classic collision
    ("polygenelubricants", 0),  # hashCode == Integer.MIN_VALUE -> 0
    ("\U0001F600", 1772899),  # one non-BMP character = two UTF-16 units 0xD83D 0xDE00
    ("é", 233),
]


@needs_c
@pytest.mark.parametrize(("key", "expected"), KNOWN)
def test_key_hash_known_values(key, expected):
    assert cindex.key_hash(key) == expected
    assert _index_key_hash_py(key) == expected


def test_key_hash_pure_python_known_values():
    for key, expected in KNOWN:
        assert _index_key_hash_py(key) == expected


@needs_c
@settings(max_examples=600, deadline=None)
@given(st.one_of(
    st.text(),  # any code point, lone surrogates included
    st.text(alphabet=st.characters(max_codepoint=0x7F), min_size=20, max_size=400),  # long ASCII
    st.text(alphabet=st.characters(min_codepoint=0x10000), max_size=30),  # non-BMP only
    st.builds(lambda t, u: f"{t}#{u}", st.text(max_size=40), st.text(max_size=40)),
))
def test_key_hash_c_equals_python(key):
    c = outcome(cindex.key_hash, key)
    assert c == outcome(_index_key_hash_py, key)
    if c[0] == "ok":
        h = java_string_hash(key)
        assert c[1] == (0 if h == -(1 << 31) else abs(h))


@needs_c
def test_key_hash_errors_match():
    for bad in ("\ud800", "x\udfffy", "\U0001F600\udc00"):
        c, p = outcome(cindex.key_hash, bad), outcome(_index_key_hash_py, bad)
        assert c[0] == "err" and c[1] is UnicodeEncodeError and c == p
    for bad in (b"abc", b"a" * 30, None, 5):
        c, p = outcome(cindex.key_hash, bad), outcome(_index_key_hash_py, bad)
        assert c[:2] == p[:2] == ("err", TypeError)


@needs_c
def test_str_subclass_hashes_like_str():
    class S(str):
        pass
    key = S("TopicA#" + "x" * 30)
    assert cindex.key_hash(key) == _index_key_hash_py(key) == _index_key_hash_py(str(key))


# ---- put_keys: twin files ---------------------------------------------------------------------

@contextmanager
def twin_files(slots: int, index_num: int, slot_table: bytes = b""):
    """Two fresh index files of the same geometry (and the same initial slot table bytes)."""
    with tempfile.TemporaryDirectory() as d:
        files = []
        for name in ("20260101000000000", "20260101000000001"):
            f = IndexFile(os.path.join(d, name), slots, index_num)
            f._mm.buf[INDEX_HEADER_SIZE:INDEX_HEADER_SIZE + len(slot_table)] = slot_table
            files.append(f)
        try:
            yield files
        finally:
            for f in files:
                f.close()


def state(f: IndexFile) -> tuple:
    return (bytes(f._mm.buf), f.index_count, f.hash_slot_count, f.begin_phy_offset, f.begin_timestamp,
            f.end_phy_offset, f.end_timestamp)


def put_c(f: IndexFile, items) -> int:
    """``IndexFile.put_keys`` through the C module, asserting it did not decline."""
    r = cindex.put_keys(f._mm.buf, f.hash_slot_num, f.index_num, f.index_count, f.hash_slot_count,
                        f.begin_phy_offset, f.begin_timestamp, items)
    assert r is not None, "the C twin declined ordinary input"
    (n, f.index_count, f.hash_slot_count, f.begin_phy_offset, f.begin_timestamp,
     f.end_phy_offset, f.end_timestamp) = r
    return n


keys = st.one_of(st.sampled_from(["", "TopicA#k", "Aa", "BB", "TopicA#\U0001F600", "TopicA#é"]),
                 st.text(st.characters(exclude_categories=("Cs",)), max_size=60),
                 st.text(alphabet="abcXYZ#-0123456789", min_size=25, max_size=80))
timestamps = st.one_of(st.integers(TS0 - 5_000, TS0 + 100_000), st.integers(-(1 << 62), 1 << 62),
                       st.sampled_from([0, -1, 1, TS0 + (1 << 31) * 1000 + 999]))
offsets = st.one_of(st.integers(0, 1 << 40), st.integers(-_INT64, _INT64 - 1))
items_st = st.lists(st.tuples(keys, offsets, timestamps), max_size=12)


@needs_c
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(slots=st.integers(1, 7), index_num=st.integers(2, 24), batches=st.lists(items_st, max_size=8),
       slot_values=st.lists(st.one_of(st.sampled_from([-(1 << 31), -1, 0, 1, 2, 3, 4, 23, 24, 25]),
                                      st.integers(-(1 << 31), (1 << 31) - 1)), max_size=7))
def test_put_keys_same_bytes_and_counters(slots, index_num, batches, slot_values):
    """Random batches (collisions with few slots, stale / negative / out-of-range slot values
    in the initial slot table, the file filling up) give the same bytes and counters."""
    slot_table = struct.pack(f">{len(slot_values)}i", *slot_values)[:slots * 4]
    with twin_files(slots, index_num, slot_table) as (fc, fp):
        assert state(fc) == state(fp)
        for items in batches:
            if items and fc.index_count < fc.index_num:
                n_c = put_c(fc, items)
            else:  # nothing to write: the C twin declines, the Python code answers 0
                assert cindex.put_keys(fc._mm.buf, slots, index_num, fc.index_count, fc.hash_slot_count,
                                       fc.begin_phy_offset, fc.begin_timestamp, items) is None
                n_c = fc._put_keys_py(items)
            n_p = fp._put_keys_py(items)
            assert n_c == n_p == min(len(items), max(0, index_num - fp.index_count + n_p))
            assert state(fc) == state(fp)


@needs_c
@settings(max_examples=150, deadline=None)
@given(keys_=st.lists(keys, min_size=1, max_size=40), ts=timestamps)
def test_put_key_one_by_one_equals_batch(keys_, ts):
    """put_key per key (C, then pure Python) and one put_keys batch write the same file."""
    items = [(k, 100 * i, ts + i) for i, k in enumerate(keys_)]
    with tempfile.TemporaryDirectory() as d:
        files = [IndexFile(os.path.join(d, str(i)), 5, 16) for i in range(3)]
        with pytest.MonkeyPatch.context() as m:
            m.setattr(index_file, "_cindex_file", cindex)
            ok_c = [files[0].put_key(*it) for it in items]
        with pytest.MonkeyPatch.context() as m:
            m.setattr(index_file, "_cindex_file", None)
            ok_p = [files[1].put_key(*it) for it in items]
        n = files[2]._put_keys_py(items)
        assert ok_c == ok_p == [i < 15 for i in range(len(items))] and n == sum(ok_p)
        assert state(files[0]) == state(files[1]) == state(files[2])
        for f in files:
            f.close()


@needs_c
def test_big_batch_and_file_full():
    """More items than the stack buffers (64) and than the room: the rest is left for a new file."""
    items = [(f"T#{i % 37}", i * 10, TS0 + i * 7) for i in range(300)]
    with twin_files(31, 200) as (fc, fp):
        assert put_c(fc, items) == fp._put_keys_py(items) == 199
        assert state(fc) == state(fp) and fc.index_count == 200
        assert fc.put_keys(items) == fp._put_keys_py(items) == 0  # full: C declines, Python says 0
        assert state(fc) == state(fp)
        assert fc.select_phy_offset("T#5", 100, 0, 1 << 62) == [i * 10 for i in range(5, 199, 37)][::-1]


def test_header_on_disk_after_puts(tmp_path):
    """Whichever twin is active, the 40-byte header holds the counters."""
    f = IndexFile(str(tmp_path / "20260101000000000"), 8, 32)
    assert f.put_keys([("T#a", 7, TS0), ("T#b", 9, TS0 + 2500)]) == 2
    assert struct.unpack_from(">qqqqii", f._mm.buf) == (TS0, TS0 + 2500, 7, 9, f.hash_slot_count, 3)
    f.close()


# ---- unusual input: the C twin declines, the Python code decides ------------------------------

@needs_c
def test_c_declines_unusual_input_without_writing():
    buf = bytearray(INDEX_HEADER_SIZE + 4 * 4 + 8 * 20)
    before = bytes(buf)
    ok = [("k", 1, TS0)]
    args = (4, 8, 1, 0, 0, 0)
    assert cindex.put_keys(buf, *args, ok) is not None and bytes(buf) != before
    buf[:] = before
    for items in (
        [["k", 1, TS0]],  # list items
        [("k", 1)],  # wrong arity
        [("k", 1, TS0), (b"k", 1, TS0)],  # bytes key (the first item is not written either)
        [("k", 1, TS0), ("a\ud800", 1, TS0)],  # lone surrogate
        [("k", 1 << 63, TS0)],  # offset beyond int64
        [("k", 1, 1 << 62 + 1)],  # timestamp beyond +-2^62
        [("k", 1.0, TS0)],  # float offset
        ({"k": 1},),  # not a tuple
        (x for x in ok),  # not a list/tuple
        [],
    ):
        assert cindex.put_keys(buf, *args, items) is None
        assert bytes(buf) == before
    for bad_args in ((0, 8, 1, 0, 0, 0), (4, 8, 0, 0, 0, 0), (4, 8, 8, 0, 0, 0), (4, 1 << 31, 1, 0, 0, 0),
                     (4, 8, 1, (1 << 31) - 1, 0, 0), (4, 8, 1, 0, 0, 1 << 62 + 1), (4, 9, 8, 0, 0, 0)):
        assert cindex.put_keys(buf, *bad_args, ok) is None, bad_args  # last: entry 8 is past the buffer
    assert cindex.put_keys(bytes(buf), *args, ok) is None  # read-only buffer
    assert cindex.put_keys(bytearray(40), *args, ok) is None  # slot table past the end
    assert bytes(buf) == before
    with pytest.raises(TypeError):
        cindex.put_keys(buf, *args)


@pytest.mark.parametrize("items", [
    [("k", 1, TS0), ("a\ud800", 2, TS0)],
    [("k", 1, TS0), (b"k", 2, TS0)],
    [("k", 1, TS0), ("m", 1 << 63, TS0)],
    [("k", 1, TS0), ("m", 2.5, TS0)],
])
def test_errors_same_with_and_without_c(monkeypatch, tmp_path, items):
    """Bad input raises the same exception through IndexFile.put_keys with and without the C
    twin, and leaves the same file behind (a bad key before anything is written)."""
    results = []
    for i, mod in enumerate([None, cindex] if cindex is not None else [None]):
        monkeypatch.setattr(index_file, "_cindex_file", mod)
        f = IndexFile(str(tmp_path / f"2026010100000000{i}"), 4, 8)
        f.put_keys([("first", 0, TS0 - 1000)])
        before = state(f)
        results.append((outcome(f.put_keys, items)[:2], state(f)))
        if isinstance(items[1][0], str) and items[1][1] != 1 << 63 and not isinstance(items[1][1], float):
            assert results[-1][1] == before  # a bad key: nothing written
        f.close()
    assert results[0][0][0] == "err"
    assert all(r == results[0] for r in results)


@needs_c
def test_list_items_fall_back_to_python(monkeypatch, tmp_path):
    items = [[f"T#{i}", i, TS0 + i] for i in range(10)]
    monkeypatch.setattr(index_file, "_cindex_file", cindex)
    fc = IndexFile(str(tmp_path / "20260101000000000"), 4, 8)
    fp = IndexFile(str(tmp_path / "20260101000000001"), 4, 8)
    assert fc.put_keys(items) == fp._put_keys_py(items) == 7
    assert state(fc) == state(fp)


# ---- IndexService: the whole directory -----------------------------------------------------------

def _records(n: int):
    out = []
    for i in range(n):
        props = {"UNIQ_KEY": f"UNIQ{i:06d}", "TAGS": "TagA"}
        if i % 3 == 0:
            props["KEYS"] = f"order-{i} common  k\U0001F600{i % 5}"
        out.append(("TopicA", 1000 + i * 150, TS0 + i * 333, 8 if i % 11 == 5 else 0, props))
    return out


def _service_files(monkeypatch, tmp_path, mod, batch: int) -> list[bytes]:
    monkeypatch.setattr(index_file, "_cindex_file", mod)
    monkeypatch.setattr(index_file, "index_key_hash", mod.key_hash if mod else _index_key_hash_py)
    svc = IndexService(str(tmp_path / f"index-{mod is not None}-{batch}"), 7, 23)
    recs = _records(60)
    if batch:
        for i in range(0, len(recs), batch):
            svc.build_index_many(recs[i:i + batch])
    else:
        for r in recs:
            svc.build_index(*r)
    assert svc.query_offset("TopicA", "UNIQ000042", 10, 0, 1 << 62).phy_offsets == [1000 + 42 * 150]
    assert svc.query_offset("TopicA", "k\U0001F6001", 100, 0, 1 << 62).phy_offsets == [
        1000 + i * 150 for i in range(60) if i % 3 == 0 and i % 5 == 1 and i % 11 != 5][::-1]
    out = [bytes(f._mm.buf) for f in svc.all_files()]
    svc.shutdown()
    return out


@pytest.mark.parametrize("batch", [0, 1, 32])
def test_index_service_same_files(monkeypatch, tmp_path, batch):
    """build_index / build_index_many roll over several files; C and pure Python write the same."""
    py = _service_files(monkeypatch, tmp_path, None, batch)
    assert len(py) >= 5
    if cindex is not None:
        assert _service_files(monkeypatch, tmp_path, cindex, batch) == py


def test_closed_file_raises_the_same(monkeypatch, tmp_path):
    """A closed mapping: the C twin cannot get the buffer and declines; the Python code raises."""
    results = []
    for i, mod in enumerate([None, cindex] if cindex is not None else [None]):
        monkeypatch.setattr(index_file, "_cindex_file", mod)
        f = IndexFile(str(tmp_path / f"2026010100000000{i}"), 4, 8)
        f.close()
        results.append((outcome(f.put_keys, [("k", 1, TS0)])[:2], outcome(f.put_key, "k", 1, TS0)[:2]))
    assert results[0] == (("err", ValueError), ("err", ValueError))
    assert all(r == results[0] for r in results)
