"""ACL signing (docs/protocol.md §6.8) against the signatures mqadmin 4.9.8 and the C++ client sent."""

from __future__ import annotations

import asyncio
import base64
import fnmatch
import hashlib
import hmac

import pytest
from rocketmq_sdk.protocol.acl import (
    ACCESS_KEY,
    SECURITY_TOKEN,
    SIGNATURE,
    UNIQUE_KEY_QUERY,
    AclClientRPCHook,
    sign,
    signing_content,
    verify,
)
from rocketmq_sdk.protocol.codes import ResponseCode
from rocketmq_sdk.remoting import RemotingClient, RemotingCommand, RemotingServer

from tests.conftest import CAPTURE_NAMES, load_capture

pytestmark = pytest.mark.timeout(30)

MQADMIN_SECRET = "12345678"
MQADMIN_ACCESS_KEY = "rocketmq2"
QUERY_MESSAGE = 12


def _ext(frame: dict) -> dict[str, str]:
    ext = frame["header"].get("extFields") or {}
    # The C++ client writes some values as JSON numbers; it signs their text form.
    return {k: v if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in ext.items()}


def _body(frame: dict) -> bytes:
    return base64.b64decode(frame.get("body_b64", ""))


def _signed_frames(names: list[str]) -> list[dict]:
    frames = []
    for name in names:
        frames += [f for f in load_capture(name) if SIGNATURE in (f["header"].get("extFields") or {})]
    return frames


def _capture_names(pattern: str) -> list[str]:
    return [name for name in CAPTURE_NAMES if fnmatch.fnmatch(name, pattern[: -len(".jsonl")])]


def _java_frames() -> list[dict]:
    """Requests mqadmin's Java AclClientRPCHook signed (the C++ client's carry OnsChannel; the
    broker also forwards a signed header to clients, see test_forwarded_requests_keep_...)."""
    frames = _signed_frames(_capture_names("*.jsonl"))
    return [f for f in frames if f["from"] == "client" and f["client"] == "mqadmin"
            and "OnsChannel" not in f["header"]["extFields"]]


def _cpp_frames() -> list[dict]:
    frames = _signed_frames(_capture_names("cpp-*.jsonl"))
    return [f for f in frames if "OnsChannel" in f["header"]["extFields"]]


# ---------------------------------------------------------------- golden signatures


def test_every_mqadmin_signature_recomputes():
    frames = _java_frames()
    admin_only = [f for f in frames if f in load_capture("admin")]
    assert len(admin_only) == 196, "admin.jsonl holds 196 requests signed by mqadmin"
    mismatches = [
        (f["seq"], f["name"]) for f in frames
        if sign(_ext(f), _body(f), MQADMIN_SECRET) != f["header"]["extFields"][SIGNATURE]
    ]
    assert mismatches == []
    assert all(_ext(f)[ACCESS_KEY] == MQADMIN_ACCESS_KEY for f in frames)
    assert len(frames) == 210


def test_forwarded_requests_keep_the_admin_signature():
    """The broker forwards mqadmin's header to the client (GET_CONSUMER_RUNNING_INFO as is,
    CONSUME_MESSAGE_DIRECTLY plus brokerName and the message body), so the second one no
    longer verifies: clients never check signatures."""
    frames = [f for f in _signed_frames(["admin", "cpp-client-push-consumer"])
              if f["from"] == "broker" and f["flag"] == 0]
    assert sorted(f["name"] for f in frames) == ["CONSUME_MESSAGE_DIRECTLY"] + ["GET_CONSUMER_RUNNING_INFO"] * 2
    for f in frames:
        ext = _ext(f)
        if f["name"] == "GET_CONSUMER_RUNNING_INFO":
            assert verify(ext, _body(f), MQADMIN_SECRET)
        else:
            assert not verify(ext, _body(f), MQADMIN_SECRET)
            original = {k: v for k, v in ext.items() if k != "brokerName"}
            assert verify(original, b"", MQADMIN_SECRET)


def test_signed_requests_with_bodies_include_the_body():
    frames = [f for f in _java_frames() if f.get("body_len")]
    assert len(frames) == 4  # UPDATE_BROKER_CONFIG, UPDATE_NAMESRV_CONFIG, subgroup, send
    for f in frames:
        assert sign(_ext(f), b"", MQADMIN_SECRET) != f["header"]["extFields"][SIGNATURE]
        assert sign(_ext(f), _body(f), MQADMIN_SECRET) == f["header"]["extFields"][SIGNATURE]


def test_query_message_signature_covers_unique_key_flag():
    """mqadmin signs _UNIQUE_KEY_QUERY; a 4.9.8 broker excludes it (apache/rocketmq#5310)."""
    frames = [f for f in _java_frames() if f["code"] == QUERY_MESSAGE]
    assert {_ext(f)[UNIQUE_KEY_QUERY] for f in frames} == {"true", "false"}
    for f in frames:
        ext, body = _ext(f), _body(f)
        assert sign(ext, body, MQADMIN_SECRET) == ext[SIGNATURE]
        assert sign(ext, body, MQADMIN_SECRET, exclude=[UNIQUE_KEY_QUERY]) != ext[SIGNATURE]
        assert verify(ext, body, MQADMIN_SECRET)  # lenient by default
        assert not verify(ext, body, MQADMIN_SECRET, lenient=False)  # the real broker's verdict


def test_verify_accepts_every_captured_mqadmin_request():
    for f in _java_frames():
        assert verify(_ext(f), _body(f), MQADMIN_SECRET), (f["seq"], f["name"])
        assert not verify(_ext(f), _body(f), "wrong-secret")


def test_cpp_client_signature_is_the_same_scheme_with_an_empty_secret():
    """234 requests plus the GET_CONSUMER_RUNNING_INFO response the C++ client signed too (seen
    twice: as sent, and as the broker relayed it to mqadmin)."""
    frames = _cpp_frames()
    assert len(frames) == 236
    assert sum(1 for f in frames if f["flag"] & 1) == 2
    for f in frames:
        ext = _ext(f)
        assert ext[ACCESS_KEY] == "" and ext["OnsChannel"] == "ALIYUN"
        assert sign(ext, _body(f), "") == ext[SIGNATURE], (f["seq"], f["name"])


# ---------------------------------------------------------------- signing content


def test_content_is_values_in_java_key_order_then_body():
    ext = {"b": "2", "a": "1", SIGNATURE: "ignored", "C": "3", "none": None}
    assert signing_content(ext, b"\x00body") == b"312\x00body"
    expected = base64.b64encode(hmac.new(b"k", b"312\x00body", hashlib.sha1).digest()).decode()
    assert sign(ext, b"\x00body", "k") == expected


def test_key_order_is_utf16_code_units_not_code_points():
    # U+10000 is the surrogate pair D800 DC00, below U+FFFF in Java's String.compareTo.
    ext = {"\uffff": "B", "\U00010000": "A", "z": "Z"}
    assert signing_content(ext) == b"ZAB"
    assert sorted(ext) == ["z", "\uffff", "\U00010000"]  # Python's own order differs


def test_non_ascii_values_are_utf8_and_wire_forms_of_numbers():
    assert signing_content({"k": "é", "n": 7, "t": True}) == "é7true".encode()


def test_verify_rejects_missing_or_tampered_signatures():
    ext = {ACCESS_KEY: "ak", "topic": "T"}
    ext[SIGNATURE] = sign(ext, b"body", "sk")
    assert verify(ext, b"body", "sk")
    assert not verify(ext, b"bodY", "sk")
    assert not verify({**ext, "topic": "U"}, b"body", "sk")
    assert not verify({k: v for k, v in ext.items() if k != SIGNATURE}, b"body", "sk")
    assert not verify({**ext, SIGNATURE: ""}, b"body", "sk")


# ---------------------------------------------------------------- the RPC hook


def test_hook_reproduces_mqadmin_requests():
    hook = AclClientRPCHook(MQADMIN_ACCESS_KEY, MQADMIN_SECRET)
    checked = 0
    for f in _java_frames():
        if f["code"] == QUERY_MESSAGE:
            continue
        header = {k: v for k, v in _ext(f).items() if k not in (ACCESS_KEY, SIGNATURE)}
        cmd = RemotingCommand.request(f["code"], header, _body(f))
        hook.before_request("127.0.0.1:10911", cmd)
        assert cmd.ext_fields == _ext(f)
        checked += 1
    assert checked >= 200


def test_hook_leaves_unique_key_flag_out_so_a_real_broker_accepts_it():
    hook = AclClientRPCHook("ak", "sk")
    cmd = RemotingCommand.request(QUERY_MESSAGE, {"topic": "T", "key": "K", UNIQUE_KEY_QUERY: "true"})
    hook.before_request("a:1", cmd)
    assert verify(cmd.ext_fields, b"", "sk", lenient=False)
    assert cmd.ext_fields[SIGNATURE] == sign(cmd.ext_fields, b"", "sk", exclude=[UNIQUE_KEY_QUERY])


def test_hook_copies_the_callers_dict_and_adds_the_token():
    header = {"topic": "T", SIGNATURE: "stale"}
    hook = AclClientRPCHook("ak", "sk", security_token="tok")
    cmd = RemotingCommand.request(105, header, b"")
    hook.before_request("a:1", cmd)
    assert header == {"topic": "T", SIGNATURE: "stale"}
    assert cmd.ext_fields[ACCESS_KEY] == "ak" and cmd.ext_fields[SECURITY_TOKEN] == "tok"
    assert signing_content(cmd.ext_fields) == b"aktokT"
    assert verify(cmd.ext_fields, b"", "sk")
    hook.before_request("a:1", cmd)  # re-signing (a retry) gives the same result
    assert verify(cmd.ext_fields, b"", "sk")
    assert hook.after_response("a:1", cmd, cmd) is None
    assert "sk" not in repr(hook)


def test_hook_with_no_header_fields():
    cmd = RemotingCommand.request(35)
    AclClientRPCHook("ak", "sk").before_request("a:1", cmd)
    assert set(cmd.ext_fields) == {ACCESS_KEY, SIGNATURE} and verify(cmd.ext_fields, b"", "sk")


def test_signed_requests_verified_by_a_server_over_tcp():
    code = 1100
    seen: list[bool] = []

    async def handler(channel, cmd):
        ok = verify(cmd.ext_fields, cmd.body, "sk")
        seen.append(ok)
        return cmd.response(ResponseCode.SUCCESS if ok else ResponseCode.NO_PERMISSION)

    async def main():
        server = RemotingServer()
        server.register_processor(code, handler)
        port = await server.start("127.0.0.1", 0)
        good = RemotingClient(rpc_hooks=[AclClientRPCHook("ak", "sk")])
        bad = RemotingClient(rpc_hooks=[AclClientRPCHook("ak", "not-sk")])
        try:
            addr = f"127.0.0.1:{port}"
            resp = await good.invoke(addr, RemotingCommand.request(code, {"x": "1"}, b"b" * 100), 3000)
            assert resp.code == ResponseCode.SUCCESS
            resp = await bad.invoke(addr, RemotingCommand.request(code, {"x": "1"}, b"b"), 3000)
            assert resp.code == ResponseCode.NO_PERMISSION
        finally:
            await good.close()
            await bad.close()
            await server.stop()

    asyncio.run(asyncio.wait_for(main(), 20))
    assert seen == [True, False]
