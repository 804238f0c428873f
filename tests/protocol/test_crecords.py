"""The C decoder of stored records (``_cmessage_codec.decode_records``) against the pure-Python loop.

Pull bodies built from random messages (IPv4 and IPv6 hosts, compressed bodies, unicode topics
and properties, malformed properties items) and corrupted copies of them are decoded with the C
accelerator and without it: the same messages (every slot), or the same FrameError.
"""

from __future__ import annotations

import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocketmq_sdk.exceptions import FrameError
from rocketmq_sdk.protocol import message_codec as codec
from rocketmq_sdk.protocol.codes import MessageSysFlag
from rocketmq_sdk.protocol.message import MessageExt

pytestmark = pytest.mark.skipif(codec._c_decode_records is None, reason="C accelerator not built or disabled")

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOTS = [s for cls in (MessageExt, *MessageExt.__mro__[1:]) for s in getattr(cls, "__slots__", ())]


def decode(body: bytes, c: bool, **kw) -> list[MessageExt] | FrameError:
    saved = codec._c_decode_records
    if not c:
        codec._c_decode_records = None
    try:
        return codec.decode_messages(body, **kw)
    except FrameError as exc:
        return exc
    finally:
        codec._c_decode_records = saved


def same(a, b) -> None:
    if isinstance(b, FrameError):
        assert isinstance(a, FrameError), "C decoded what Python refuses"
        assert str(a) == str(b)
        return
    assert not isinstance(a, FrameError), f"C refused what Python decodes: {a}"
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert type(x) is type(y) is MessageExt
        for slot in SLOTS:
            vx, vy = getattr(x, slot, None), getattr(y, slot, None)
            assert vx == vy and type(vx) is type(vy), slot
        assert list(x.properties) == list(y.properties)
        assert x.offset_msg_id == y.offset_msg_id and x.msg_id == y.msg_id


prop_text = st.text(alphabet=st.sampled_from(list("ab=Zé中\x01\x02 ")), max_size=6)
hosts = st.one_of(st.sampled_from(["127.0.0.1:10911", "10.0.0.2:55555", "192.168.1.1:0"]),
                  st.sampled_from(["[::1]:10911", "[fe80::1]:1"]))


@st.composite
def records(draw) -> bytes:
    body = draw(st.binary(max_size=40))
    sys_flag = draw(st.sampled_from([0, 0, 4, 8]))
    if draw(st.booleans()):
        body = zlib.compress(body)
        sys_flag |= MessageSysFlag.COMPRESSED
    m = MessageExt(topic=draw(st.text(min_size=0, max_size=8).filter(lambda t: len(t.encode()) <= 127)),
                   body=body, flag=draw(st.integers(-(2 ** 31), 2 ** 31 - 1)),
                   properties=draw(st.dictionaries(prop_text, prop_text, max_size=5)),
                   queue_id=draw(st.integers(0, 255)), queue_offset=draw(st.integers(0, 2 ** 62)),
                   sys_flag=sys_flag, born_timestamp=draw(st.integers(0, 2 ** 50)),
                   born_host=draw(hosts), store_host=draw(hosts), store_timestamp=draw(st.integers(0, 2 ** 50)),
                   commit_log_offset=draw(st.integers(0, 2 ** 62)), reconsume_times=draw(st.integers(0, 20)),
                   prepared_transaction_offset=draw(st.integers(0, 2 ** 40)))
    return bytes(codec.encode_message_ext(m, trailing_separator=draw(st.booleans())))


@SETTINGS
@given(st.lists(records(), max_size=6), st.booleans(), st.booleans())
def test_bodies_decode_alike(recs: list[bytes], decompress: bool, as_view: bool) -> None:
    body = b"".join(recs)
    buf = memoryview(body) if as_view else body
    same(decode(buf, True, decompress=decompress), decode(buf, False, decompress=decompress))


@SETTINGS
@given(st.lists(records(), min_size=1, max_size=4), st.data())
def test_corrupted_bodies_decode_or_fail_alike(recs: list[bytes], data: st.DataObject) -> None:
    body = bytearray(b"".join(recs))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(body) - 1))
        body[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    for b in (bytes(body), bytes(body[:cut])):
        same(decode(b, True), decode(b, False))


def test_plain_records_are_decoded_in_c() -> None:
    m = MessageExt(topic="T", body=b"x" * 10, properties={"TAGS": "a", "UNIQ_KEY": "ABC"},
                   born_host="127.0.0.1:1", store_host="127.0.0.1:10911", commit_log_offset=99)
    rec = bytes(codec.encode_message_ext(m))
    out: list[MessageExt] = []
    assert codec._c_decode_records(rec * 3, 0, len(rec) * 3, out, True, True) == len(rec) * 3
    assert [x.properties for x in out] == [{"TAGS": "a", "UNIQ_KEY": "ABC"}] * 3
    assert out[0].offset_msg_id == "7F00000100002A9F0000000000000063"
    v6 = bytes(codec.encode_message_ext(MessageExt(topic="T", born_host="[::1]:1", store_host="127.0.0.1:2")))
    out = []
    assert codec._c_decode_records(rec + v6 + rec, 0, len(rec) * 2 + len(v6), out, True, True) == len(rec)
    assert len(out) == 1  # the IPv6 record is left to the Python loop
    same(decode(rec + v6 + rec, True), decode(rec + v6 + rec, False))
    bad_utf8 = rec.replace(b"TAGS\x01a", b"TAGS\x01\xff")
    assert isinstance(decode(bad_utf8, True), FrameError)


# -- batch bodies (encode_batch) --------------------------------------------------------------

def encode_batch_both(msgs, trailing: bool):
    def run(c: bool):
        saved = codec._c_encode_batch
        if not c:
            codec._c_encode_batch = None
        try:
            return codec.encode_batch(msgs, trailing_separator=trailing)
        except Exception as exc:  # noqa: BLE001 - compared by type
            return type(exc)
        finally:
            codec._c_encode_batch = saved
    return run(True), run(False)


prop_values = st.one_of(prop_text, st.none(), st.just("\ud800"), st.integers(0, 9))


@SETTINGS
@given(st.lists(st.tuples(st.binary(max_size=30), st.integers(-(2 ** 31), 2 ** 31 - 1),
                          st.dictionaries(prop_text, prop_values, max_size=4)), max_size=5),
       st.booleans(), st.integers(-(2 ** 33), 2 ** 33))
def test_batch_bodies_encode_alike(specs, trailing: bool, odd_flag: int) -> None:
    from rocketmq_sdk.protocol.message import Message
    msgs = []
    for body, flag, props in specs:
        m = Message("T", body or b"x", flag=flag)
        m.properties = props
        msgs.append(m)
    got, want = encode_batch_both(msgs, trailing)
    assert got == want
    if msgs:
        msgs[-1].flag = odd_flag  # beyond a Java int: struct.error both ways
        got, want = encode_batch_both(msgs, trailing)
        assert got == want


def test_batch_encoded_in_c_round_trips() -> None:
    from rocketmq_sdk.protocol.message import Message
    msgs = [Message("T", b"body%d" % i, tags="A", keys=["k1", "k2"], flag=i) for i in range(3)]
    body = codec._c_encode_batch(msgs, False)
    assert body is not None
    entries = codec.decode_batch(body)
    assert [(e.flag, e.body) for e in entries] == [(i, b"body%d" % i) for i in range(3)]
    assert [codec.decode_properties(e.properties) for e in entries] == [m.properties for m in msgs]
    big = Message("T", b"x")
    big.properties = {"k": "v" * 40000}
    assert codec._c_encode_batch([big], False) is None  # over 32767 bytes: the Python path raises


# -- properties strings -------------------------------------------------------------------------

@SETTINGS
@given(st.text(alphabet=st.sampled_from(list("ab\x01\x02é中\U0001f600 ")), max_size=30))
def test_properties_decode_alike(text: str) -> None:
    got = codec._cmessage_codec.decode_properties(text)
    want = codec.decode_properties_py(text)
    assert got == want and list(got) == list(want)


@SETTINGS
@given(st.dictionaries(prop_text, prop_values, max_size=6), st.booleans())
def test_properties_encode_alike(props: dict, trailing: bool) -> None:
    saved = codec._c_encode_properties
    codec._c_encode_properties = None
    try:
        want = codec.encode_properties(props, trailing_separator=trailing)
    finally:
        codec._c_encode_properties = saved
    got = codec._cmessage_codec.encode_properties(props, trailing)
    if got is not None:  # None: an int value, formatted by the Python encoder
        assert got == want
    assert codec.encode_properties(props, trailing_separator=trailing) == want


def test_properties_codec_types() -> None:
    assert codec._cmessage_codec.decode_properties("") == {}
    assert codec._cmessage_codec.decode_properties("a\x01b\x02\x02c\x01\x02\x01d\x02e\x01f\x01g") == {"a": "b", "e": "f\x01g"}
    with pytest.raises(TypeError):
        codec._cmessage_codec.decode_properties(b"a\x01b")
    assert codec._cmessage_codec.encode_properties({"k": 1}, False) is None
    assert codec._cmessage_codec.encode_properties({"k": None}, True) == ""


def test_a_truncated_ipv6_host_is_a_frame_error_both_ways() -> None:
    """Found by the corrupted-body test: a record whose sysFlag says IPv6 but whose bytes stop
    inside the host raised ValueError from inet_ntop instead of FrameError."""
    rec = bytearray(codec.encode_message_ext(MessageExt(topic="", born_host="127.0.0.1:1",
                                                        store_host="127.0.0.1:2")))
    assert len(rec) == 91  # the smallest record: empty body, topic and properties
    # now claims two 16-byte hosts: the store host runs 4 bytes past the record's end
    rec[36:40] = (MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6).to_bytes(4, "big")
    for c in (True, False):
        assert isinstance(decode(bytes(rec), c), FrameError)
