"""The proxy's request checks (``rocketmq_broker.proxy.checks``) on their own: each illegal field
gets its 5.x code, and the remembered legal topic names never let an illegal one through."""

from __future__ import annotations

import time

import pytest
from rocketmq_broker.proxy import checks
from rocketmq_broker.proxy.checks import check_message, topic_name
from rocketmq_broker.proxy.status import ProxyError
from rocketmq_sdk.grpc import v2


def _message(**system: object) -> v2.Message:
    m = v2.Message(body=b"x")
    m.topic.name = "t"
    m.system_properties.message_id = "01ABCDEF"
    for key, value in system.items():
        if key == "keys":
            m.system_properties.keys.extend(value)  # type: ignore[arg-type]
        else:
            setattr(m.system_properties, key, value)
    return m


def _code(m: v2.Message) -> int | None:
    try:
        check_message(m, 1024, int(time.time() * 1000))
    except ProxyError as exc:
        return exc.code
    return None


@pytest.mark.parametrize("sep", ["\x00", "\x01", "\x02"])
def test_each_control_separator_is_refused_in_every_text_field(sep):
    assert _code(_message(message_id=f"id{sep}")) == v2.ILLEGAL_MESSAGE_ID
    assert _code(_message(tag=f"a{sep}b")) == v2.ILLEGAL_MESSAGE_TAG
    assert _code(_message(keys=["ok", f"k{sep}"])) == v2.ILLEGAL_MESSAGE_KEY
    m = _message()
    m.user_properties[f"n{sep}"] = "v"
    assert _code(m) == v2.ILLEGAL_MESSAGE_PROPERTY_KEY
    m = _message()
    m.user_properties["n"] = f"v{sep}"
    assert _code(m) == v2.ILLEGAL_MESSAGE_PROPERTY_KEY


def test_blank_long_and_ordinary_text_fields():
    assert _code(_message(message_id=" ")) == v2.ILLEGAL_MESSAGE_ID
    assert _code(_message(message_id="a" * 129)) == v2.ILLEGAL_MESSAGE_ID
    assert _code(_message(tag="\t")) == v2.ILLEGAL_MESSAGE_TAG
    assert _code(_message(keys=["k" * 1025])) == v2.ILLEGAL_MESSAGE_KEY
    m = _message(tag="TagA\x03", keys=["k1", "k2"])  # \x03 is no separator
    m.user_properties["color"] = "blue\x03"
    assert _code(m) is None
    assert _code(_message(message_id="a" * 128)) is None


def test_remembered_topic_names_stay_per_namespace_and_illegal_ones_are_never_remembered(monkeypatch):
    monkeypatch.setattr(checks, "_legal_topics", {})
    assert topic_name(v2.Resource(name="orders")) == "orders"
    assert topic_name(v2.Resource(name="orders")) == "orders"  # from memory
    assert topic_name(v2.Resource(name="orders", resource_namespace="ns1")) == "ns1%orders"
    for bad in ("x/../../escape", "a" * 200, "a\x00b", ""):
        for _ in range(2):  # the second time is not answered from memory either
            with pytest.raises(ProxyError) as e:
                topic_name(v2.Resource(name=bad))
            assert e.value.code == v2.ILLEGAL_TOPIC
    with pytest.raises(ProxyError):
        topic_name(v2.Resource(name="orders", resource_namespace="bad/ns"))
    assert set(checks._legal_topics) == {("", "orders"), ("ns1", "orders")}


def test_topic_memory_is_bounded(monkeypatch):
    monkeypatch.setattr(checks, "_legal_topics", {})
    monkeypatch.setattr(checks, "_NAMES_CACHED", 3)
    for i in range(10):
        assert topic_name(v2.Resource(name=f"t{i}")) == f"t{i}"
        assert len(checks._legal_topics) <= 3
