"""The single-send fast path: ``SendProcessor.send`` → ``MessageStore.put_plain`` with the record
built by ``_cbatch_records.encode_single`` (or its twin ``batch_records.encode_single_py``) and written with
its consume-queue entry by ``place_single`` (``finish_batch`` + appends at a queue file's end).

* kernel level: ``_cbatch_records.encode_single`` against ``encode_single_py`` (hypothesis: unicode and
  invalid topics and properties, None and non-str values, ints out of range, odd hosts, tiny
  limits), and both, once finished, against ``commit_log.encode_record_py`` (the record of the
  InnerMessage path); ``place_single`` (C and twin) against ``finish_batch_py``, with writes
  beyond the maps, bad host lengths and cut records refused;
* broker level: random sends through a real ``BrokerController``'s send processor and store, fast
  path (C, or the Python twins) against the InnerMessage path (``fast_put`` off): the same
  answers (codes, remarks, msg ids, queue offsets, response bytes, exceptions), the same arrival
  calls and the same CommitLog, consume-queue and index bytes, over file ends and index files
  filling up; delay levels, transactions, retry/DLQ topics, refusals and bad ints included;
* the cases that must keep the InnerMessage path (SYNC_FLUSH, disk full, shut down, not started).

The C tests are skipped when the extension is not built (or ``ROCKETMQ_PURE_PYTHON`` is set);
the Python twins are tested in every run.
"""

from __future__ import annotations

import asyncio
import os
import types

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocketmq_broker.store import MessageStore, batch_records, commit_log, message_store
from rocketmq_sdk import _speedups
from rocketmq_sdk.protocol.codes import RequestCode
from rocketmq_sdk.protocol.headers import SendMessageRequestHeader
from rocketmq_sdk.protocol.message_codec import encode_properties, pack_host
from rocketmq_sdk.remoting import RemotingCommand
from store_helpers import make_config

_cbatch_records = _speedups.load("rocketmq_broker.store._cbatch_records")
needs_c = pytest.mark.skipif(_cbatch_records is None, reason="_cbatch_records not built or ROCKETMQ_PURE_PYTHON set")

_KEYS = ["UNIQ_KEY", "TAGS", "KEYS", "k", "ключ", "键😀", "", "DELAY", "TRAN_MSG", "\ud800"]
_VALUES = ["v", "", "TagA", "táğ", "😀x", "true", "k1 k2", "x" * 40, None, "a\udfff"]

props_st = st.dictionaries(st.sampled_from(_KEYS), st.one_of(st.sampled_from(_VALUES), st.integers(0, 3)),
                           max_size=6)
topic_st = st.one_of(st.sampled_from(["TopicA", "主题", "", "t" * 127, "t" * 128, "ü" * 64, "x\ud800"]),
                     st.text(max_size=20))
int32_st = st.one_of(st.integers(-2**31, 2**31 - 1), st.sampled_from([2**31, -2**31 - 1, 2**70, True]))
int64_st = st.one_of(st.integers(-2**63, 2**63 - 1), st.sampled_from([2**63, -2**63 - 1, 1.5]))
host_st = st.sampled_from([pack_host("10.0.0.7:50001")[0], pack_host("[::1]:7000")[0], b"", b"x" * 12])


def both(*args):
    """encode_single of C and Python twin: the same result or the same exception type."""
    outs = []
    for fn in (_cbatch_records.encode_single, batch_records.encode_single_py):
        try:
            r = fn(*args)
            outs.append(None if r is None else (bytes(r[0]), r[1], r[2]))
        except Exception as exc:  # noqa: BLE001 - compared
            outs.append(type(exc))
    assert outs[0] == outs[1], args
    return outs[1]


@needs_c
@settings(max_examples=400, deadline=None)
@given(topic=topic_st, body=st.binary(max_size=300), props=props_st, q=int32_st, flag=int32_st, sys_flag=int32_st,
       born_ts=int64_st, born=host_st, store=host_st, reconsume=int32_st,
       max_size=st.sampled_from([0, 100, 2000, 4 * 1024 * 1024, 2**31]),
       file_size=st.sampled_from([200, 400, 4096, 1 << 30]))
def test_c_encode_single_equals_python_twin(topic, body, props, q, flag, sys_flag, born_ts, born, store, reconsume,
                                            max_size, file_size):
    both(topic, body, props, q, flag, sys_flag, born_ts, born, store, reconsume, max_size, file_size)


@needs_c
def test_c_encode_single_type_errors_as_python_twin():
    h = pack_host("10.0.0.7:50001")[0]
    for args in [(b"T", b"b", {}), ("T", b"b", [("k", "v")]), ("T", "body", {}), ("T", b"b", {})]:
        born = 5 if args == ("T", b"b", {}) else h
        assert both(*args, 0, 0, 0, 0, born, h, 0, 100, 4096) is TypeError


def finish(encoded, store: bytes, born_len: int, phy: int, q: int, now: int, finish_fn) -> bytes:
    record, size, tags = encoded
    record = bytearray(record)
    cq, ids, phys = finish_fn(record, [tags], store, born_len, phy, q, now)
    assert phys == [phy] and len(record) == size
    return bytes(record), cq, ids


@settings(max_examples=200, deadline=None)
@given(topic=st.sampled_from(["TopicA", "主题", "t" * 127]), body=st.binary(max_size=300),
       props=st.dictionaries(st.sampled_from([k for k in _KEYS if k != "\ud800"]),
                             st.sampled_from([v for v in _VALUES if v != "a\udfff"]), max_size=6),
       q=st.integers(-2**31, 2**31 - 1), flag=st.integers(-2**31, 2**31 - 1), sys_flag=st.integers(0, 255),
       born_ts=st.integers(-2**63, 2**63 - 1), hosts=st.sampled_from(["10.0.0.7:50001", "[fe80::1:2]:65535"]),
       reconsume=st.integers(-2**31, 2**31 - 1), phy=st.integers(0, 2**50), qo=st.integers(0, 2**40),
       now=st.integers(0, 2**45))
def test_encode_single_finished_equals_the_inner_message_record(topic, body, props, q, flag, sys_flag, born_ts, hosts,
                                                                  reconsume, phy, qo, now):
    """encode_single + finish_batch give encode_record_py's record (the InnerMessage path's) with
    the same consume-queue entry and offset message id."""
    from rocketmq_broker.store.inner_message import tags_string_to_tags_code
    from rocketmq_sdk.protocol.msgid import offset_msg_id_from_packed
    born = store = pack_host(hosts)[0]
    expect = bytes(commit_log.encode_record_py(topic.encode(), body, encode_properties(props).encode(), q, flag,
                                               sys_flag, born_ts, born, store, now, qo, phy, reconsume, 0))
    kernels = [(batch_records.encode_single_py, batch_records.finish_batch_py)]
    if _cbatch_records is not None:
        kernels.append((_cbatch_records.encode_single, _cbatch_records.finish_batch))
    for enc, fin in kernels:
        encoded = enc(topic, body, props, q, flag, sys_flag, born_ts, born, store, reconsume, 4 * 1024 * 1024, 1 << 30)
        assert encoded[2] == tags_string_to_tags_code(props.get("TAGS"))
        record, cq, msg_id = finish(encoded, store, len(born), phy, qo, now, fin)
        assert record == expect
        assert cq == phy.to_bytes(8, "big") + len(expect).to_bytes(4, "big") + encoded[2].to_bytes(8, "big", signed=True)
        assert msg_id == offset_msg_id_from_packed(store, phy)


def _place_both(record, tags, store, born_len, phy, q, now, cl_size, cl_pos, cq_size, cq_pos):
    """place_single of C and Python twin on fresh maps: the same id and maps, or the same error."""
    outs = []
    fns = [batch_records.place_single_py] + ([_cbatch_records.place_single] if _cbatch_records is not None else [])
    for fn in fns:
        cl, cq = bytearray(b"\xee" * cl_size), bytearray(b"\xee" * cq_size)
        try:
            outs.append((fn(record, tags, store, born_len, phy, q, now, cl, cl_pos, cq, cq_pos), bytes(cl), bytes(cq)))
        except ValueError as exc:
            outs.append((ValueError, str(exc), bytes(cl) == b"\xee" * cl_size and bytes(cq) == b"\xee" * cq_size))
    assert all(o == outs[0] for o in outs), outs
    return outs[0]


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=200), tags=st.integers(-2**31, 2**31 - 1), v6=st.booleans(),
       born_len=st.sampled_from([8, 20, 8, 20, 12]), phy=st.integers(0, 2**62), q=st.integers(0, 2**62),
       now=st.integers(0, 2**45), cl_size=st.integers(0, 700), cl_pos=st.integers(-5, 700),
       cq_size=st.sampled_from([0, 19, 20, 40, 200]), cq_pos=st.integers(-5, 200), cut=st.integers(0, 3))
def test_place_single_twins_write_what_finish_batch_writes(body, tags, v6, born_len, phy, q, now, cl_size, cl_pos,
                                                           cq_size, cq_pos, cut):
    """place_single (C and twin) put the finish_batch record and entry at the given positions, or
    refuse (ValueError, maps untouched) a write beyond a map, a bad host length, a cut record."""
    store = pack_host("[::1]:7000" if v6 else "127.0.0.1:10911")[0]
    born = pack_host("10.0.0.7:50001")[0]
    record, size, _ = batch_records.encode_single_py("TopicA", body, {"UNIQ_KEY": "U"}, 1, 0, 0, 5, born, store,
                                                     0, 4096, 1 << 30)
    if cut:
        record = record[:-cut]
    out = _place_both(bytes(record), tags, store, born_len, phy, q, now, cl_size, cl_pos, cq_size, cq_pos)
    ok = (not cut and born_len in (8, 20) and 0 <= cl_pos <= cl_size - size and 0 <= cq_pos <= cq_size - 20)
    assert (out[0] is not ValueError) == ok
    if ok and born_len == len(born):
        finished = bytearray(record)
        cq, msg_id, _ = batch_records.finish_batch_py(finished, [tags], store, born_len, phy, q, now)
        assert out[0] == msg_id
        assert out[1][cl_pos:cl_pos + size] == finished and out[2][cq_pos:cq_pos + 20] == cq
        assert out[1][:cl_pos] + out[1][cl_pos + size:] == b"\xee" * (cl_size - size)
    elif not ok:
        assert out[2] is True  # nothing written


# -- broker level: the send processor over a real store ---------------------------------------------------------

class _Ch:
    remote_addr = "10.0.0.7:50001"


def _files(root: str) -> dict[str, bytes]:
    """The CommitLog, consume-queue and index files under ``root`` (index files by position:
    their names are creation times)."""
    out = {}
    for d, _dirs, names in os.walk(root):
        rel_dir = os.path.relpath(d, root)
        if not rel_dir.startswith(("commitlog", "consumequeue", "index")):
            continue
        for i, name in enumerate(sorted(names)):
            rel = f"index/{i}" if rel_dir.startswith("index") else os.path.join(rel_dir, name)
            with open(os.path.join(d, name), "rb") as f:
                out[rel] = f.read()
    return out


def _request(topic: str, queue_id: int, props: dict, body: bytes, sys_flag: int, flag: int, reconsume: int,
             opaque: int) -> RemotingCommand:
    h = SendMessageRequestHeader(producer_group="pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
                                 queue_id=queue_id, sys_flag=sys_flag, born_timestamp=1_699_999_999_000, flag=flag,
                                 properties=encode_properties(props), reconsume_times=reconsume, unit_mode=False,
                                 max_reconsume_times=2, batch=False, bname="broker-a")
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h.to_v2(), body=body)
    cmd.opaque = opaque
    return RemotingCommand.decode(cmd.encode()[4:])  # as the channel hands it over


def run_sends(root, monkeypatch, mode: str, sends, flush: str = "ASYNC_FLUSH", index_num: int = 8):
    """Send ``sends`` through a BrokerController's send processor on a fresh store (small files);
    mode "old" switches the fast path off, "py" uses the Python twins, "c" the accelerator.
    Returns (answers, arrivals, store files, fast puts taken)."""
    from rocketmq_broker.broker.config import BrokerConfig
    from rocketmq_broker.broker.controller import BrokerController

    async def main():
        cfg = BrokerConfig(store_path_root_dir=str(root / mode), listen_port=0, flush_disk_type=flush,
                           max_message_size=2000)
        b = BrokerController(cfg)
        b.topics.load()
        b.store = b.ctx.store = MessageStore(make_config(root / mode / "store", max_message_size=2000,
                                                         max_index_num=index_num,
                                                         flush_disk_type=b.store.config.flush_disk_type))
        arrivals: list[tuple] = []
        b.store.register_arrival_listener(lambda *a: arrivals.append((*a[:4], dict(a[4] or {}))))
        b.store.start()
        if mode == "old":
            b.send.fast_put = False
        taken = []
        real = b.store.put_plain
        monkeypatch.setattr(b.store, "put_plain", lambda *a: taken.append(real(*a)) or taken[-1])
        answers = []
        try:
            for i, s in enumerate(sends):
                try:
                    resp = b.send.send(_Ch(), _request(*s, opaque=i + 1))
                    if isinstance(resp, asyncio.Future):
                        resp = await resp
                    answers.append((resp.code, resp.remark, dict(resp.ext_fields or {}), resp.encode()))
                except Exception as exc:  # noqa: BLE001 - the dispatcher answers SYSTEM_ERROR with it
                    answers.append((type(exc).__name__, str(exc)))
        finally:
            b.store.shutdown()
        return answers, arrivals, _files(str(root / mode / "store")), [t for t in taken if t is not None]

    with monkeypatch.context() as m:
        fixed = types.SimpleNamespace(time=lambda: 1_700_000_000.5)
        m.setattr(commit_log, "time", fixed)  # store timestamps
        m.setattr("rocketmq_broker.broker.schedule.time", fixed)  # deliver times of delayed messages
        for name in ("encode_single", "finish_batch", "place_single"):
            if mode == "py":
                m.setattr(message_store, name, getattr(batch_records, f"{name}_py"))
            elif mode == "c":
                m.setattr(message_store, name, getattr(_cbatch_records, name))
        return asyncio.run(main())


MODES = ["py"] + (["c"] if _cbatch_records is not None else [])

_PROP_KEYS = ["UNIQ_KEY", "TAGS", "KEYS", "WAIT", "DELAY", "TRAN_MSG", "CLUSTER", "k", "ключ"]
_PROP_VALUES = ["U1", "U2", "TagA", "táğ", "true", "false", "k1 k2", "3", "0", "", "x" * 30]
_plain_props = st.fixed_dictionaries({"UNIQ_KEY": st.sampled_from(["U1", "U2", "7F0000010A2B18B4AAC20000000000"])},
                                     optional={"TAGS": st.sampled_from(["TagA", "táğ", ""]), "WAIT": st.just("true"),
                                               "KEYS": st.sampled_from(["k1", "k1 k2", " ", "ключ"])})
send_st = st.tuples(
    st.sampled_from(["TopicA"] * 6 + ["TopicB", "主题", "%RETRY%g", "SCHEDULE_TOPIC_XXXX", "t" * 128]),
    st.integers(-1, 5),  # queue id (4 queues; -1: random, which both modes draw alike below)
    st.one_of(_plain_props, _plain_props,
              st.dictionaries(st.sampled_from(_PROP_KEYS), st.sampled_from(_PROP_VALUES), max_size=5)),
    st.one_of(st.binary(max_size=400), st.sampled_from([b"", b"y" * 1999, b"z" * 2001])),
    st.sampled_from([0] * 8 + [1, 2, 4, 8, 12, 0x10]),  # COMPRESSED, MULTI_TAGS, PREPARED, COMMIT, ROLLBACK, V6
    st.sampled_from([0] * 5 + [7, -1, 2**31 - 1, 2**31]),  # flag (the last one is out of range)
    st.sampled_from([0, 0, 0, 1, 3]),  # reconsume times (max 2 for %RETRY% topics: then DLQ)
)


def _same_random(monkeypatch):
    import random
    rnd = random.Random(5)
    monkeypatch.setattr("rocketmq_broker.broker.send_processor.random",
                        types.SimpleNamespace(randrange=lambda n: rnd.randrange(n)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(sends=st.lists(send_st, min_size=1, max_size=25))
def test_send_fast_path_equals_inner_message_path(tmp_path_factory, monkeypatch, sends):
    tmp = tmp_path_factory.mktemp("single")
    _same_random(monkeypatch)
    old = run_sends(tmp, monkeypatch, "old", sends)
    assert old[3] == []
    for mode in MODES:
        _same_random(monkeypatch)
        got = run_sends(tmp, monkeypatch, mode, sends)
        assert got[:3] == old[:3], mode
        _fast_taken[0] += len(got[3])
        _fast_taken[1] += len(sends)


_fast_taken = [0, 0]


def test_send_fast_path_was_taken_by_the_random_sends():
    """The property test above exercised the fast path, not only the refusals (runs after it)."""
    if _fast_taken[1]:
        assert _fast_taken[0] > _fast_taken[1] // 20, _fast_taken


def test_send_fast_path_over_file_ends_and_full_index_files(tmp_path, monkeypatch):
    """Many sends: CommitLog files (4 KiB), consume-queue files (10 entries) and index files (7
    keys) roll over; UNIQ_KEY-only messages (the direct index put) and KEYS ones mixed."""
    sends = []
    for i in range(120):
        props = {"UNIQ_KEY": f"U{i:04d}", "TAGS": "TagA", "WAIT": "true"}
        if i % 7 == 3:
            props["KEYS"] = f"k{i} j{i}"
        sends.append(("TopicA", i % 2, props, b"b" * (i * 13 % 400), 0, 0, 0))
    old = run_sends(tmp_path, monkeypatch, "old", sends)
    assert len([f for f in old[2] if f.startswith("commitlog")]) > 5
    assert len([f for f in old[2] if f.startswith("index")]) > 10
    assert len([f for f in old[2] if f.startswith("consumequeue")]) > 10
    for mode in MODES:
        got = run_sends(tmp_path, monkeypatch, mode, sends)
        assert got[:3] == old[:3], mode
        assert len(got[3]) == len(sends), "every plain send takes the fast path"


def test_send_under_sync_flush_keeps_the_inner_message_path(tmp_path, monkeypatch):
    sends = [("TopicA", 0, {"UNIQ_KEY": "U1", "WAIT": w}, b"x", 0, 0, 0) for w in ("true", "false")]
    old = run_sends(tmp_path, monkeypatch, "old", sends, flush="SYNC_FLUSH")
    for mode in MODES:
        got = run_sends(tmp_path, monkeypatch, mode, sends, flush="SYNC_FLUSH")
        assert got[3] == [] and got[:3] == old[:3]


@pytest.mark.parametrize("state", ["disk_full", "shut_down", "not_started"])
def test_put_plain_declines_when_the_store_refuses(tmp_path, state):
    store = MessageStore(make_config(tmp_path / "s"))
    if state != "not_started":
        store.start()
    try:
        if state == "disk_full":
            store.disk_full = True
        elif state == "shut_down":
            store.commit_log.shutdown_writes()
        before = store.get_max_phy_offset()
        assert store.put_plain("TopicA", 0, b"x", {"UNIQ_KEY": "U"}, 0, 0, 1, "10.0.0.7:1", "127.0.0.1:10911",
                               0) is None
        assert store.get_max_phy_offset() == before
        assert store.get_max_offset_in_queue("TopicA", 0) == 0
    finally:
        store.shutdown()


def test_put_plain_declines_what_the_checks_refuse(store):
    ok = ("TopicA", 0, b"x", {"UNIQ_KEY": "U"}, 0, 0, 1, "10.0.0.7:1", "127.0.0.1:10911", 0)
    assert store.put_plain(*ok) == ("7F00000100002A9F0000000000000000", 0)
    bad = [dict(topic=""), dict(topic="t" * 128), dict(sys_flag=4), dict(sys_flag=12), dict(flag=2**31),
           dict(props={"k": "v" * 40000}), dict(body=b"x" * (store.config.max_message_size + 1)),
           dict(born_host="nohost"), dict(props={"k": 5})]
    names = ["topic", "queue_id", "body", "props", "flag", "sys_flag", "born_timestamp", "born_host", "store_host",
             "reconsume_times"]
    end = store.get_max_phy_offset()
    for change in bad:
        args = dict(zip(names, ok, strict=True))
        args.update(change)
        assert store.put_plain(*args.values()) is None, change
    assert store.get_max_phy_offset() == end
    assert store.get_max_offset_in_queue("TopicA", 0) == 1
