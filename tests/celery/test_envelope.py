"""``envelope.dumps`` is ``json.dumps(...).encode()``: the same bytes and the same errors."""

from __future__ import annotations

import json
import math

import pytest
from rocketmq_sdk.integrations.celery.envelope import dumps

ENVELOPES = [
    {},
    {"body": "W1tdLCB7fV0=", "content-encoding": "utf-8", "content-type": "application/json",
     "headers": {"lang": "py", "task": "t.add", "id": "1", "eta": None, "retries": 0, "timelimit": [None, None],
                 "ignore_result": False, "stamps": {}, "nested": {"a": [1, 2.5, -3e300, True]}},
     "properties": {"correlation_id": "1", "delivery_mode": 2, "priority": 0, "body_encoding": "base64",
                    "delivery_info": {"exchange": "", "routing_key": "celery"}, "delivery_tag": "x.1"}},
    {"unicode": "é \u2028 \U0001f600 \x00 \"quoted\" \\", "keys": {7: "int key", 2.5: "float key", None: "n",
                                                                   True: "b"}},
    {"floats": [math.inf, -math.inf, 0.1, 1e-310], "tuple": (1, "a")},
]


@pytest.mark.parametrize("envelope", ENVELOPES)
def test_the_same_bytes_as_json_dumps(envelope):
    assert dumps(envelope) == json.dumps(envelope).encode("utf-8")


def test_the_same_errors_as_json_dumps():
    with pytest.raises(TypeError, match="Object of type bytes is not JSON serializable"):
        dumps({"body": b"raw"})
    circular: dict = {"properties": {}}
    circular["properties"]["self"] = circular
    with pytest.raises(ValueError, match="Circular reference detected"):
        dumps(circular)
    with pytest.raises(TypeError, match="keys must be str, int, float, bool or None"):
        dumps({("a", "b"): 1})
