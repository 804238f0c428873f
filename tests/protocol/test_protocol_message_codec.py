"""Message codecs (docs/protocol.md §4.1, §4.5, §4.6) against every stored record and batch in the captures."""

from __future__ import annotations

import base64
import zlib

import pytest
from rocketmq_sdk.exceptions import FrameError
from rocketmq_sdk.protocol.codes import MessageSysFlag
from rocketmq_sdk.protocol.message import Message, MessageExt
from rocketmq_sdk.protocol.message_codec import (
    BatchEntry,
    body_crc,
    decode_batch,
    decode_batch_messages,
    decode_message,
    decode_messages,
    decode_properties,
    encode_batch,
    encode_message_ext,
    encode_properties,
    encode_stored_message,
    pack_host,
    store_timestamp_pos,
)

from tests.conftest import CAPTURE_NAMES, load_capture

_FIELDS = {  # capture key -> MessageExt attribute
    "totalSize": "store_size", "bodyCRC": "body_crc", "queueId": "queue_id", "flag": "flag",
    "queueOffset": "queue_offset", "physicalOffset": "commit_log_offset", "sysFlag": "sys_flag",
    "bornTimestamp": "born_timestamp", "bornHost": "born_host", "storeTimestamp": "store_timestamp",
    "storeHost": "store_host", "reconsumeTimes": "reconsume_times",
    "preparedTransactionOffset": "prepared_transaction_offset", "topic": "topic",
    "properties": "properties", "offsetMsgId": "offset_msg_id",
}


def _message_bodies(name: str):
    for rec in load_capture(name):
        msgs = (rec.get("decoded") or {}).get("messages")
        if msgs:
            yield rec, base64.b64decode(rec["body_b64"]), msgs


def test_captures_hold_165_stored_records():
    total = sum(len(msgs) for name in CAPTURE_NAMES for _rec, _raw, msgs in _message_bodies(name))
    assert total == 165


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_decode_messages_matches_every_captured_field_and_body(name):
    for rec, raw, expected in _message_bodies(name):
        got = decode_messages(raw)
        assert len(got) == len(expected), rec["seq"]
        for m, exp in zip(got, expected, strict=True):
            for key, attr in _FIELDS.items():
                assert getattr(m, attr) == exp[key], (rec["seq"], key)
            assert m.msg_id == exp["properties"].get("UNIQ_KEY", exp["offsetMsgId"])
            assert body_crc(_raw_body(raw, exp)) == exp["bodyCRC"]
            if exp.get("body_is_inflated"):
                assert len(m.body) == exp["inflatedBodyLength"]
                assert m.body.decode().startswith(exp["body_text"])
            elif "body_text" in exp:
                assert m.body == exp["body_text"].encode("utf-8")
            else:
                assert m.body == base64.b64decode(exp["body_b64"])


def _raw_body(raw: bytes, exp: dict) -> bytes:
    """The stored (possibly compressed) body bytes of one record, found by its commit log offset."""
    pos = 0
    while pos < len(raw):
        rec, nxt = decode_message(raw, pos, decompress=False)
        if rec.commit_log_offset == exp["physicalOffset"]:
            return rec.body
        pos = nxt
    raise AssertionError("record not found")


def _raw_properties(m: MessageExt, raw: bytes, pos: int) -> bytes:
    hosts = (20 if m.sys_flag & 0x10 else 8) + (20 if m.sys_flag & 0x20 else 8)
    p = pos + 48 + hosts + 8 + 16 + len(m.body) + 1 + len(m.topic.encode()) + 2
    return raw[p:pos + m.store_size]


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_reencoding_every_captured_record_gives_the_same_bytes(name):
    for _rec, raw, _expected in _message_bodies(name):
        pos, out = 0, bytearray()
        while pos < len(raw):
            m, nxt = decode_message(raw, pos, decompress=False)
            props = _raw_properties(m, raw, pos)
            trailing = props.endswith(b"\x02")
            if encode_properties(m.properties, trailing_separator=trailing).encode() == props:
                out += encode_message_ext(m, trailing_separator=trailing)
            else:
                # batch records: entry properties + batch properties, so WAIT appears twice
                assert props.count(b"WAIT\x01") == 2
                born, _ = pack_host(m.born_host)
                store, _ = pack_host(m.store_host)
                out += encode_stored_message(
                    topic=m.topic.encode(), body=m.body, properties=props, queue_id=m.queue_id, flag=m.flag,
                    sys_flag=m.sys_flag, born_timestamp=m.born_timestamp, born_host=born, store_host=store,
                    store_timestamp=m.store_timestamp, queue_offset=m.queue_offset,
                    physical_offset=m.commit_log_offset, reconsume_times=m.reconsume_times,
                    prepared_transaction_offset=m.prepared_transaction_offset)
            pos = nxt
        assert bytes(out) == raw


def test_decode_messages_without_decompression_keeps_stored_bytes():
    for name in ("java-push-consumer-broadcast", "cpp-client-pull-consumer"):
        for _rec, raw, expected in _message_bodies(name):
            for m, exp in zip(decode_messages(raw, decompress=False), expected, strict=True):
                if exp["sysFlag"] & MessageSysFlag.COMPRESSED:
                    assert len(m.body) == exp["bodyLength"] and zlib.decompress(m.body).startswith(b"")


def test_ipv6_hosts_roundtrip_and_set_the_v6_flags():
    m = MessageExt(topic="T6", body=b"payload", queue_id=1, flag=3, queue_offset=9, commit_log_offset=4096,
                   born_timestamp=1, born_host="[2001:db8::1]:40000", store_timestamp=2,
                   store_host="[::1]:10911", properties={"TAGS": "x"})
    rec = encode_message_ext(m)
    assert len(rec) == 91 + 24 + len(b"payload") + 2 + len("TAGS\x01x")
    got, end = decode_message(rec)
    assert end == len(rec)
    assert got.sys_flag & (MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6) == 0x30
    assert got.born_host == "[2001:db8::1]:40000" and got.store_host == "[::1]:10911"
    assert got.offset_msg_id == "00000000000000000000000000000001" + "00002A9F" + "0000000000001000"
    assert len(got.offset_msg_id) == 56
    assert store_timestamp_pos(got.sys_flag) == 48 + 20
    assert got.body_crc == zlib.crc32(b"payload") & 0x7FFFFFFF


def test_encode_stored_message_lays_out_the_fixed_fields():
    born, _ = pack_host("10.0.0.1:1234")
    store, _ = pack_host("127.0.0.1:10911")
    rec = encode_stored_message(topic=b"T", body=b"abc", properties=b"", queue_id=2, flag=7, sys_flag=0,
                                born_timestamp=11, born_host=born, store_host=store, store_timestamp=12,
                                queue_offset=5, physical_offset=99)
    assert len(rec) == 91 + 3 + 1
    assert rec[4:8] == bytes.fromhex("DAA320A7")
    assert int.from_bytes(rec[20:28], "big") == 5 and int.from_bytes(rec[28:36], "big") == 99
    assert rec[48:52] == bytes([10, 0, 0, 1])
    m, _ = decode_message(rec)
    assert (m.topic, m.body, m.properties, m.flag, m.born_host) == ("T", b"abc", {}, 7, "10.0.0.1:1234")


def test_compressed_body_is_inflated():
    body = b"x" * 5000
    m = MessageExt(topic="T", body=zlib.compress(body, 5), sys_flag=0x301, born_host="1.2.3.4:5",
                   store_host="1.2.3.4:6")
    got = decode_messages(bytes(encode_message_ext(m)))[0]
    assert got.body == body and got.sys_flag == 0x301


@pytest.mark.parametrize("mutate", ["magic", "truncate", "total"])
def test_malformed_records_raise_frame_error(mutate):
    rec = bytearray(encode_message_ext(MessageExt(topic="T", body=b"b", born_host="1.1.1.1:1",
                                                  store_host="1.1.1.1:2")))
    if mutate == "magic":
        rec[4:8] = b"\0\0\0\0"
    elif mutate == "truncate":
        rec = rec[:-3]
    else:
        rec[0:4] = (len(rec) + 5).to_bytes(4, "big")
    with pytest.raises(FrameError):
        decode_messages(bytes(rec))


# --- properties ---------------------------------------------------------------------------------

def test_properties_roundtrip_and_tolerance():
    props = {"KEYS": "a b", "UNIQ_KEY": "X", "userProp": "值"}
    text = encode_properties(props)
    assert text == "KEYS\x01a b\x02UNIQ_KEY\x01X\x02userProp\x01值"
    assert decode_properties(text) == props
    assert encode_properties(props, trailing_separator=True) == text + "\x02"
    assert decode_properties(text + "\x02") == props
    assert decode_properties("a\x01\x02\x01b\x02noval\x02k\x01v") == {"k": "v"}
    assert decode_properties("") == {} and encode_properties({}) == ""
    assert encode_properties({"a": None, "b": "1"}) == "b\x011"


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_captured_send_properties_decode_like_the_capture_tool(name):
    for rec in load_capture(name):
        ext = rec["header"].get("extFields") or {}
        text = ext.get("i", ext.get("properties"))
        if rec["flag"] & 1 or text is None or "properties" not in (rec.get("decoded") or {}):
            continue
        assert decode_properties(text) == rec["decoded"]["properties"]
        if not text.endswith("\x02"):
            assert encode_properties(decode_properties(text)) == text


# --- batches ------------------------------------------------------------------------------------

def _batch_sends():
    for rec in load_capture("java-producer"):
        if rec["code"] == 320 and not rec["flag"] & 1:
            yield rec, base64.b64decode(rec["body_b64"])


def test_java_batch_body_decodes_and_reencodes_byte_for_byte():
    found = 0
    for rec, raw in _batch_sends():
        entries = decode_batch(raw)
        expected = rec["decoded"]["batch"]
        assert [(e.flag, e.body.decode(), decode_properties(e.properties)) for e in entries] == [
            (x["flag"], x["body_text"], x["properties"]) for x in expected]
        assert all(isinstance(e, BatchEntry) for e in entries)
        msgs = []
        for x in expected:
            m = Message(rec["header"]["extFields"]["b"], x["body_text"], flag=x["flag"])
            m.properties = dict(x["properties"])
            msgs.append(m)
        assert encode_batch(msgs) == raw
        assert decode_batch_messages(raw, "CapProducerTopic") == msgs
        found += 1
    assert found, "the captures hold a Java batch"


def test_batch_malformed_raises_frame_error():
    raw = encode_batch([Message("T", b"abc")])
    with pytest.raises(FrameError):
        decode_batch(raw[:-1])
    assert decode_batch(b"") == []


def test_cpp_batch_body_decodes_and_reencodes_with_trailing_separators():
    recs = [r for r in load_capture("cpp-client-producer") if "batch" in (r.get("decoded") or {})]
    assert recs, "the C++ producer capture holds a batch"
    raw = base64.b64decode(recs[0]["body_b64"])
    expected = recs[0]["decoded"]["batch"]
    msgs = decode_batch_messages(raw, "CapCppTopic")
    assert [(m.body.decode(), m.properties) for m in msgs] == [(x["body_text"], x["properties"]) for x in expected]
    assert encode_batch(msgs, trailing_separator=True) == raw
    assert recs[0]["header"]["extFields"]["batch"] == "1"


def test_read_body_false_skips_the_body_and_mixed_host_families():
    m = MessageExt(topic="T", body=b"payload", born_host="10.1.2.3:5", store_host="[fe80::1]:10911",
                   properties={"UNIQ_KEY": "U"}, commit_log_offset=77)
    rec = bytes(encode_message_ext(m))
    got, end = decode_message(rec, 0, read_body=False)
    assert end == len(rec) and got.body == b"" and got.msg_id == "U"
    assert got.born_host == "10.1.2.3:5" and got.store_host == "[fe80::1]:10911"
    assert got.sys_flag & 0x30 == 0x20 and got.offset_msg_id.endswith(f"{77:016X}")


def test_records_at_an_offset_inside_a_larger_buffer():
    a = bytes(encode_message_ext(MessageExt(topic="A", body=b"1", born_host="1.1.1.1:1", store_host="2.2.2.2:2")))
    b = bytes(encode_message_ext(MessageExt(topic="B", body=b"22", born_host="1.1.1.1:1", store_host="2.2.2.2:2")))
    buf = bytearray(b"\0" * 5 + a + b)
    m1, nxt = decode_message(memoryview(buf), 5)
    m2, end = decode_message(buf, nxt)
    assert (m1.topic, m2.topic, m2.body, end) == ("A", "B", b"22", len(buf))


def test_bad_hosts_raise_value_error():
    with pytest.raises(ValueError):
        pack_host("nohost")
    with pytest.raises(ValueError):
        pack_host("1.2.3:x")
