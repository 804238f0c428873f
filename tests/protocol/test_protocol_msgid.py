"""Message ids (docs/protocol.md §4.7): offset message ids and UNIQ_KEY ids."""

from __future__ import annotations

import datetime as dt
import os
import threading
import time

import pytest
from rocketmq_sdk.protocol.msgid import (
    UniqIdGenerator,
    create_offset_msg_id,
    create_uniq_id,
    decode_offset_msg_id,
    decode_uniq_id,
    get_nearly_time_from_id,
    offset_msg_id_from_packed,
)

from tests.conftest import CAPTURE_NAMES, load_capture


def _captured_messages():
    for name in CAPTURE_NAMES:
        for rec in load_capture(name):
            yield from (rec.get("decoded") or {}).get("messages", [])


def test_captured_offset_msg_ids_decode_to_store_host_and_commit_log_offset():
    n = 0
    for m in _captured_messages():
        host, _, port = m["storeHost"].rpartition(":")
        assert decode_offset_msg_id(m["offsetMsgId"]) == (host, int(port), m["physicalOffset"])
        assert create_offset_msg_id(host, int(port), m["physicalOffset"]) == m["offsetMsgId"]
        assert create_offset_msg_id(m["storeHost"], None, m["physicalOffset"]) == m["offsetMsgId"]
        n += 1
    assert n, "the captures hold stored records"


def test_captured_send_responses_carry_offset_msg_ids():
    ids = [r["header"]["extFields"]["msgId"] for r in load_capture("java-producer")
           if r["flag"] & 1 and r.get("request_code") in (310, 320) and r["code"] == 0]
    assert ids
    for joined in ids:
        for mid in joined.split(","):
            ip, port, off = decode_offset_msg_id(mid)
            assert (ip, port) == ("127.0.0.1", 10911) and off >= 0
            assert mid == mid.upper() and len(mid) == 32


def test_offset_msg_id_layout_ipv4_and_ipv6():
    assert create_offset_msg_id("127.0.0.1", 10911, 8697) == "7F00000100002A9F00000000000021F9"
    assert create_offset_msg_id(bytes([127, 0, 0, 1]), 10911, 8697) == "7F00000100002A9F00000000000021F9"
    # the legacy (packed host+port, offset) form used by the codec
    assert offset_msg_id_from_packed(bytes.fromhex("7F00000100002A9F"), 8697) == "7F00000100002A9F00000000000021F9"
    assert create_offset_msg_id(bytes.fromhex("7F00000100002A9F"), 8697) == "7F00000100002A9F00000000000021F9"
    v6 = create_offset_msg_id("::1", 10911, 1)
    assert len(v6) == 56 and decode_offset_msg_id(v6) == ("::1", 10911, 1)
    with pytest.raises(ValueError):
        decode_offset_msg_id("ABCD")
    with pytest.raises(ValueError):
        create_offset_msg_id("not-an-ip", 1, 1)


def test_captured_java_uniq_keys_decode_ip_and_time_since_month_start():
    n = 0
    for m in _captured_messages():
        uid = m["properties"].get("UNIQ_KEY")
        if not uid or not uid.startswith("C0000202"):
            continue
        ip, _pid, delta, _counter = decode_uniq_id(uid)
        assert ip == "192.0.2.2"
        born = dt.datetime.fromtimestamp(m["bornTimestamp"] / 1000, dt.UTC)
        month_start = born.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        # the capture host ran in UTC; the id is made a few ms before bornTimestamp
        assert 0 <= m["bornTimestamp"] - int(month_start.timestamp() * 1000) - delta < 1000
        n += 1
    assert n, "the captures hold stored records"


def test_uniq_id_shape_prefix_and_nearly_time():
    gen = UniqIdGenerator()
    a, b = gen.create(), gen.create()
    assert len(a) == 32 and a == a.upper() and int(a, 16) >= 0
    assert a[:20] == b[:20]  # ip + pid + random: fixed per process
    ip, pid, _delta, _c = decode_uniq_id(a)
    assert pid == os.getpid() & 0xFFFF
    assert (int(b[-4:], 16) - int(a[-4:], 16)) & 0xFFFF == 1
    now = time.time() * 1000
    assert abs(get_nearly_time_from_id(a) - now) < 5000
    with pytest.raises(ValueError):
        get_nearly_time_from_id("00")


def test_more_than_70000_ids_in_one_process_are_unique_and_valid():
    gen = UniqIdGenerator()
    ids = [gen.create() for _ in range(70_500)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 for i in ids)
    counters = {int(i[-4:], 16) for i in ids}
    assert len(counters) == 65536  # the counter wrapped as an unsigned short
    assert all(decode_uniq_id(i)[1] == os.getpid() & 0xFFFF for i in ids[::997])


def test_ids_are_unique_across_threads():
    gen = UniqIdGenerator()
    out: list[list[str]] = [[] for _ in range(4)]

    def work(k: int) -> None:
        out[k].extend(gen.create() for _ in range(5000))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    all_ids = [i for part in out for i in part]
    assert len(all_ids) == 20000 and len(set(all_ids)) == 20000


def test_module_level_create_uniq_id():
    assert create_uniq_id() != create_uniq_id()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_child_gets_a_different_prefix():
    parent_id = create_uniq_id()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(r)
            os.write(w, create_uniq_id().encode())
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        data = os.read(r, 64)
        if not data:
            break
        chunks.append(data)
    os.close(r)
    os.waitpid(pid, 0)
    child_id = b"".join(chunks).decode()
    assert len(child_id) == 32
    assert child_id[:20] != parent_id[:20]
    assert decode_uniq_id(child_id)[1] == pid & 0xFFFF


# -- the C generator of the process-wide ids (_cmsgid.uniq_create) -------------------------------

from rocketmq_sdk.protocol import msgid as msgid_mod  # noqa: E402


@pytest.mark.skipif(msgid_mod._c_uniq_create is None, reason="C accelerator not built or disabled")
def test_c_ids_continue_the_python_generator():
    first = create_uniq_id()  # made or handed over by the Python generator at least once
    ids = [create_uniq_id() for _ in range(70_000)]
    gen = msgid_mod._GENERATOR
    assert len(set(ids)) == len(ids) and all(len(i) == 32 for i in ids)
    assert {i[:20] for i in ids} == {gen._prefix} == {first[:20]}  # ip, pid, random int
    counters = [int(i[-4:], 16) for i in ids]
    assert all((b - a) & 0xFFFF == 1 for a, b in zip(counters, counters[1:], strict=False))  # wraps
    now_delta = (int(time.time() * 1000) - gen._start_ms) & 0xFFFFFFFF
    assert 0 <= now_delta - decode_uniq_id(ids[-1])[2] < 5_000  # ms since the month start
    assert decode_uniq_id(ids[0])[2] <= decode_uniq_id(ids[-1])[2]


@pytest.mark.skipif(msgid_mod._c_uniq_create is None, reason="C accelerator not built or disabled")
def test_the_python_generator_takes_over_at_the_month_end():
    create_uniq_id()
    gen = msgid_mod._GENERATOR
    past = int(time.time() * 1000) - 1
    msgid_mod._c_uniq_configure(gen._prefix, gen._start_ms - 2_000_000_000, past, 7)
    assert msgid_mod._c_uniq_create() is None  # the month is over for the C state
    gen._next_start_ms = past  # and for the generator: it rolls the month
    uid = create_uniq_id()
    assert gen._next_start_ms > past and msgid_mod._c_uniq_create() is not None  # handed back
    assert 0 <= ((int(time.time() * 1000) - gen._start_ms) & 0xFFFFFFFF) - decode_uniq_id(uid)[2] < 5_000
    msgid_mod._c_uniq_configure(None)
    assert msgid_mod._c_uniq_create() is None
    assert len(create_uniq_id()) == 32 and msgid_mod._c_uniq_create() is not None
