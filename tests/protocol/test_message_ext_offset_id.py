"""``MessageExt.offset_msg_id`` of a decoded IPv4 record is formatted on first read: the value is
the record's (store host + PHYSICALOFFSET as decoded), whatever happens to the fields later."""

from __future__ import annotations

import copy
import pickle

from rocketmq_sdk.protocol.message import MessageExt
from rocketmq_sdk.protocol.message_codec import decode_message, decode_messages, encode_message_ext


def _record(phys: int, store_host: str = "10.1.2.3:10911") -> bytes:
    m = MessageExt(topic="T", body=b"b", born_host="127.0.0.1:5000", store_host=store_host, commit_log_offset=phys)
    m.properties = {"CLUSTER": "c"}  # no UNIQ_KEY: msg_id is the offset id
    return bytes(encode_message_ext(m))


def test_offset_msg_id_is_the_decoded_records_and_stays_so():
    got, _ = decode_message(_record(0x1234))
    assert got.offset_msg_id == "0A010203" + "00002A9F" + "0000000000001234"
    got.commit_log_offset = 5  # a later change of the field does not move the broker's id
    got.store_host = "1.1.1.1:1"
    assert got.offset_msg_id == "0A010203" + "00002A9F" + "0000000000001234"
    assert got.msg_id == got.offset_msg_id


def test_negative_physical_offset_is_formatted_as_unsigned():
    (got,) = decode_messages(_record(-1))
    assert got.offset_msg_id == "0A010203" + "00002A9F" + "F" * 16


def test_offset_msg_id_can_be_set_copied_and_pickled():
    got, _ = decode_message(_record(77))
    twin = copy.copy(got)
    again = pickle.loads(pickle.dumps(got))
    assert twin.offset_msg_id == again.offset_msg_id == got.offset_msg_id
    got.offset_msg_id = "X"
    assert got.offset_msg_id == "X" and twin.offset_msg_id != "X"
    assert MessageExt(offset_msg_id="ID").offset_msg_id == "ID"
    assert MessageExt().offset_msg_id == ""
