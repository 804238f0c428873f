"""The trace codec against the trace messages captured from Java 4.9.8 clients
(tests/data/trace_records.jsonl, copied from the shared captures)."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
from rocketmq_sdk.trace import TraceRecord, TraceType, decode_trace_text, encode_record, record_keys
from rocketmq_sdk.trace.codec import CONTENT_SPLITOR, FIELD_SPLITOR

DATA = Path(__file__).resolve().parent.parent / "data" / "trace_records.jsonl"
READING_ONLY = {"msgTypeName", "contextCodeName"}  # added to the capture for reading


def captured() -> list[dict]:
    with DATA.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.mark.parametrize("line", captured(), ids=lambda d: f"offset{d['queueOffset']}")
def test_decode_matches_java_decoder_field_by_field(line: dict) -> None:
    records = decode_trace_text(line["body_text"])
    assert len(records) == line["record_count"] == len(line["decoded"])
    for rec, java in zip(records, line["decoded"], strict=True):
        assert rec.to_dict() == {k: v for k, v in java.items() if k not in READING_ONLY}


@pytest.mark.parametrize("line", captured(), ids=lambda d: f"offset{d['queueOffset']}")
def test_reencode_is_byte_identical_and_keys_match(line: dict) -> None:
    records = decode_trace_text(line["body_text"])
    assert "".join(encode_record(r) for r in records) == line["body_text"]
    keys = {k for r in records for k in record_keys(r)}
    assert keys == set(line["keys"].split(" "))


def test_compressed_trace_message_body() -> None:
    """Offset 2 was stored zlib level 5 (sysFlag 769): the body our producer would compress is
    the same size and CRC (the trace producer compresses like any message)."""
    line = next(d for d in captured() if d["queueOffset"] == 2)
    body = "".join(encode_record(r) for r in decode_trace_text(line["body_text"])).encode("utf-8")
    stored = zlib.compress(body, 5)
    assert len(stored) == line["stored_body_len"]
    assert zlib.crc32(stored) & 0x7FFFFFFF == line["bodyCRC"]


def test_layouts_of_a_python_pub_and_sub_pair() -> None:
    pub = TraceRecord(TraceType.Pub, time_stamp=1, region_id="DefaultRegion", group_name="g", topic="T",
                      msg_id="M", tags=None, keys="k1 k2", store_host="127.0.0.1:1", body_length=3, cost_time=4,
                      msg_type=0, offset_msg_id="O", success=True)
    text = encode_record(pub)
    assert text == CONTENT_SPLITOR.join(["Pub", "1", "DefaultRegion", "g", "T", "M", "null", "k1 k2",
                                         "127.0.0.1:1", "3", "4", "0", "O", "true"]) + FIELD_SPLITOR
    assert record_keys(pub) == ["M", "k1", "k2"]
    after = TraceRecord(TraceType.SubAfter, request_id="R", msg_id="M", cost_time=5, success=False, keys=None,
                        context_code=4, time_stamp=9, group_name="cg")
    assert encode_record(after).split(CONTENT_SPLITOR) == ["SubAfter", "R", "M", "5", "false", "null", "4", "9",
                                                          "cg" + FIELD_SPLITOR]


def test_reader_variants_and_trailing_empty_fields() -> None:
    s = CONTENT_SPLITOR
    old_pub = s.join(["Pub", "1", "r", "g", "T", "M", "t", "k", "h", "3", "4", "0", "true"]) + FIELD_SPLITOR
    (rec,) = decode_trace_text(old_pub)  # 13 fields: no offsetMsgId
    assert rec.success is True and rec.offset_msg_id is None
    short_after = s.join(["SubAfter", "R", "M", "5", "true", ""]) + FIELD_SPLITOR  # empty keys kept
    (rec,) = decode_trace_text(short_after)
    assert rec.keys == "" and rec.time_stamp == 0 and rec.group_name is None
    assert decode_trace_text("Unknown" + s + "x" + FIELD_SPLITOR) == []


def test_separator_in_a_field_is_refused() -> None:
    with pytest.raises(ValueError, match="U\\+0001"):
        encode_record(TraceRecord(TraceType.Pub, keys="a\u0001b"))
