"""RemotingCommand codec: golden frames from Apache RocketMQ 4.9.8 captures and hand-built vectors."""

from __future__ import annotations

import base64
import json
import struct
import threading

import pytest
from rocketmq_sdk.exceptions import FrameError
from rocketmq_sdk.protocol.codes import LanguageCode, SerializeType
from rocketmq_sdk.remoting.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand

from tests.conftest import CAPTURE_NAMES, load_capture


def _frame_of(rec: dict) -> tuple[bytes, bytes, int]:
    """Rebuild (whole frame with length prefix, body, serialize type) of a captured record."""
    header = base64.b64decode(rec["header_raw_b64"])
    body = base64.b64decode(rec.get("body_b64", ""))
    st = 1 if rec["serialize"] == "ROCKETMQ" else 0
    word = (st << 24) | len(header)
    return struct.pack(">II", 4 + len(header) + len(body), word) + header + body, body, st


def _str_ext(ext: dict | None) -> dict:
    return {k: (v if isinstance(v, str) else json.dumps(v)) for k, v in (ext or {}).items()}


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_every_captured_frame_decodes_to_its_header_and_body(name):
    records = load_capture(name)
    assert records
    for rec in records:
        frame, body, st = _frame_of(rec)
        assert struct.unpack(">I", frame[:4])[0] == len(frame) - 4
        cmd = RemotingCommand.decode(frame[4:])
        h = rec["header"]
        where = f"{name} seq {rec['seq']}"
        assert cmd.serialize_type == st, where
        assert cmd.code == h["code"] == rec["code"], where
        assert cmd.opaque == h["opaque"], where
        assert cmd.flag == h["flag"], where
        assert cmd.version == h["version"], where
        assert cmd.language == LanguageCode[h["language"]], where
        assert cmd.remark == h.get("remark"), where
        assert cmd.ext_fields == _str_ext(h.get("extFields")), where
        assert all(type(v) is str for v in cmd.ext_fields.values()), where
        assert cmd.body == body, where
        assert cmd.is_response == bool(rec["flag"] & 1), where


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_reencoding_rocketmq_frames_reproduces_captured_bytes(name):
    for rec in load_capture(name):
        if rec["serialize"] != "ROCKETMQ":
            continue
        frame, _, _ = _frame_of(rec)
        assert RemotingCommand.decode(frame[4:]).encode() == frame, f"{name} seq {rec['seq']}"


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_json_reencoding_round_trips_semantically(name):
    for rec in load_capture(name):
        if rec["serialize"] != "JSON":
            continue
        frame, body, _ = _frame_of(rec)
        out = RemotingCommand.decode(frame[4:]).encode()
        (length, word) = struct.unpack(">II", out[:8])
        assert length == len(out) - 4 and word >> 24 == 0
        ours = json.loads(out[8:8 + (word & 0xFFFFFF)])
        assert out[8 + (word & 0xFFFFFF):] == body
        theirs = dict(rec["header"])
        if "extFields" in theirs:
            theirs["extFields"] = _str_ext(theirs["extFields"])
            if not theirs["extFields"]:
                del theirs["extFields"]  # Java writes {} for an empty custom header; we omit it
        if theirs.get("language") == "JAVA":
            assert ours == theirs, f"{name} seq {rec['seq']}"
        else:  # the C++ client does not always write serializeTypeCurrentRPC
            ours.pop("serializeTypeCurrentRPC")
            theirs.pop("serializeTypeCurrentRPC", None)
            assert ours == theirs, f"{name} seq {rec['seq']}"


def test_java_style_json_header_bytes():
    # docs/protocol.md §1.2 example, Java 4.9.8 field order, compact.
    cmd = RemotingCommand(310, language=LanguageCode.JAVA, opaque=7, ext_fields={"a": "PG", "b": "T"})
    header = (b'{"code":310,"extFields":{"a":"PG","b":"T"},"flag":0,"language":"JAVA","opaque":7,'
              b'"serializeTypeCurrentRPC":"JSON","version":409}')
    assert cmd.encode() == struct.pack(">II", 4 + len(header), len(header)) + header


def test_json_header_remark_nonascii_and_numbers_as_strings():
    cmd = RemotingCommand(1, flag=FLAG_RESPONSE, opaque=5, remark='bad "x" é',
                          ext_fields={"queueId": 3, "ok": True, "skip": None, "u": "é"}, body=b"\x00\x01")
    frame = cmd.encode()
    hlen = struct.unpack(">I", frame[4:8])[0]
    header = json.loads(frame[8:8 + hlen])
    assert header == {"code": 1, "extFields": {"queueId": "3", "ok": "true", "u": "é"}, "flag": 1,
                      "language": "PYTHON", "opaque": 5, "remark": 'bad "x" é',
                      "serializeTypeCurrentRPC": "JSON", "version": 409}
    assert "é".encode() in frame[8:8 + hlen]  # raw UTF-8 like fastjson, not \u escapes
    assert frame[8 + hlen:] == b"\x00\x01"


def test_json_decode_accepts_lenient_forms():
    header = b'{"code":10,"language":1,"opaque":9,"flag":2,"remark":null,"extFields":{"queueId":0,"b":false},"version":63}\n'
    cmd = RemotingCommand.decode(struct.pack(">I", len(header)) + header + b"body")
    assert (cmd.code, cmd.language, cmd.opaque, cmd.is_oneway, cmd.remark) == (10, 1, 9, True, None)
    assert cmd.ext_fields == {"queueId": "0", "b": "false"}
    assert cmd.body == b"body"
    header = b'{"code":0,"language":"KLINGON","flag":1}'
    cmd = RemotingCommand.decode(struct.pack(">I", len(header)) + header)
    assert cmd.language == LanguageCode.OTHER and cmd.opaque == 0 and cmd.ext_fields == {}


def test_rocketmq_binary_header_vector():
    # docs/protocol.md §1.4: code 105 GET_ROUTEINFO_BY_TOPIC, JAVA, version 409, opaque 2, no remark, topic=TBW102
    cmd = RemotingCommand(105, language=LanguageCode.JAVA, opaque=2, ext_fields={"topic": "TBW102"},
                          serialize_type=SerializeType.ROCKETMQ)
    header = (struct.pack(">hbhii", 105, 0, 409, 2, 0) + struct.pack(">i", 0)
              + struct.pack(">i", 2 + 5 + 4 + 6) + struct.pack(">h", 5) + b"topic" + struct.pack(">i", 6) + b"TBW102")
    assert header == base64.b64decode("AGkAAZkAAAACAAAAAAAAAAAAAAARAAV0b3BpYwAAAAZUQlcxMDI=")
    assert cmd.encode() == struct.pack(">II", 4 + len(header), (1 << 24) | len(header)) + header
    back = RemotingCommand.decode(cmd.encode()[4:])
    assert back == cmd


def test_rocketmq_binary_header_with_remark_and_body():
    cmd = RemotingCommand(1, language=LanguageCode.PYTHON, opaque=-5, flag=FLAG_RESPONSE, remark="boom ü",
                          ext_fields={"k": "v"}, body=b"xyz", serialize_type=SerializeType.ROCKETMQ)
    back = RemotingCommand.decode(cmd.encode()[4:])
    assert back == cmd


@pytest.mark.parametrize("frame", [
    b"\x00\x00",                                          # shorter than the header-length word
    struct.pack(">I", 10) + b"{}",                        # header length beyond frame
    struct.pack(">I", (2 << 24) | 2) + b"{}",            # unknown serialize type
    struct.pack(">I", 3) + b"{x}",                        # not JSON
    struct.pack(">I", 2) + b"[]",                         # JSON but not an object
    struct.pack(">I", 2) + b"{}",                         # no code
    struct.pack(">I", (1 << 24) | 3) + b"\x00\x01\x00",   # truncated binary header
    struct.pack(">I", (1 << 24) | 17) + struct.pack(">hbhii", 1, 0, 1, 1, 0) + struct.pack(">i", 99),
])
def test_decode_rejects_malformed_frames(frame):
    with pytest.raises(FrameError):
        RemotingCommand.decode(frame)


def test_request_and_response_factories():
    req = RemotingCommand.request(34, {"x": "1"}, b"hb")
    assert not req.is_response and not req.is_oneway
    assert req.language == LanguageCode.PYTHON and req.version == 409
    one = RemotingCommand.request(15, oneway=True, serialize_type=SerializeType.ROCKETMQ)
    assert one.flag == FLAG_ONEWAY and one.is_oneway
    assert one.opaque != req.opaque
    resp = one.response(0, remark="ok", ext_fields={"a": "b"}, body=b"r")
    assert resp.is_response and resp.opaque == one.opaque and resp.serialize_type == SerializeType.ROCKETMQ
    assert (resp.code, resp.remark, resp.ext_fields, resp.body) == (0, "ok", {"a": "b"}, b"r")


def test_opaque_counter_is_unique_across_threads():
    seen: list[list[int]] = [[] for _ in range(8)]

    def work(i: int) -> None:
        seen[i].extend(RemotingCommand.request(1).opaque for _ in range(5000))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    allops = [o for s in seen for o in s]
    assert len(set(allops)) == len(allops) == 40000
