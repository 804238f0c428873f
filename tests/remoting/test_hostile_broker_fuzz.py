"""Issue 14: the SDK facing a hostile broker or name server.

Hypothesis builds what a hostile peer can send - frames with huge or tiny lengths, truncated
frames, headers that do not parse, stored-message bodies cut or bit-flipped, JSON bodies with
the wrong shapes - and every decoder must either decode it or raise its one documented error
(``FrameError`` for frames and message bodies, ``ValueError`` for JSON bodies), never another
exception, and never buffer a frame beyond ``max_frame_length``. Then a live hostile name
server: the producer's send fails with a clear error within its timeout instead of hanging.

``FAULTS_EXAMPLES`` sets the examples per property (``make faults`` runs many more).
"""

from __future__ import annotations

import asyncio
import os
import struct
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocketmq_sdk import Message, Producer
from rocketmq_sdk.exceptions import FrameError, MQError
from rocketmq_sdk.protocol.bodies import (
    ConsumerListBody,
    HeartbeatData,
    LockBatchResponseBody,
    RegisterBrokerBody,
    TopicRouteData,
)
from rocketmq_sdk.protocol.headers import PullMessageResponseHeader
from rocketmq_sdk.protocol.message_codec import (
    decode_messages,
    encode_properties,
    encode_stored_message,
    pack_host,
)
from rocketmq_sdk.remoting import RemotingCommand, RemotingServer
from rocketmq_sdk.remoting.frame import FrameDecoder

EXAMPLES = int(os.environ.get("FAULTS_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

HOSTILE_TEXT = st.one_of(
    st.sampled_from(["", "..", "../../etc", "x/../../escape", "g\x00x", "\x01\x02", "-1", "2147483648",
                     "99999999999999999999", "NaN", "null", "true", "%RETRY%", "\u202e"]),
    st.text(max_size=40),
    st.just("a" * 10_000),
)
HOSTILE_INT = st.one_of(st.sampled_from([-1, 0, 2**31 - 1, 2**31, -(2**31) - 1, 2**63, -(2**63)]),
                        st.integers(-(2**70), 2**70))
JSON_SCALAR = st.one_of(st.none(), st.booleans(), HOSTILE_INT, HOSTILE_TEXT, st.floats(allow_nan=False))
JSON = st.recursive(JSON_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(HOSTILE_TEXT, inner, max_size=4)),
                    max_leaves=20)


def _frame(length: int, hlen_word: int, rest: bytes) -> bytes:
    return struct.pack(">II", length & 0xFFFFFFFF, hlen_word & 0xFFFFFFFF) + rest


@FUZZ
@given(length=st.one_of(HOSTILE_INT, st.integers(0, 64)), hlen=HOSTILE_INT, rest=st.binary(max_size=200),
       chunks=st.integers(1, 5))
def test_frame_decoder_takes_any_length_words_without_buffering_past_the_maximum(length, hlen, rest, chunks):
    dec = FrameDecoder(max_frame_length=1024)
    data = _frame(length, hlen, rest)
    step = max(1, len(data) // chunks)
    try:
        for i in range(0, len(data), step):
            for frame in dec.feed(data[i:i + step]):
                try:
                    RemotingCommand.decode(frame)
                except FrameError:
                    pass
            assert dec.buffered <= 1024
    except FrameError:
        pass


@FUZZ
@given(header=st.one_of(st.binary(max_size=300), JSON.map(lambda v: repr(v).encode())),
       serialize=st.sampled_from([0, 1, 2, 255]), body=st.binary(max_size=50))
def test_remoting_command_decode_raises_only_frame_error(header, serialize, body):
    frame = struct.pack(">I", (serialize << 24) | len(header)) + header + body
    try:
        RemotingCommand.decode(frame)
    except FrameError:
        pass


def _stored(n: int) -> bytes:
    host = pack_host("127.0.0.1:1")[0]
    return b"".join(bytes(encode_stored_message(
        topic=b"T", body=b"body%d" % i, properties=encode_properties({"TAGS": "a", "KEYS": "k"}).encode(),
        queue_id=0, flag=0, sys_flag=0, born_timestamp=1, born_host=host, store_host=host, queue_offset=i,
        physical_offset=i * 200)) for i in range(n))


GOOD_PULL_BODY = _stored(3)


@FUZZ
@given(cut=st.integers(0, len(GOOD_PULL_BODY)),
       flips=st.lists(st.tuples(st.integers(0, len(GOOD_PULL_BODY) - 1), st.integers(0, 255)), max_size=6))
def test_pull_bodies_cut_or_corrupted_raise_only_frame_error(cut, flips):
    body = bytearray(GOOD_PULL_BODY)
    for pos, value in flips:
        body[pos] = value
    try:
        msgs = decode_messages(bytes(body[:cut]))
    except FrameError:
        return
    assert len(msgs) <= 3


@pytest.mark.parametrize("decoder", [TopicRouteData.from_json, HeartbeatData.from_json, ConsumerListBody.from_json,
                                     LockBatchResponseBody.from_json, RegisterBrokerBody.from_json])
@FUZZ
@given(value=JSON, raw=st.binary(max_size=64), use_raw=st.booleans())
def test_json_bodies_of_any_shape_raise_only_value_error(decoder, value, raw, use_raw):
    import json

    body = raw if use_raw else json.dumps(value).encode()
    try:
        decoder(body)
    except ValueError:
        pass


def test_deeply_nested_json_is_a_value_error_not_a_recursion_error():
    with pytest.raises(ValueError):
        TopicRouteData.from_json(b"[" * 100_000)


@FUZZ
@given(ext=st.dictionaries(st.sampled_from(["suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset",
                                            "x"]), HOSTILE_TEXT, max_size=5))
def test_response_headers_with_hostile_values_raise_only_value_error(ext):
    try:
        PullMessageResponseHeader.from_ext_fields(ext)
    except ValueError:
        pass


class HostileNamesrv:
    """A name server on 127.0.0.1 whose every answer is malformed in one chosen way."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = RemotingServer()
        self.server.default_processor = lambda ch, cmd: self.answer(cmd)
        self.port = asyncio.run_coroutine_threadsafe(self.server.start("127.0.0.1", 0), self.loop).result(10)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


HOSTILE_ANSWERS = {
    "bad-json": lambda cmd: cmd.response(0, body=b"{not json"),
    "wrong-shape": lambda cmd: cmd.response(0, body=b'{"brokerDatas":[7],"queueDatas":{"a":1}}'),
    "nested": lambda cmd: cmd.response(0, body=b"[" * 50_000),
    "huge-remark": lambda cmd: cmd.response(1, "r" * 1_000_000),
    "silence": lambda cmd: None,
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_ANSWERS))
def test_producer_facing_a_hostile_name_server_fails_clearly_and_in_time(kind):
    ns = HostileNamesrv(HOSTILE_ANSWERS[kind])
    producer = Producer("pg_hostile", f"127.0.0.1:{ns.port}", send_msg_timeout=1500)
    try:
        producer.start()
        t0 = time.monotonic()
        with pytest.raises((MQError, ValueError)) as info:
            producer.send(Message("T", b"x"))
        assert time.monotonic() - t0 < 10, "the send outlived its timeout"
        assert str(info.value)
    finally:
        producer.shutdown()
        ns.close()
