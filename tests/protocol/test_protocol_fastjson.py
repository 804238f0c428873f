"""The fastjson-lenient JSON reader and writer (docs/protocol.md §3.7)."""

from __future__ import annotations

import base64
import json

import pytest
from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.fastjson import ObjectKey

from tests.conftest import CAPTURE_NAMES, load_capture


def _json_bodies(name: str):
    for rec in load_capture(name):
        if "body_json" in rec or ("body_text" in rec and rec["body_text"].lstrip()[:1] in ("{", "[")):
            yield rec, base64.b64decode(rec["body_b64"])


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_every_captured_json_body_parses(name):
    count = 0
    for rec, raw in _json_bodies(name):
        value = fastjson.loads(raw)
        if "body_json" in rec:
            assert value == rec["body_json"]
        else:
            # fastjson dialect: writing it back in the same dialect and re-reading is lossless
            assert fastjson.loads(fastjson.dumps(value, standard=False)) == value
        count += 1
    assert count > 0


def test_captures_contain_both_fastjson_quirks():
    texts = [rec["body_text"] for name in CAPTURE_NAMES for rec in load_capture(name) if "body_text" in rec]
    assert any("{0:" in t for t in texts)
    assert any('{{"brokerName"' in t for t in texts)


def test_bare_numeric_keys_become_ints():
    assert fastjson.loads('{"brokerAddrs":{0:"127.0.0.1:10911",1:"x"}}') == {"brokerAddrs": {0: "127.0.0.1:10911", 1: "x"}}
    assert fastjson.loads(b'{-1:2}') == {-1: 2}


def test_object_keys_become_hashable_object_keys():
    v = fastjson.loads('{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5,'
                       '{"topic":"t","queueId":1,"brokerName":"b"}:7}}')
    table = v["offsetTable"]
    k0 = ObjectKey({"topic": "t", "brokerName": "b", "queueId": 0})
    assert table[k0] == 5
    k1 = next(k for k in table if k["queueId"] == 1)
    assert k1.as_dict() == {"brokerName": "b", "queueId": 1, "topic": "t"}
    assert k1 == {"brokerName": "b", "queueId": 1, "topic": "t"}
    assert len(k1) == 3 and set(k1) == {"brokerName", "queueId", "topic"}
    assert hash(ObjectKey([("a", 1), ("b", 2)])) == hash(ObjectKey({"b": 2, "a": 1}))


def test_whitespace_nested_values_and_literals():
    text = ' {\n\t"a" : [ 1 , -2.5 , 3e2 , true , false , null , "x\\u00e9" ] ,\n\t7 : { } , "e" : [ ] } '
    assert fastjson.loads(text) == {"a": [1, -2.5, 300.0, True, False, None, "xé"], 7: {}, "e": []}


@pytest.mark.parametrize("bad", ["{0:}", "{1:2", "[1,2", "{1 2}", "{1:2} x", "", "{'a':1}"])
def test_malformed_input_raises_value_error(bad):
    with pytest.raises(ValueError):
        fastjson.loads(bad)


def test_dumps_standard_is_compact_sorted_with_quoted_keys():
    obj = {"b": 1, "a": {1: "x", 0: "y"}, "c": [True, None, 0.0, "é"]}
    assert fastjson.dumps(obj) == '{"a":{"0":"y","1":"x"},"b":1,"c":[true,null,0.0,"\\u00e9"]}'
    assert json.loads(fastjson.dumps(obj)) == {"a": {"0": "y", "1": "x"}, "b": 1, "c": [True, None, 0.0, "é"]}


def test_dumps_fastjson_form_writes_bare_int_keys_and_object_keys():
    key = ObjectKey({"topic": "t", "queueId": 0, "brokerName": "b"})
    obj = {"brokerAddrs": {0: "127.0.0.1:10911"}, "offsetTable": {key: 5}}
    text = fastjson.dumps(obj, standard=False)
    assert text == '{"brokerAddrs":{0:"127.0.0.1:10911"},"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5}}'
    assert fastjson.loads(text) == obj


def test_dumps_roundtrips_route_data_of_both_forms():
    for name in ("cpp-client-producer", "java-producer"):
        for rec in load_capture(name):
            if rec.get("request_code") == 105 and rec["code"] == 0:
                v = fastjson.loads(base64.b64decode(rec["body_b64"]))
                assert fastjson.loads(fastjson.dumps(v, standard=False)) == v
