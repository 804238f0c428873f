"""The store's C twins: the batch put fast path (``store/batch_records.py`` and ``_cbatch_records.c``
beside it) and the single record (``store/commit_log.py`` and ``_ccommit_log.c``).

* kernel level: ``_cbatch_records.encode_batch`` / ``finish_batch`` and ``_ccommit_log.encode_record``
  against their pure-Python twins
  (hypothesis: random batches with unicode topics and properties, duplicate / malformed / empty
  property items, empty bodies, IPv6 hosts, tiny size limits, corrupted and garbage bodies);
* broker level: ``SendProcessor._send_batch`` over a real store, fast path (C, or the Python
  twins) against the InnerMessage path (fast path switched off): same answers (codes, remarks,
  msg ids, queue offsets) and the same CommitLog, consume-queue and index bytes.

The C tests are skipped when the extension is not built (or ``ROCKETMQ_PURE_PYTHON`` is set);
the Python twins are tested in every run.
"""

from __future__ import annotations

import os
import struct
import types
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocketmq_broker.store import MessageStore, batch_records, commit_log
from rocketmq_sdk import _speedups
from rocketmq_sdk.protocol.message_codec import pack_host
from rocketmq_sdk.remoting import RemotingCommand
from store_helpers import make_config

_cbatch_records = _speedups.load("rocketmq_broker.store._cbatch_records")
_ccommit_log = _speedups.load("rocketmq_broker.store._ccommit_log")
needs_c = pytest.mark.skipif(_cbatch_records is None or _ccommit_log is None,
                             reason="the store's C twins not built or ROCKETMQ_PURE_PYTHON set")

_KEYS = ["UNIQ_KEY", "TAGS", "KEYS", "WAIT", "CLUSTER", "k", "ключ", "键😀", ""]
_VALUES = ["v", "", "TagA", "táğ", "😀x", "true", "false", "a\x01b", "x" * 40]


@st.composite
def prop_texts(draw) -> str:
    """Properties strings as clients send them and worse: duplicates, items without a value or a
    key or a separator, a trailing separator."""
    items = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.integers(0, 9))
        if kind == 0:
            items.append(draw(st.sampled_from(_KEYS)))  # no \x01
        else:
            items.append(f"{draw(st.sampled_from(_KEYS))}\x01{draw(st.sampled_from(_VALUES))}")
    text = "\x02".join(items)
    if items and draw(st.booleans()) and draw(st.booleans()):
        text += "\x02"
    return text


def raw_batch(entries: list[tuple[int, bytes, bytes]]) -> bytes:
    """A docs/protocol.md §4.6 batch body from (flag, body, properties bytes)."""
    out = bytearray()
    for flag, body, props in entries:
        total = 20 + len(body) + 2 + len(props)
        out += struct.pack(">iiiii", total, 0, zlib.crc32(body) & 0x7FFFFFFF, flag, len(body)) + body
        out += struct.pack(">h", len(props)) + props
    return bytes(out)


entries_st = st.lists(st.tuples(st.integers(-2**31, 2**31 - 1), st.binary(max_size=300),
                                prop_texts().map(lambda t: t.encode("utf-8"))), max_size=8)
hosts_st = st.sampled_from(["10.0.0.7:50001", "127.0.0.1:10911", "[::1]:7000", "[fe80::1:2]:65535"])


def corrupt(body: bytes, data) -> bytes:
    """A damaged copy of a batch body: truncated, a byte changed, or bytes appended."""
    how = data.draw(st.integers(0, 2))
    if how == 0 or not body:
        return body + data.draw(st.binary(min_size=1, max_size=30))
    i = data.draw(st.integers(0, len(body) - 1))
    if how == 1:
        return body[:i]
    return body[:i] + bytes([data.draw(st.integers(0, 255))]) + body[i + 1:]


def kernel_args(data, body: bytes) -> tuple:
    topic = data.draw(st.one_of(st.sampled_from([b"TopicA", "主题-😀".encode(), b"", b"t" * 127, b"t" * 128]),
                                st.text(min_size=1, max_size=20).map(lambda t: t.encode("utf-8", "replace"))))
    extra = batch_records.batch_extra(data.draw(prop_texts()), data.draw(st.sampled_from(["DefaultCluster", "",
                                                                                          "集群"])))
    born, store = pack_host(data.draw(hosts_st))[0], pack_host(data.draw(hosts_st))[0]
    max_msg = data.draw(st.sampled_from([4 * 1024 * 1024, 200, 0]))
    file_size = data.draw(st.sampled_from([1 << 30, 4096, 600]))
    return (body, topic, extra, data.draw(st.integers(0, 2**31 - 1)), data.draw(st.integers(-2**31, 2**31 - 1)),
            data.draw(st.integers(-2**63, 2**63 - 1)), born, store, data.draw(st.integers(-2**31, 2**31 - 1)),
            max_msg, file_size)


def finish_both(args: tuple, encoded) -> None:
    """finish_batch in C and in Python on copies of the records: same bytes and results."""
    records, _sizes, tags, _props = encoded
    born_len, store = len(args[6]), args[7]
    a, b = bytearray(records), bytearray(records)
    ra = _cbatch_records.finish_batch(a, tags, store, born_len, 123_456_789, 77, 1_700_000_000_123)
    rb = batch_records.finish_batch_py(b, tags, store, born_len, 123_456_789, 77, 1_700_000_000_123)
    assert ra == rb
    assert a == b


@needs_c
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=entries_st, data=st.data())
def test_c_encode_equals_python_twin(entries, data):
    args = kernel_args(data, raw_batch(entries))
    c = _cbatch_records.encode_batch(*args)
    assert c == batch_records.encode_batch_py(*args)
    if c is not None:
        finish_both(args, c)


@needs_c
@settings(max_examples=400, deadline=None)
@given(entries=entries_st.filter(bool), data=st.data())
def test_c_declines_bad_bodies_as_python_twin(entries, data):
    body = corrupt(raw_batch(entries), data)
    args = kernel_args(data, body)
    assert _cbatch_records.encode_batch(*args) == batch_records.encode_batch_py(*args)


@needs_c
@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=80), data=st.data())
def test_c_declines_garbage_as_python_twin(body, data):
    args = kernel_args(data, body)
    assert _cbatch_records.encode_batch(*args) == batch_records.encode_batch_py(*args)


@needs_c
def test_c_edge_cases():
    extra = batch_records.batch_extra("WAIT\x01true", "DefaultCluster")
    born, store = pack_host("10.0.0.7:50001")[0], pack_host("127.0.0.1:10911")[0]

    def both(body: bytes, **kw):
        args = (body, b"T", extra, 1, 0, 5, born, store, 0, kw.get("max_msg", 4 << 20), kw.get("file_size", 1 << 30))
        c = _cbatch_records.encode_batch(*args)
        assert c == batch_records.encode_batch_py(*args)
        return c

    assert both(b"") is None  # empty batch
    many = "\x02".join(f"k{i}\x01v" for i in range(64)).encode()
    assert both(raw_batch([(0, b"x", many)])) is not None  # 64 items: encoded
    assert both(raw_batch([(0, b"x", many + b"\x02k64\x01v")])) is None  # 65 items: declined
    assert both(raw_batch([(0, b"x", b"\xff\x01v")])) is None  # invalid UTF-8
    assert both(raw_batch([(0, b"x", b"\xed\xa0\x80\x01v")])) is None  # encoded surrogate
    assert both(raw_batch([(0, b"x", ("k\x01" + "v" * 32760).encode())])) is None  # properties > 32767 B
    assert both(raw_batch([(0, b"", b"")])) is not None  # empty body and properties
    assert both(raw_batch([(0, b"x" * 201, b"")]), max_msg=200) is None  # body > max_message_size
    r = both(raw_batch([(0, b"x", "TAGS\x01😀é".encode())]))
    from rocketmq_sdk.protocol.javahash import java_string_hash
    assert r[2] == [java_string_hash("😀é")]
    for n in (7, 8, 9, 1023, 1024, 1025, 76800):  # CRC: table loop (short), zlib.crc32 (from 1 KiB)
        big = bytes(range(256)) * (n // 256) + b"\xa5" * (n % 256)
        r = both(raw_batch([(0, big, b"")]))
        assert struct.unpack_from(">i", r[0], 8)[0] == zlib.crc32(big) & 0x7FFFFFFF
        rec = _ccommit_log.encode_record(b"T", big, b"", 0, 0, 0, 1, born, store, 2, 3, 4, 0, 0)
        assert struct.unpack_from(">i", rec, 8)[0] == zlib.crc32(big) & 0x7FFFFFFF
    with pytest.raises(OverflowError):
        _cbatch_records.encode_batch(b"", b"T", extra, 2**31, 0, 5, born, store, 0, 1, 1)
    with pytest.raises(TypeError):
        _cbatch_records.encode_batch(b"", b"T", (("k", "v"),), 0, 0, 5, born, store, 0, 1, 1)
    with pytest.raises(ValueError):
        _cbatch_records.finish_batch(bytearray(10), [0], store, 8, 0, 0, 0)


@needs_c
def test_c_properties_strings_with_many_distinct_short_keys():
    """Keys and values up to 24 bytes go through a 64-slot string cache: 600 distinct ones
    (colliding slots, replaced entries, same lengths and end bytes) still decode to themselves."""
    extra = batch_records.batch_extra("", "C")
    h = pack_host("10.0.0.7:1")[0]
    for round_ in range(3):
        entries = [(0, b"", f"k{i:03d}{round_}\x01v{i % 7}{'é' * (i % 5)}\x02x{i:02d}\x01{'y' * (i % 25)}".encode())
                   for i in range(600)]
        args = (raw_batch(entries), b"T", extra, 0, 0, 5, h, h, 0, 4 << 20, 1 << 30)
        c = _cbatch_records.encode_batch(*args)
        assert c is not None and c == batch_records.encode_batch_py(*args)


def test_python_twin_records_match_the_codec():
    """The twin's records decode back to the messages (independent of the C code)."""
    from rocketmq_sdk.protocol.message_codec import decode_messages
    extra = batch_records.batch_extra("WAIT\x01true", "C1")
    body = raw_batch([(7, b"abc", b"UNIQ_KEY\x01U1\x02TAGS\x01t"), (0, b"", b"")])
    store = pack_host("127.0.0.1:10911")[0]
    records, sizes, tags, props = batch_records.encode_batch_py(
        body, b"T", extra, 2, 0, 5, pack_host("10.0.0.7:1")[0], store, 3, 4 << 20, 1 << 30)
    cq, ids, phys = batch_records.finish_batch_py(records, tags, store, 8, 1000, 40, 99)
    msgs = decode_messages(bytes(records))
    assert [m.body for m in msgs] == [b"abc", b""]
    assert [m.properties for m in msgs] == props == [{"UNIQ_KEY": "U1", "TAGS": "t", "WAIT": "true", "CLUSTER": "C1"},
                                                     {"WAIT": "true", "CLUSTER": "C1"}]
    assert [m.queue_offset for m in msgs] == [40, 41]
    assert [m.commit_log_offset for m in msgs] == phys == [1000, 1000 + sizes[0]]
    assert [m.store_timestamp for m in msgs] == [99, 99]
    assert [m.flag for m in msgs] == [7, 0] and [m.reconsume_times for m in msgs] == [3, 3]
    assert ids.split(",") == [m.offset_msg_id for m in msgs]
    assert cq == struct.pack(">qiq", 1000, sizes[0], tags[0]) + struct.pack(">qiq", 1000 + sizes[0], sizes[1], 0)


# -- broker level: the send processor over a real store ---------------------------------------------------------

class _Cfg:
    broker_cluster_name = "DefaultCluster"
    broker_addr = "127.0.0.1:10911"


class _Broker:
    config = _Cfg()

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.stats_put = 0

    def put_messages(self, inners):
        return self.store.put_messages_async(inners)


class _Ch:
    remote_addr = "10.0.0.7:50001"


class _Header:
    def __init__(self, properties: str) -> None:
        self.properties = properties


def _files(root: str) -> dict[str, bytes]:
    """Every file under ``root`` (index files by position, their names are creation times)."""
    out = {}
    for d, _dirs, names in os.walk(root):
        for i, name in enumerate(sorted(names)):
            rel = os.path.relpath(os.path.join(d, name), root)
            if rel.startswith("index"):
                rel = f"index/{i}"
            if name in ("abort", "lock", "checkpoint"):
                continue
            with open(os.path.join(d, name), "rb") as f:
                out[rel] = f.read()
    return out


def _answer(resp: RemotingCommand) -> tuple:
    return resp.code, resp.remark, dict(resp.ext_fields or {})


MODES = ["old", "py"] + (["c"] if _cbatch_records is not None else [])


def run_batches(tmp, monkeypatch, mode: str, batches) -> tuple[list, dict[str, bytes]]:
    """Send ``batches`` (body, header properties, topic, queue id, sys flag) through
    ``_send_batch`` on a fresh store; mode "old" switches the fast path off, "py" uses the
    Python twins, "c" the accelerator."""
    from rocketmq_broker.broker.send_processor import SendProcessor
    with monkeypatch.context() as m:
        m.setattr(commit_log, "time", types.SimpleNamespace(time=lambda: 1_700_000_000.5))  # store timestamps
        if mode == "py":
            m.setattr(commit_log, "encode_batch", batch_records.encode_batch_py)
            m.setattr(commit_log, "finish_batch", batch_records.finish_batch_py)
        elif mode == "c":
            m.setattr(commit_log, "encode_batch", _cbatch_records.encode_batch)
            m.setattr(commit_log, "finish_batch", _cbatch_records.finish_batch)
        cfg = make_config(tmp / mode / "store", max_message_size=2000)
        store = MessageStore(cfg)
        store.start()
        if mode == "old":
            m.setattr(store.commit_log, "encode_batch", lambda *a: None)
        arrivals: list[tuple] = []
        store.register_arrival_listener(lambda *a: arrivals.append(a))
        used = []
        real = store.put_encoded_batch_async
        m.setattr(store, "put_encoded_batch_async", lambda b: used.append(1) or real(b))
        try:
            proc = SendProcessor(_Broker(store))
            answers = []
            for body, props, topic, queue_id, sys_flag in batches:
                cmd = RemotingCommand.request(320, {}, body)
                answers.append(_answer(proc._send_batch(cmd, _Header(props), topic, queue_id, sys_flag,
                                                        1_699_999_999_000, 0, _Ch())))
        finally:
            store.shutdown()
        assert (mode == "old") == (not used) or not any(a[0] == 0 for a in answers)
        return answers, arrivals, _files(cfg.store_path_root_dir)


batch_st = st.tuples(
    st.one_of(entries_st.map(raw_batch), st.binary(max_size=40)),
    prop_texts(),
    st.sampled_from(["TopicA", "TopicB", "%RETRY%g"]),
    st.integers(0, 3),
    st.sampled_from([0, 0, 0, 2, 4, 8, 12, 0x10]),  # MULTI_TAGS, PREPARED, COMMIT, ROLLBACK, BORNHOST_V6 bits
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(batches=st.lists(batch_st, min_size=1, max_size=6))
def test_send_batch_fast_path_equals_inner_message_path(tmp_path_factory, monkeypatch, batches):
    tmp = tmp_path_factory.mktemp("b")
    old = run_batches(tmp, monkeypatch, "old", batches)
    for mode in MODES[1:]:
        assert run_batches(tmp, monkeypatch, mode, batches) == old, mode


def test_send_batch_fast_path_equals_inner_message_path_over_file_ends(tmp_path, monkeypatch):
    """Many batches: CommitLog files (4 KiB) and consume-queue files (10 entries) roll over,
    index keys from UNIQ_KEY and KEYS, refusals mixed in."""
    batches = []
    for i in range(40):
        entries = [(j, b"b" * (i % 7 * 10), f"UNIQ_KEY\x01ID{i:04d}{j:02d}\x02KEYS\x01k{i} s\x02TAGS\x01t{j % 3}".encode())
                   for j in range(i % 5 + 1)]
        body = raw_batch(entries)
        if i % 9 == 4:
            body = body[:-1]  # malformed
        batches.append((body, "WAIT\x01true", "TopicA", i % 2, 0))
    answers = None
    for mode in MODES:
        got = run_batches(tmp_path, monkeypatch, mode, batches)
        if answers is None:
            answers = got
            assert sum(a[0] == 0 for a in got[0]) == 36
            assert len(got[1]) == sum(i % 5 + 1 for i in range(40) if i % 9 != 4)  # arrival listener calls
            assert sum(k.startswith("commitlog") for k in got[2]) > 3
        else:
            assert got == answers, mode


# -- single records: encode_record ------------------------------------------------------------------------------

int32 = st.integers(-2**31, 2**31 - 1)
int64 = st.integers(-2**63, 2**63 - 1)


@needs_c
@settings(max_examples=300, deadline=None)
@given(topic=st.binary(max_size=255), body=st.binary(max_size=600), props=st.binary(max_size=300),
       ints32=st.tuples(int32, int32, int32, int32), ints64=st.tuples(int64, int64, int64, int64, int64),
       hosts=st.tuples(hosts_st, hosts_st))
def test_c_encode_record_equals_python_twin(topic, body, props, ints32, ints64, hosts):
    queue_id, flag, sys_flag, reconsume = ints32
    born_ts, store_ts, queue_offset, phy, prepared = ints64
    born, store = pack_host(hosts[0])[0], pack_host(hosts[1])[0]
    args = (topic, body, props, queue_id, flag, sys_flag, born_ts, born, store, store_ts, queue_offset, phy,
            reconsume, prepared)
    assert _ccommit_log.encode_record(*args) == commit_log.encode_record_py(*args)


@needs_c
@pytest.mark.parametrize("i,value,exc", [
    (0, b"t" * 256, IndexError), (2, b"p" * 32768, struct.error), (3, 2**31, struct.error),
    (4, -2**31 - 1, struct.error), (6, 2**63, struct.error), (11, -2**63 - 1, struct.error),
    (12, "1", struct.error), (13, 1.5, struct.error)])
def test_c_encode_record_refuses_as_python_twin(i, value, exc):
    h = pack_host("10.0.0.7:1")[0]
    args = [b"T", b"body", b"", 0, 0, 0, 1, h, h, 2, 3, 4, 0, 0]
    args[i] = value
    for fn in (_ccommit_log.encode_record, commit_log.encode_record_py):
        with pytest.raises(exc):
            fn(*args)


def test_single_puts_use_encode_record(store, monkeypatch):
    """put_message builds its record with ``commit_log.encode_record`` (the C one when built);
    the bytes equal the codec's record."""
    from rocketmq_sdk.protocol.message_codec import decode_message
    from store_helpers import inner
    calls = []
    real = commit_log.encode_record
    monkeypatch.setattr(commit_log, "encode_record", lambda *a: calls.append(a) or real(*a))
    r = store.put_message(inner(body=b"one", tags="T1", keys="k"))
    assert r.is_ok() and len(calls) == 1
    raw = store.commit_log.look_message_by_offset(r.append_message_result.wrote_offset)
    assert raw == commit_log.encode_record_py(*calls[0])
    assert decode_message(raw)[0].body == b"one"


# -- store level: SYNC_FLUSH, refusals --------------------------------------------------------------------------

def _encoded(store: MessageStore, n: int = 3):
    body = raw_batch([(0, b"m%d" % i, f"UNIQ_KEY\x01U{i}".encode()) for i in range(n)])
    return store.commit_log.encode_batch(body, "TopicA", batch_records.batch_extra("WAIT\x01true", "C"), 1, 0, 5,
                                         "10.0.0.7:1", "127.0.0.1:10911", 0)


def test_encoded_batch_under_sync_flush_waits_for_its_fsync(tmp_path):
    import asyncio

    from rocketmq_broker.store import FlushDiskType, PutMessageStatus
    from store_helpers import hold_flushes
    store = MessageStore(make_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout=50))
    store.start()
    release = hold_flushes(store)

    async def main():
        fut = store.put_encoded_batch_async(_encoded(store))
        assert isinstance(fut, asyncio.Future)
        r = await asyncio.wait_for(fut, 2)
        assert r.put_message_status is PutMessageStatus.FLUSH_DISK_TIMEOUT and r.is_ok()  # stored anyway
        release.set()
        r = await asyncio.wait_for(store.put_encoded_batch_async(_encoded(store)), 5)
        ar = r.append_message_result
        assert r.put_message_status is PutMessageStatus.PUT_OK and ar.msg_num == 3 and ar.logics_offset == 3
        assert store.commit_log.flushed_where >= ar.wrote_offset + ar.wrote_bytes

    try:
        asyncio.run(main())
    finally:
        release.set()
        store.shutdown()


def test_encoded_batch_refused_when_the_store_does_not_take_puts(store):
    from rocketmq_broker.store import PutMessageStatus
    batch = _encoded(store)
    store.disk_full = True
    assert store.put_encoded_batch_async(batch).put_message_status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    store.disk_full = False
    store.commit_log.shutdown_writes()
    assert store.put_encoded_batch_async(batch).put_message_status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert store.commit_log.get_max_offset() == 0


def test_encode_batch_declines_what_the_inner_message_path_must_answer(store):
    extra = batch_records.batch_extra("", "C")
    body = raw_batch([(0, b"x", b"")])
    cl = store.commit_log
    assert cl.encode_batch(body, "TopicA", extra, 0, 4, 5, "10.0.0.7:1", "127.0.0.1:1", 0) is None  # PREPARED
    assert cl.encode_batch(body, "TopicA", extra, 0, 0, 5, "nohost", "127.0.0.1:1", 0) is None  # bad born host
    assert cl.encode_batch(body, "TopicA", extra, 2**31, 0, 5, "10.0.0.7:1", "127.0.0.1:1", 0) is None
    assert cl.encode_batch(body, "TopicA", extra, 0, 0, 2**63, "10.0.0.7:1", "127.0.0.1:1", 0) is None
    assert cl.encode_batch(body, "", extra, 0, 0, 5, "10.0.0.7:1", "127.0.0.1:1", 0) is None
    assert cl.encode_batch(body, "TopicA", extra, 0, 0, 5, "10.0.0.7:1", "127.0.0.1:1", 0) is not None


def test_put_encoded_batch_without_batch_dispatcher_dispatches_record_by_record(config):
    """A CommitLog without a batch dispatcher calls its dispatcher once per record, with the
    offsets, sizes, tags codes and properties of the records written."""
    from rocketmq_sdk.protocol.javahash import java_string_hash
    from rocketmq_sdk.protocol.message_codec import decode_messages
    seen = []
    cl = commit_log.CommitLog(config, seen.append)
    cl.load()
    body = raw_batch([(0, b"a", b"TAGS\x01x"), (0, b"bb", b"UNIQ_KEY\x01U")])
    batch = cl.encode_batch(body, "TopicA", batch_records.batch_extra("", "C"), 2, 0, 5, "10.0.0.7:1",
                            "127.0.0.1:10911", 0)
    result, reqs = cl.put_encoded_batch(batch)
    assert seen == reqs and len(reqs) == 2
    msgs = decode_messages(cl.get_message(0, result.append_message_result.wrote_bytes))
    assert [(r.commit_log_offset, r.consume_queue_offset, r.queue_id, r.topic) for r in reqs] == [
        (m.commit_log_offset, m.queue_offset, m.queue_id, m.topic) for m in msgs] == [
        (0, 0, 2, "TopicA"), (reqs[0].msg_size, 1, 2, "TopicA")]
    assert [r.tags_code for r in reqs] == [java_string_hash("x"), 0]
    assert [r.get_properties() for r in reqs] == [m.properties for m in msgs]
    assert result.append_message_result.msg_id == ",".join(m.offset_msg_id for m in msgs)
    cl.shutdown()
