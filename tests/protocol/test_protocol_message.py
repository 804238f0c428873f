"""The shared message model: Message, MessageExt, MessageQueue, send and pull results."""

from __future__ import annotations

import pytest
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.protocol.message import (
    Message,
    MessageExt,
    MessageQueue,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
)


def test_message_body_str_is_utf8_and_properties_hold_tags_keys_delay_wait():
    m = Message("T", "héllo", tags="TagA", keys=["order-1001", "order-1002"], delay_time_level=2)
    assert m.body == "héllo".encode()
    assert m.properties == {"TAGS": "TagA", "KEYS": "order-1001 order-1002", "DELAY": "2", "WAIT": "true"}
    assert m.tags == "TagA" and m.keys == ["order-1001", "order-1002"] and m.delay_time_level == 2
    assert m.wait_store_msg_ok is True


def test_message_views_write_through_to_properties():
    m = Message("T", b"x")
    m.keys = "k1"
    assert m.properties["KEYS"] == "k1" and m.keys == ["k1"]
    m.tags = "TagB"
    m.delay_time_level = 3
    m.wait_store_msg_ok = False
    assert m.properties == {"WAIT": "false", "KEYS": "k1", "TAGS": "TagB", "DELAY": "3"}
    m.tags = None
    m.keys = None
    m.delay_time_level = 0
    assert m.properties == {"WAIT": "false"}
    assert m.uniq_key is None
    m.put_property("UNIQ_KEY", "ABC")
    assert m.uniq_key == "ABC"
    m.clear_property("UNIQ_KEY")
    assert "UNIQ_KEY" not in m.properties


def test_put_user_property_rejects_reserved_and_empty_names():
    m = Message("T", b"", properties={"userProp": "v1", "unicodeProp": "值"})
    assert m.get_user_property("unicodeProp") == "值"
    assert m.user_properties == {"userProp": "v1", "unicodeProp": "值"}
    for reserved in ("TAGS", "KEYS", "UNIQ_KEY", "DELAY", "WAIT", "TRAN_MSG", "CLUSTER"):
        with pytest.raises(IllegalArgumentError):
            m.put_user_property(reserved, "x")
    with pytest.raises(IllegalArgumentError):
        m.put_user_property("", "x")
    with pytest.raises(IllegalArgumentError):
        m.put_user_property("k", "")


def test_message_equality_compares_content():
    assert Message("T", b"a", tags="x") == Message("T", b"a", tags="x")
    assert Message("T", b"a", tags="x") != Message("T", b"a", tags="y")
    a, b = Message("T"), Message("T")
    assert len({a, b}) == 2  # hash stays identity-based, so messages can live in sets


def test_message_ext_msg_id_prefers_uniq_key_and_accepts_fields():
    m = MessageExt(topic="T", queue_id=2, offset_msg_id="7F00000100002A9F0000000000000000", body="b")
    assert m.msg_id == "7F00000100002A9F0000000000000000" and m.body == b"b" and m.queue_id == 2
    m.properties["UNIQ_KEY"] = "C0000202"
    assert m.msg_id == "C0000202"
    with pytest.raises(TypeError):
        MessageExt(no_such_field=1)
    assert isinstance(m, Message) and m.reconsume_times == 0 and m.born_host == ""


def test_message_queue_is_frozen_orderable_and_prints_like_java():
    a = MessageQueue("T", "broker-a", 1)
    b = MessageQueue("T", "broker-a", 0)
    c = MessageQueue("S", "broker-b", 3)
    assert sorted([a, b, c]) == [c, b, a]
    assert str(a) == "MessageQueue [topic=T, brokerName=broker-a, queueId=1]"
    assert a.to_dict() == {"brokerName": "broker-a", "queueId": 1, "topic": "T"}
    assert MessageQueue.from_dict({"brokerName": "broker-a", "queueId": "1", "topic": "T"}) == a
    assert {a: 1}[MessageQueue("T", "broker-a", 1)] == 1
    with pytest.raises(AttributeError):
        a.queue_id = 3  # type: ignore[misc]
    assert not hasattr(a, "__dict__")


def test_send_and_pull_results():
    mq = MessageQueue("T", "broker-a", 0)
    r = SendResult(SendStatus.SEND_OK, "UNIQ", "OFFSETID", mq, 7)
    assert r.trace_on is True and r.transaction_id is None and r.region_id is None
    p = PullResult(PullStatus.NO_NEW_MSG, 5, 0, 5)
    assert p.msg_found_list == [] and PullStatus.FOUND.name == "FOUND"
    assert [s.name for s in SendStatus] == ["SEND_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT",
                                            "SLAVE_NOT_AVAILABLE"]


def test_status_mapping_from_response_codes():
    assert SendStatus.from_response_code(0) is SendStatus.SEND_OK
    assert SendStatus.from_response_code(10) is SendStatus.FLUSH_DISK_TIMEOUT
    assert SendStatus.from_response_code(11) is SendStatus.SLAVE_NOT_AVAILABLE
    assert SendStatus.from_response_code(12) is SendStatus.FLUSH_SLAVE_TIMEOUT
    assert SendStatus.from_response_code(17) is None
    assert [PullStatus.from_response_code(c) for c in (0, 19, 20, 21, 25)] == [
        PullStatus.FOUND, PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG, PullStatus.OFFSET_ILLEGAL, None]
