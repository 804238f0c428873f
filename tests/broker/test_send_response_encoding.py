"""Send-path shortcuts give exactly what the generic code gives: the templated response header
(``SendResponse``) encodes to the bytes of ``RemotingCommand``'s JSON/ROCKETMQ encoders, and the
batch path's stored properties are the entry's merged with the batch's, as before."""

from __future__ import annotations

import pytest
from rocketmq_broker.broker.send_processor import SendResponse
from rocketmq_sdk.protocol.codes import ResponseCode, SerializeType
from rocketmq_sdk.remoting import RemotingCommand
from rocketmq_sdk.remoting.command import FLAG_RESPONSE


def _pair(code, ext, opaque, serialize_type=SerializeType.JSON, remark=None):
    generic = RemotingCommand(code, opaque=opaque, flag=FLAG_RESPONSE, remark=remark, ext_fields=dict(ext),
                              serialize_type=serialize_type)
    fast = SendResponse(code, opaque=opaque, flag=FLAG_RESPONSE, remark=remark, ext_fields=dict(ext),
                        serialize_type=serialize_type)
    return generic, fast


@pytest.mark.parametrize("code", [ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, 0, 12])
@pytest.mark.parametrize("opaque", [0, 1, 2**31 - 1])
@pytest.mark.parametrize("msg_id", ["7F00000100002A9F0000000000000000",
                                    "7F00000100002A9F0000000000000000,7F00000100002A9F00000000000000B4"])
@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_send_response_bytes_equal_generic_encoder(code, opaque, msg_id, serialize_type):
    ext = {"msgId": msg_id, "queueId": "3", "queueOffset": "123456789012", "MSG_REGION": "DefaultRegion",
           "TRACE_ON": "true"}
    generic, fast = _pair(code, ext, opaque, serialize_type)
    assert fast.encode() == generic.encode()
    assert RemotingCommand.decode(fast.encode()[4:]) == RemotingCommand.decode(generic.encode()[4:])


def test_send_response_falls_back_when_changed():
    ext = {"msgId": "A\"B", "queueId": "0", "queueOffset": "0", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true",
           "extra": "x"}
    generic, fast = _pair(0, ext, 5, remark="note")
    assert fast.encode() == generic.encode()


# -- stored properties built as text (no decode/encode round trip when the text allows it) --------

_ITEMS = ["TAGS\x01TagA", "UNIQ_KEY\x017F0000010A2B18B4AAC2000000000001", "WAIT\x01true", "WAIT\x01false",
          "KEYS\x01k1 k2", "CLUSTER\x01Other", "x\x01a\x01b", "\x01v", "k\x01", "junk", "", "TAGS\x01TagB",
          "DELAY\x013"]


def _texts():
    import random

    rnd = random.Random(7)
    out = ["", "WAIT\x01true", "TAGS\x01A\x02", "\x02"]
    for _ in range(3000):
        items = [rnd.choice(_ITEMS) for _ in range(rnd.randrange(0, 6))]
        out.append("\x02".join(items) + ("\x02" if rnd.random() < 0.1 else ""))
    return out


def test_batch_entries_stored_properties_equal_reencoding():
    from rocketmq_broker.broker.send_processor import SendProcessor
    from rocketmq_sdk.protocol.message_codec import decode_properties, encode_properties

    class _Cfg:
        broker_cluster_name = "DefaultCluster"
        broker_addr = "127.0.0.1:10911"

    class _CommitLog:
        @staticmethod
        def encode_batch(*_args):  # declines the encoded fast path (tests/store/test_cstore.py)
            return None

    class _Store:
        commit_log = _CommitLog()

    class _Broker:
        config = _Cfg()
        store = _Store()
        inners: list = []

        def put_messages(self, inners):
            self.inners = inners

    class _Ch:
        remote_addr = "127.0.0.1:5555"

    class _Header:
        def __init__(self, properties):
            self.properties = properties

    texts = _texts()[:400]
    for batch_text in ("", "WAIT\x01true", "CLUSTER\x01X\x02TAGS\x01B"):
        broker = _Broker()
        cmd = RemotingCommand.request(320, {}, _raw_batch([(0, b"b", t) for t in texts]))
        SendProcessor(broker)._send_batch(cmd, _Header(batch_text), "T", 0, 0, 1, 0, _Ch())
        batch_props = decode_properties(batch_text)
        batch_props["CLUSTER"] = "DefaultCluster"
        for inner, text in zip(broker.inners, texts, strict=True):
            props = decode_properties(text)
            for k, v in batch_props.items():
                props.setdefault(k, v)
            assert inner.properties_string == encode_properties(props), repr(text)
            assert inner.properties == props


def _raw_batch(entries):
    import struct
    import zlib

    out = bytearray()
    for flag, body, text in entries:
        props = text.encode()
        total = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props)
        out += struct.pack(">iiiii", total, 0, zlib.crc32(body) & 0x7FFFFFFF, flag, len(body)) + body
        out += struct.pack(">h", len(props)) + props
    return bytes(out)
