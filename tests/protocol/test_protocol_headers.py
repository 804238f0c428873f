"""Typed extFields headers against every captured request and response (docs/protocol.md §3.1-§3.3)."""

from __future__ import annotations

import base64
import struct

import pytest
from rocketmq_sdk.protocol import headers as H
from rocketmq_sdk.protocol.headers import (
    REQUEST_HEADERS,
    RESPONSE_HEADERS,
    V2_SEND_CODES,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    parse_request_header,
)

from tests.conftest import CAPTURE_NAMES, load_capture

#: Keys that are not header fields: ACL signing, stream request type, unique-key query switch.
NOT_HEADER_KEYS = {"AccessKey", "Signature", "OnsChannel", "ReqT", "_UNIQUE_KEY_QUERY"}


def _requests(name: str):
    for rec in load_capture(name):
        if not rec["flag"] & 1 and rec["code"] in REQUEST_HEADERS:
            yield rec


def _wire(rec: dict) -> dict[str, str]:
    return {k: v for k, v in (rec["header"].get("extFields") or {}).items() if k not in NOT_HEADER_KEYS}


def _emit(code: int, header: H.Header) -> dict[str, str]:
    if code in V2_SEND_CODES and isinstance(header, SendMessageRequestHeader):
        return header.to_v2()
    return header.to_ext_fields()


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_java_requests_reemit_identical_ext_fields(name):
    for rec in _requests(name):
        if rec["header"]["language"] != "JAVA":
            continue
        header = parse_request_header(rec["code"], rec["header"].get("extFields"))
        assert _emit(rec["code"], header) == _wire(rec), (name, rec["seq"], rec["name"])


@pytest.mark.parametrize("name", [n for n in CAPTURE_NAMES if n.startswith("cpp")])
def test_cpp_requests_with_numbers_parse_to_typed_values(name):
    seen = 0
    for rec in _requests(name):
        if rec["header"]["language"] != "CPP":
            continue
        ext = rec["header"]["extFields"]
        header = parse_request_header(rec["code"], ext)
        emitted = _emit(rec["code"], header)
        # every field re-emitted as the string of what the C++ client meant
        for key, value in emitted.items():
            raw = ext[key]
            if isinstance(raw, bool) or raw in ("0", "1") and key in ("batch", "unitMode"):
                continue
            assert value == str(raw), (rec["seq"], key)
        seen += 1
    assert seen


def test_cpp_send_header_numbers_and_one_as_true():
    recs = [r for r in load_capture("cpp-client-producer") if r["code"] == 10 and not r["flag"] & 1]
    assert recs
    first = recs[0]["header"]["extFields"]
    assert isinstance(first["queueId"], int)  # the C++ client sends JSON numbers
    h = SendMessageRequestHeader.from_ext_fields(first)
    assert isinstance(h.queue_id, int) and isinstance(h.sys_flag, int) and h.topic == "CapCppTopic"
    assert h.default_topic == "TBW102" and h.default_topic_queue_nums == 4
    batches = [SendMessageRequestHeader.from_ext_fields(r["header"]["extFields"]) for r in recs
               if r["header"]["extFields"].get("batch") == "1"]
    assert batches and all(b.batch is True for b in batches)
    assert SendMessageRequestHeader.from_ext_fields({"batch": "0", "unitMode": "false"}).batch is False


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_broker_responses_reemit_identical_ext_fields(name):
    for rec in load_capture(name):
        if not rec["flag"] & 1 or rec.get("request_code") not in RESPONSE_HEADERS:
            continue
        if rec["code"] != 0 and rec.get("request_code") != 11:
            continue
        cls = RESPONSE_HEADERS[rec["request_code"]]
        ext = rec["header"].get("extFields") or {}
        assert cls.from_ext_fields(ext).to_ext_fields() == ext, (rec["seq"], rec["name"])


def test_send_v2_mapping_is_the_single_letter_table():
    h = SendMessageRequestHeader(producer_group="PG", topic="T", default_topic="TBW102", default_topic_queue_nums=4,
                                 queue_id=1, sys_flag=0, born_timestamp=1795334988378, flag=0,
                                 properties="WAIT\x01true", reconsume_times=0, unit_mode=False, batch=True,
                                 max_reconsume_times=16, bname="broker-a")
    v2 = h.to_v2()
    assert v2 == {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1795334988378", "h": "0",
                  "i": "WAIT\x01true", "j": "0", "k": "false", "l": "16", "m": "true", "n": "broker-a"}
    assert SendMessageRequestHeader.from_v2(v2) == h
    long_form = h.to_ext_fields()
    assert long_form["producerGroup"] == "PG" and long_form["batch"] == "true" and long_form["bname"] == "broker-a"
    assert SendMessageRequestHeader.from_ext_fields(long_form) == h


def test_none_fields_are_omitted_and_lenient_parsing():
    h = PullMessageRequestHeader(consumer_group="G", topic="T", queue_id=0, queue_offset=5, max_msg_nums=32,
                                 sys_flag=2, commit_offset=0, suspend_timeout_millis=15000, sub_version=0)
    ext = h.to_ext_fields()
    assert "subscription" not in ext and "expressionType" not in ext and ext["queueOffset"] == "5"
    back = PullMessageRequestHeader.from_ext_fields({**ext, "queueOffset": 5, "maxMsgNums": "oops"})
    assert back.queue_offset == 5 and back.max_msg_nums is None
    assert H.UnregisterClientRequestHeader(client_id="c").to_ext_fields() == {"clientID": "c"}
    assert H.ResetOffsetRequestHeader(is_force=True).to_ext_fields() == {"isForce": "true"}
    assert H.TopicRequestHeader.from_ext_fields({"topic": "T", "acceptStandardJsonOnly": "TRUE"}).accept_standard_json_only
    assert H.TopicRequestHeader.from_ext_fields({"acceptStandardJsonOnly": "yes"}).accept_standard_json_only is False
    assert H.SendMessageResponseHeader.from_ext_fields(None) == H.SendMessageResponseHeader()


def test_java_named_aliases_exist():
    assert H.GetRouteInfoRequestHeader is H.TopicRequestHeader
    assert H.GetMaxOffsetRequestHeader is H.QueueRequestHeader
    assert H.QueryConsumerOffsetResponseHeader is H.OffsetResponseHeader
    assert H.UpdateAndCreateTopicRequestHeader().to_ext_fields() == {}
    assert parse_request_header(34, {}) is None


def test_booleans_follow_java_parse_boolean_except_cpp_batch_and_unit_mode():
    assert H.TopicRequestHeader.from_ext_fields({"acceptStandardJsonOnly": "1"}).accept_standard_json_only is False
    assert H.TopicRequestHeader.from_ext_fields({"acceptStandardJsonOnly": True}).accept_standard_json_only is True
    assert H.EndTransactionRequestHeader.from_ext_fields({"fromTransactionCheck": "True"}).from_transaction_check
    h = SendMessageRequestHeader.from_ext_fields({"batch": "1", "unitMode": 1})
    assert h.batch is True and h.unit_mode is True
    assert SendMessageRequestHeader.from_v2({"m": "1", "k": "0"}).batch is True
    assert H.ConsumerSendMsgBackRequestHeader.from_ext_fields({"unitMode": "1"}).unit_mode is True


def _rocketmq_ext_keys(raw: bytes) -> list[str]:
    """Keys of a ROCKETMQ binary header's extFields, in wire order (docs/protocol.md §1.4)."""
    p = 13
    p += 4 + struct.unpack_from(">i", raw, p)[0]  # remark
    end = p + 4 + struct.unpack_from(">i", raw, p)[0]
    p += 4
    keys = []
    while p < end:
        klen = struct.unpack_from(">h", raw, p)[0]
        keys.append(raw[p + 2:p + 2 + klen].decode())
        p += 2 + klen
        p += 4 + struct.unpack_from(">i", raw, p)[0]
    return keys


def test_fixed_order_headers_emit_keys_in_the_java_rocketmq_order():
    """4.9.4+ writes send V2, pull request/response and send response headers in a fixed order;
    emitting in the same order lets the remoting layer reproduce those frames byte for byte."""
    checked = set()
    for rec in load_capture("java-rocketmq-serialize"):
        if rec["serialize"] != "ROCKETMQ":
            continue
        resp = bool(rec["flag"] & 1)
        code = rec.get("request_code") if resp else rec["code"]
        ext = rec["header"].get("extFields") or {}
        if resp and code in (310, 11) and rec["code"] == 0:
            ours = list(RESPONSE_HEADERS[code].from_ext_fields(ext).to_ext_fields())
        elif not resp and code in (310, 11):
            ours = list(_emit(code, parse_request_header(code, ext)))
        else:
            continue
        assert ours == _rocketmq_ext_keys(base64.b64decode(rec["header_raw_b64"])), (rec["seq"], code, resp)
        checked.add((code, resp))
    assert checked == {(310, False), (310, True), (11, False), (11, True)}


def test_v2_letters_cover_every_send_header_field_in_java_order():
    import dataclasses

    from rocketmq_sdk.producer.prepare import SendHeaderTemplate
    from rocketmq_sdk.protocol.headers import V2Field

    assert sorted(attr for _, attr in SendMessageRequestHeader._V2) == \
        sorted(f.name for f in dataclasses.fields(SendMessageRequestHeader))
    assert "".join(letter for letter, _ in SendMessageRequestHeader._V2) == "abcdefghijklmn"
    # the producer's own header builder spells the same fields with the same letters
    built = SendHeaderTemplate.fields("pg", "T", "TBW102", "4", False, "3", "0", "1700000000000", "0", "k\x01v\x02",
                                      "broker-a")
    header = SendMessageRequestHeader.from_v2(built)
    assert header.to_v2() == {**built, V2Field.BATCH: "false"}
    assert (header.producer_group, header.topic, header.queue_id, header.bname) == ("pg", "T", 3, "broker-a")
