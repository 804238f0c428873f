"""Message refuses bad input at construction and on assignment, before anything is sent
(issue 17 item 2: bodies are bytes; issue 14 item 4: user strings cannot forge system properties)."""

from __future__ import annotations

import pytest
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.protocol.message import Message, MessageExt
from rocketmq_sdk.protocol.message_codec import encode_properties


@pytest.mark.parametrize("body, expected", [
    (b"abc", b"abc"), (bytearray(b"abc"), b"abc"), (memoryview(b"abc"), b"abc"), ("é", "é".encode()),
])
def test_bytes_like_and_str_bodies_become_bytes(body, expected):
    m = Message("T", body)
    assert type(m.body) is bytes and m.body == expected
    m.body = body
    assert type(m.body) is bytes and m.body == expected


@pytest.mark.parametrize("body, name", [(5, "int"), ({"a": 1}, "dict"), (None, "NoneType"), ([1], "list")])
def test_other_bodies_are_refused_at_construction_and_assignment(body, name):
    with pytest.raises(TypeError, match=f"^Message body must be bytes or str, got {name}$"):
        Message("orders", body)
    m = Message("orders", b"ok")
    with pytest.raises(TypeError, match=f"got {name}$"):
        m.body = body
    assert m.body == b"ok"


def test_int_body_is_not_nul_bytes_in_message_ext_either():
    with pytest.raises(TypeError, match="got int"):
        MessageExt(body=5)
    assert MessageExt(body="x").body == b"x"


@pytest.mark.parametrize("kwargs", [{"tags": 5}, {"keys": 7}, {"keys": ["a", 3]}, {"properties": {"a": 1}},
                                    {"properties": {1: "a"}}])
def test_tags_keys_and_properties_must_be_str(kwargs):
    with pytest.raises(TypeError, match="must be str"):
        Message("T", b"x", **kwargs)


def test_put_user_property_refuses_non_str_value():
    m = Message("T", b"x")
    with pytest.raises(TypeError, match="property 'n' value must be str, got int"):
        m.put_user_property("n", 1)
    with pytest.raises(TypeError):
        m.tags = 5
    with pytest.raises(TypeError):
        m.keys = 5


@pytest.mark.parametrize("kwargs", [
    {"properties": {"note": "x\x02DELAY\x012"}},
    {"properties": {"a\x01b": "v"}},
    {"tags": "TagA\x02KEYS\x01injected"},
    {"keys": "k\x01v"},
    {"keys": ["ok", "k\x02"]},
])
def test_property_separators_are_refused(kwargs):
    with pytest.raises(IllegalArgumentError, match="property separator"):
        Message("T", b"x", **kwargs)


def test_separator_assignment_is_refused_and_leaves_the_message_unchanged():
    m = Message("T", b"x", tags="A")
    before = encode_properties(m.properties)
    for setter in (lambda: setattr(m, "tags", "B\x01C"), lambda: setattr(m, "keys", "k\x02"),
                   lambda: m.put_user_property("note", "x\x02DELAY\x012")):
        with pytest.raises(IllegalArgumentError):
            setter()
    assert encode_properties(m.properties) == before
    assert "DELAY" not in m.properties
