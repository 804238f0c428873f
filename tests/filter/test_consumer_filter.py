"""ConsumerFilterManager (per group/topic compiled SQL92 subscriptions, Java's version rules), the
commit-log record filter and the CHECK_CLIENT_CONFIG answer."""

from __future__ import annotations

import json

import pytest
from rocketmq_broker.filter.bloom import BloomFilter, murmur3_x64_128
from rocketmq_broker.filter.consumer_filter import (
    ConsumerFilterManager,
    check_subscription,
    record_properties,
)
from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.bodies import SubscriptionData
from rocketmq_sdk.protocol.codes import MessageSysFlag, ResponseCode
from rocketmq_sdk.protocol.message_codec import (
    decode_message,
    encode_properties,
    encode_stored_message,
    pack_host,
)

V6 = MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6


def _record(props: dict[str, str], host: str = "127.0.0.1:10911", sys_flag: int = 0, body: bytes = b"body") -> bytes:
    h, _ = pack_host(host)
    return bytes(encode_stored_message(topic=b"TopicF", body=body, properties=encode_properties(props).encode(),
                                       queue_id=1, flag=0, sys_flag=sys_flag, born_timestamp=1, born_host=h,
                                       store_host=h))


@pytest.mark.parametrize(("host", "flag"), [("127.0.0.1:10911", 0), ("[::1]:10911", V6)])
def test_record_properties_matches_the_full_decoder(host, flag):
    props = {"a": "7", "TAGS": "TagA", "KEYS": "k1 k2", "ü": "é"}
    rec = _record(props, host, flag, body=b"x" * 300)
    assert record_properties(rec) == decode_message(rec)[0].properties == props
    assert record_properties(memoryview(rec)) == props
    assert record_properties(_record({}, host, flag)) == {}


def test_record_filter_evaluates_properties_and_tags_and_drops_unreadable_records():
    fd = ConsumerFilterManager().build("TopicF", "g", "a > 5 AND TAGS = 'TagA'", "SQL92", 1)
    assert fd.matches_record(_record({"a": "6", "TAGS": "TagA"}))
    assert not fd.matches_record(_record({"a": "6", "TAGS": "TagB"}))
    assert not fd.matches_record(_record({"TAGS": "TagA"}))  # a missing: UNKNOWN
    assert not fd.matches_record(_record({"a": "6", "TAGS": "TagA"})[:60])  # truncated


def test_build_caches_per_group_topic_version_and_rejects_bad_or_empty_expressions():
    fm = ConsumerFilterManager()
    first = fm.build("T", "g", "a > 1", "SQL92", 5)
    assert fm.build("T", "g", "a > 1", "SQL92", 5) is first
    assert fm.build("T", "g", "a > 1", "SQL92", 6) is not first
    assert fm.build("T", "g", "a >", "SQL92", 5) is None
    assert fm.build("T", "g", "", "SQL92", 5) is None
    assert fm.build("T", "g", "a > 1", "XPATH", 5) is None


def _sub(expr: str, version: int, topic: str = "T", etype: str = "SQL92") -> SubscriptionData:
    return SubscriptionData.build(topic, expr, version, etype)


def test_register_follows_javas_version_rules():
    fm = ConsumerFilterManager()
    fm.register("g", [_sub("a > 1", 10), _sub("TagA", 10, "Tags", "TAG")])
    assert fm.get("T", "g").expression == "a > 1" and fm.get("Tags", "g") is None
    fm.register("g", [_sub("a > 2", 9)])  # older version: ignored
    assert fm.get("T", "g").expression == "a > 1"
    compiled = fm.get("T", "g").compiled
    fm.register("g", [_sub("a > 1", 11)])  # same expression, newer: version only
    assert fm.get("T", "g").client_version == 11 and fm.get("T", "g").compiled is compiled
    fm.register("g", [_sub("a >", 12)])  # newer but broken: the filter goes (pulls get 27)
    assert fm.get("T", "g") is None
    fm.register("g", [_sub("b = 'x'", 13)])
    assert fm.get("T", "g").expression == "b = 'x'"
    assert not fm.get("T", "g").dead
    fm.register("g", [_sub("TagB", 14, "T", "TAG")])  # a TAG subscription leaves it as it is
    assert fm.get("T", "g").expression == "b = 'x'" and not fm.get("T", "g").dead
    fm.register("g", [_sub("*", 14, "Other", "TAG")])  # T no longer subscribed: kept, dead
    assert fm.get("T", "g").expression == "b = 'x'" and fm.get("T", "g").dead
    fm.register("g", [_sub("b = 'x'", 13)])  # same version again: revived
    assert not fm.get("T", "g").dead and fm.get("T", "g").client_version == 13
    fm.register("g", [_sub("a > 1", 15)])
    fm.register("h", [_sub("a > 2", 15)])
    fm.unregister("g")  # the group left: kept (Java), dead
    assert fm.get("T", "g").dead and fm.get("T", "g").expression == "a > 1"
    assert not fm.get("T", "h").dead and fm.get("T", "h").expression == "a > 2"
    fm.register("g", [_sub("a > 1", 16)])  # back with a newer version: alive, not recompiled
    assert not fm.get("T", "g").dead and fm.get("T", "g").client_version == 16


def test_consumer_filter_json_round_trip_load_marks_dead_and_clean_drops_old_dead(tmp_path):
    path = str(tmp_path / "config" / "consumerFilter.json")
    fm = ConsumerFilterManager(path)
    fm.register("g", [_sub("a > 1", 10)])
    fm.register("h", [_sub("b = 'x'", 11)])
    fm.unregister("h")
    fm.persist()
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    entries = doc["filterDataByTopic"]["T"]["groupFilterData"]
    assert entries["g"]["dead"] is False and entries["g"]["deadTime"] == 0 and entries["h"]["dead"] is True
    # what Java's default BloomFilter (f=20, n=32: k=3, m=112) generates for "g#T"
    assert entries["g"]["bloomFilterData"] == {"bitNum": 112, "bitPos": BloomFilter().bit_positions("g#T")}
    loaded = ConsumerFilterManager(path)
    loaded.load()
    g, h = loaded.get("T", "g"), loaded.get("T", "h")
    assert (g.expression, g.client_version, g.born_time) == ("a > 1", 10, entries["g"]["bornTime"])
    assert g.dead and g.dead_time >= g.born_time  # alive in the file: dead at load (Java)
    assert g.matches_properties({"a": "2"}) and not g.matches_properties({"a": "0"})
    assert h.dead_time == entries["h"]["deadTime"]
    entries["g"]["expression"] = "a >"  # no longer compiles: kept, every message passes
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    broken = ConsumerFilterManager(path, clean_time_span_ms=0)
    broken.load()
    assert broken.get("T", "g").compiled is None and broken.get("T", "g").matches_properties({"a": "0"})
    broken.persist()  # every filter is dead: span 0 drops them all
    with open(path, encoding="utf-8") as fh:
        assert json.load(fh) == {"filterDataByTopic": {}}


def test_murmur3_matches_guava_and_bloom_sizes_match_java():
    # Guava murmur3_128 test vectors (seed 0): h1, h2 as little-endian longs
    assert murmur3_x64_128(b"") == (0, 0)
    assert murmur3_x64_128(b"hell") == (0x629942693E10F867, 0x92DB0B82BAEB5347)
    assert murmur3_x64_128(b"The quick brown fox jumps over the lazy dog") == \
        (0xE34BBC7BBC071B6C, 0x7A433CA9C49A9347)
    bloom = BloomFilter()
    assert (bloom.k, bloom.m) == (3, 112)
    assert (BloomFilter(10, 128).k, BloomFilter(10, 128).m) == (4, 616)
    positions = bloom.bit_positions("cg#TopicA")
    assert len(positions) == 3 and all(0 <= p < 112 for p in positions)


def _check_body(expr: str, etype: str = "SQL92") -> bytes:
    return fastjson.dumps({"clientId": "c@1", "group": "g",
                           "subscriptionData": _sub(expr, 1, etype=etype).to_dict()}).encode()


def test_check_client_config_answers():
    assert check_subscription(_check_body("TagA", "TAG"), False) == (ResponseCode.SUCCESS, None)
    assert check_subscription(b"", True) == (ResponseCode.SUCCESS, None)
    assert check_subscription(_check_body("a > 1"), True) == (ResponseCode.SUCCESS, None)
    assert check_subscription(_check_body("a > 1"), False) == (
        ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92")
    code, remark = check_subscription(_check_body("a >"), True)
    assert code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "SQL92 expression 'a >'" in remark
