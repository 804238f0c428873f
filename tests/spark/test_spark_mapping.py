"""RowMessageMapper: how one row becomes one message (no Spark needed)."""

from __future__ import annotations

import datetime as dt
import json
import pickle

import pytest
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.integrations.spark import FieldTemplate, RowMessageMapper, row_to_json
from rocketmq_sdk.protocol.codes import MessageConst as MC

ROW = {"year": 2013, "month": 1, "day": 1, "carrier": "UA", "flight": 1545, "tailnum": "N14228",
       "dep_delay": 2.0, "arr_time": None}


def test_default_body_is_the_row_as_compact_utf8_json_in_column_order():
    msg = RowMessageMapper("flights").to_message(ROW)
    assert msg.body == b'{"year":2013,"month":1,"day":1,"carrier":"UA","flight":1545,"tailnum":"N14228",' \
                       b'"dep_delay":2.0,"arr_time":null}'
    assert json.loads(msg.body) == ROW
    assert msg.topic == "flights"
    assert msg.tags is None and msg.keys == []


def test_flights_recipe_sets_tag_keys_and_selector_arg():
    mapper = RowMessageMapper("flights", tag_col="carrier",
                              keys_fn=FieldTemplate("{year}-{month}-{day}-{carrier}{flight}"),
                              selector_col="tailnum")
    msg = mapper.to_message(ROW)
    assert msg.tags == "UA"
    assert msg.keys == ["2013-1-1-UA1545"]
    assert msg.properties[MC.KEYS] == "2013-1-1-UA1545"
    assert mapper.uses_selector
    assert mapper.selector_arg(ROW) == "N14228"


def test_null_selector_value_maps_to_empty_string_and_null_tag_sends_no_tag():
    row = dict(ROW, tailnum=None, carrier=None)
    mapper = RowMessageMapper("t", tag_col="carrier", selector_col="tailnum")
    assert mapper.selector_arg(row) == ""
    assert mapper.to_message(row).tags is None


def test_body_from_column_str_bytes_and_other_values():
    assert RowMessageMapper("t", body="b").to_message({"b": "héllo"}).body == "héllo".encode()
    assert RowMessageMapper("t", body="b").to_message({"b": b"\x00\x01"}).body == b"\x00\x01"
    assert RowMessageMapper("t", body="b").to_message({"b": [1, 2]}).body == b"[1,2]"
    assert RowMessageMapper("t", body=lambda r: f"{r['a']}!").to_message({"a": 5}).body == b"5!"


def test_keys_function_may_return_several_keys_and_properties_are_user_properties():
    mapper = RowMessageMapper("t", keys_fn=lambda r: [r["a"], None, "k2"],
                              properties_fn=lambda r: {"origin": r["o"], "skip": None})
    msg = mapper.to_message({"a": "k1", "o": "EWR"})
    assert msg.keys == ["k1", "k2"]
    assert msg.user_properties == {"origin": "EWR"}


def test_exclude_from_body_and_json_of_dates():
    row = {"a": 1, "helper": "x", "when": dt.datetime(2013, 1, 1, 5, 15), "d": dt.date(2013, 1, 2)}
    assert json.loads(row_to_json(row, exclude=("helper",))) == {"a": 1, "when": "2013-01-01T05:15:00",
                                                                  "d": "2013-01-02"}


def test_conflicting_or_missing_parts_are_refused():
    with pytest.raises(IllegalArgumentError):
        RowMessageMapper("t", tag_col="a", tag_fn=lambda r: "x")
    with pytest.raises(IllegalArgumentError):
        RowMessageMapper("")


def test_mapper_with_template_pickles_for_shipping_to_workers():
    mapper = RowMessageMapper("t", keys_fn=FieldTemplate("{carrier}{flight}"), selector_col="tailnum")
    clone = pickle.loads(pickle.dumps(mapper))
    assert clone == mapper
    assert clone.to_message(ROW).keys == ["UA1545"]


def test_field_template_renders_null_as_empty():
    assert FieldTemplate("{a}-{b}")({"a": 1, "b": None}) == "1-"


def test_json_body_writes_valid_json_for_nan_map_keys_and_decimals():
    import decimal

    row = {"x": float("nan"), "inf": float("inf"), "m": {1: "a"}, "d": decimal.Decimal("1.50"),
           "t": dt.datetime(2013, 1, 1, 5, 0, 0, 123), "s": "é"}
    body = row_to_json(row)
    assert body == ('{"x":null,"inf":null,"m":{"1":"a"},"d":"1.50","t":"2013-01-01T05:00:00.000123","s":"é"}'
                    .encode())
    assert json.loads(body)["d"] == "1.50"
