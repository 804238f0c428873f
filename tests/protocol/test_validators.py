"""The one module of name rules (``rocketmq_sdk.protocol.validators``) used by the SDK's
producer and consumers and by the broker's request guard and store."""

from __future__ import annotations

import pytest
from rocketmq_sdk import Producer, PushConsumer
from rocketmq_sdk.consumer.lite_pull_consumer import LitePullConsumer
from rocketmq_sdk.consumer.pull_consumer import PullConsumer
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.protocol import codes, validators
from rocketmq_sdk.protocol.validators import check_name, group_problem, is_valid_name, topic_problem

HOSTILE = ["x/../../escape", "..", ".", "g\x00x", "T\n", "T\r\n", "a b", "ü", "t.t", "a\\b", "\u202e", ""]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_illegal_topics_and_groups(name):
    assert not is_valid_name(name)
    assert topic_problem(name) is not None
    assert group_problem(name) is not None
    with pytest.raises(IllegalArgumentError):
        check_name(name)


def test_a_trailing_newline_does_not_slip_through_the_pattern():
    # Python's "$" matches before a final newline: the rule must use a full match
    assert not is_valid_name("Topic\n") and topic_problem("Topic\n") is not None


@pytest.mark.parametrize("name", ["T", "%RETRY%g", "%DLQ%g", "a|b-c_d", "x" * 127])
def test_legal_names(name):
    assert is_valid_name(name) and topic_problem(name) is None and group_problem(name) is None


def test_length_limits_and_java_remarks():
    assert topic_problem("t" * 128) == "The specified topic is longer than topic max length."
    assert topic_problem("") == "The specified topic is blank."
    assert topic_problem("a/b") == "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    assert group_problem("g" * 255) is None
    assert group_problem("g" * 256) == "the specified group is longer than group max length 255."
    assert group_problem("  ") == "the specified group is blank"
    assert not is_valid_name(None) and not is_valid_name(b"T")  # type: ignore[arg-type]


def test_codes_reexports_the_same_rules():
    assert codes.check_name is validators.check_name and codes.is_valid_name is validators.is_valid_name
    assert codes.TOPIC_MAX_LENGTH == 127 and codes.GROUP_MAX_LENGTH == 255


@pytest.mark.parametrize("group", ["x/../escape", "g\x00x", "g\n"])
def test_sdk_clients_refuse_hostile_groups_before_connecting(group):
    with pytest.raises(IllegalArgumentError):
        Producer(group, "127.0.0.1:1")
    with pytest.raises(IllegalArgumentError):
        PushConsumer(group, "127.0.0.1:1")
    with pytest.raises(IllegalArgumentError):
        LitePullConsumer(group, "127.0.0.1:1")
    with pytest.raises(IllegalArgumentError):
        PullConsumer(group, "127.0.0.1:1")


def test_push_consumer_refuses_a_hostile_topic():
    c = PushConsumer("cg", "127.0.0.1:1")
    with pytest.raises(IllegalArgumentError):
        c.subscribe("../T", "*")
