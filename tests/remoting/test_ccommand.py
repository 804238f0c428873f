"""The C frame codec (``rocketmq_sdk.remoting._ccommand``) against its pure-Python twin.

Whatever the C code returns must be exactly what the Python code returns; where the C code
declines (None), the Python code decides (result or error). Skipped when the extension was not
built (no C compiler at install time) or ``ROCKETMQ_PURE_PYTHON`` is set.
"""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocketmq_sdk.exceptions import FrameError
from rocketmq_sdk.remoting import command as command_mod
from rocketmq_sdk.remoting.command import RemotingCommand

ccodec = command_mod._ccommand
pytestmark = pytest.mark.skipif(ccodec is None, reason="C accelerator not built or disabled")

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def py_decode(frame: bytes) -> RemotingCommand | FrameError:
    saved = command_mod._c_decode
    command_mod._c_decode = None
    try:
        return RemotingCommand.decode(frame)
    except FrameError as exc:
        return exc
    finally:
        command_mod._c_decode = saved


def py_encode(cmd: RemotingCommand) -> bytes | Exception:
    saved = command_mod._c_encode
    command_mod._c_encode = None
    try:
        return cmd.encode()
    except (ValueError, UnicodeEncodeError) as exc:
        return exc
    finally:
        command_mod._c_encode = saved


def frame_of(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return ((serialize_type << 24) | len(header)).to_bytes(4, "big") + header + body


def same_command(a: RemotingCommand, b: RemotingCommand) -> None:
    assert type(a) is type(b) is RemotingCommand
    for slot in RemotingCommand.__slots__:
        va, vb = getattr(a, slot), getattr(b, slot)
        assert va == vb, slot
        assert type(va) is type(vb), slot
    assert list(a.ext_fields) == list(b.ext_fields)  # same key order


def check_decode(frame: bytes) -> RemotingCommand | None:
    """C decode equals Python decode whenever C answers; returns the C answer."""
    got = ccodec.decode(frame)
    want = py_decode(frame)
    if got is not None:
        assert not isinstance(want, FrameError), f"C accepted what Python refuses: {want}"
        same_command(got, want)
    return got


# -- fixed cases ----------------------------------------------------------------------------

JAVA_SEND = (b'{"code":310,"extFields":{"a":"PG","b":"TopicTest","c":"TBW102","d":"4","e":"1","f":"0",'
             b'"g":"1700000000000","h":"0","i":"TAGS\\u0001TagA\\u0002","j":"0","k":"false","m":"false"},'
             b'"flag":0,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}')
CPP_SEND = (b'{"code":310,"extFields":{"a":"PG","b":"T","queueId":0,"e":1,"k":false,"m":true,"x":null},'
            b'"flag":0,"language":"CPP","opaque":1,"remark":"","serializeTypeCurrentRPC":"JSON","version":63}')
RESPONSE = (b'{"code":0,"extFields":{"msgId":"7F00000100002A9F0000000000000000","queueId":"1",'
            b'"queueOffset":"5","MSG_REGION":"DefaultRegion","TRACE_ON":"true"},"flag":1,"language":"JAVA",'
            b'"opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}')


def test_typical_headers_are_decoded_in_c() -> None:
    for header in (CPP_SEND, RESPONSE):
        cmd = check_decode(frame_of(header, b"body"))
        assert cmd is not None
        assert cmd.body == b"body"
    cpp = ccodec.decode(frame_of(CPP_SEND))
    assert cpp.ext_fields == {"a": "PG", "b": "T", "queueId": "0", "e": "1", "k": "false", "m": "true"}
    assert cpp.language == 1 and cpp.version == 63 and cpp.remark == ""


def test_escapes_are_resolved() -> None:
    cmd = check_decode(frame_of(JAVA_SEND))  # \u0001 and \u0002 in the properties
    assert cmd is not None and cmd.ext_fields["i"] == "TAGS\x01TagA\x02"
    header = (b'{"code":1,"remark":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\u4E2D\\ud83d\\ude00"}')
    cmd = check_decode(frame_of(header))
    assert cmd is not None and cmd.remark == '"\\/\b\f\n\r\t\u00e9\u4e2d\U0001f600'
    for lone in (b'"\\ud800"', b'"\\udc00"', b'"\\ud800\\u0041"', b'"\\x"', b'"\\u12"', b'"\\u12g4"', b'"a\\"'):
        assert check_decode(frame_of(b'{"code":1,"remark":' + lone + b"}")) is None


@pytest.mark.parametrize("header", [
    b"", b"{}", b"[]", b"{", b'{"code":1', b'{"code":1}x', b'{"code":1.5}', b'{"code":01}', b'{"code":"1"}',
    b'{"code":1e3}', b'{"code":-}', b'{"code":1,"extFields":[1]}', b'{"code":1,"extFields":{"a":1.0}}',
    b'{"code":1,"extFields":{"a":{"b":1}}}', b'{"code":1,"extFields":{"a":"1","a":"2"}}',
    b'{"code":1,"extFields":{"a":null,"a":"2"}}', b'{"code":1,"remark":5}', b'{"code":1,"language":1.0}',
    b'{"code":1,"other":[1]}', b'{"code":12345678901234567890}', b'{"code":1,"extFields":"x"}',
    b'{"code":1,"extFields":0}', b'{"code":1,"remark":"\xff"}', b'{"code":1,"remark":"\xed\xa0\x80"}',
    b'{"code":1,\n "flag" : 1 }  ', b'  {"code":1}', b'{"code":1,"language":"NOPE"}', b'{"code":1,"language":7}',
    b'{"code":1,"extFields":{}}', b'{"code":1,"extFields":null}', b'{"code":1,"extFields":{"a":-0}}',
    b'{"code":-0,"flag":-5}', b'{"code":1,"remark":null,"remark":"r"}', b'{"code":1,"x":"\\n"}',
    b'{"code":1,"extFields":{"a":"\x01"}}', b'{"code":1,"x":tru}', b'{"code":1,"x":true,"y":false,"z":null}',
])
def test_edge_cases_match_python(header: bytes) -> None:
    check_decode(frame_of(header, b"xyz"))


def test_short_and_foreign_frames_are_left_to_python() -> None:
    for frame in (b"", b"\x00\x00", b"\x00\x00\x00\x10{}", frame_of(b"\x00" * 20, serialize_type=1),
                  frame_of(b'{"code":1}', serialize_type=2)):
        assert ccodec.decode(frame) is None
        assert isinstance(py_decode(frame), FrameError) or frame[0] == 1


def test_decode_accepts_buffers() -> None:
    frame = frame_of(RESPONSE, b"b")
    for buf in (bytearray(frame), memoryview(frame)):
        cmd = ccodec.decode(buf)
        assert cmd.body == b"b" and type(cmd.body) is bytes


# -- generated headers ----------------------------------------------------------------------

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
ascii_text = st.text(alphabet=string.ascii_letters + string.digits + "_-", max_size=12)
ext_value = st.one_of(text, ascii_text, st.integers(-(10 ** 20), 10 ** 20), st.booleans(), st.none(),
                      st.floats(allow_nan=False, allow_infinity=False))
header_dict = st.fixed_dictionaries(
    {"code": st.one_of(st.integers(-(2 ** 31), 2 ** 31), st.just("3"))},
    optional={
        "flag": st.integers(0, 3),
        "opaque": st.integers(-(2 ** 63), 2 ** 63),
        "version": st.integers(0, 500),
        "language": st.one_of(st.sampled_from(["JAVA", "CPP", "PYTHON", "GO", "RUST", "??"]), st.integers(0, 20)),
        "remark": st.one_of(st.none(), text),
        "serializeTypeCurrentRPC": st.just("JSON"),
        "extFields": st.one_of(st.none(), st.dictionaries(st.one_of(text, ascii_text), ext_value, max_size=8)),
        "zz": ext_value,
    })


@SETTINGS
@given(header_dict, st.booleans(), st.booleans(), st.binary(max_size=20))
def test_generated_headers_match_python(obj: dict, ascii_only: bool, spaced: bool, body: bytes) -> None:
    sep = (", ", ": ") if spaced else (",", ":")
    header = json.dumps(obj, ensure_ascii=ascii_only, separators=sep).encode()
    check_decode(frame_of(header, body))


@SETTINGS
@given(st.binary(max_size=60))
def test_arbitrary_bytes_never_disagree(junk: bytes) -> None:
    check_decode(frame_of(junk))
    check_decode(frame_of(b'{"code":1,' + junk))


# -- encoding -------------------------------------------------------------------------------

commands = st.builds(
    RemotingCommand,
    st.integers(-(2 ** 31), 2 ** 31),
    language=st.integers(0, 15),
    version=st.integers(0, 500),
    opaque=st.integers(0, 2 ** 31),
    flag=st.integers(0, 3),
    remark=st.one_of(st.none(), text, st.just("")),
    ext_fields=st.one_of(st.none(), st.dictionaries(
        st.one_of(text, ascii_text), st.one_of(text, ascii_text, st.none(), st.integers(), st.booleans()),
        max_size=8)),
    body=st.one_of(st.binary(max_size=40), st.binary(max_size=40).map(bytearray)),
)


@SETTINGS
@given(commands)
def test_encode_matches_python(cmd: RemotingCommand) -> None:
    got = ccodec.encode(cmd)
    want = py_encode(cmd)
    if got is not None:
        assert got == want
        same_command(RemotingCommand.decode(got[4:]), py_decode(want[4:]))


def test_encode_typical_commands_in_c() -> None:
    cmd = RemotingCommand.request(11, {"consumerGroup": "g", "topic": "t", "queueId": "0", "k": None}, b"b")
    cmd.remark = 'quote " backslash \\ tab \t ctl \x01 é 中'
    assert ccodec.encode(cmd) == py_encode(cmd)
    cmd.ext_fields = {"only": None}  # non-empty dict with nothing left: "extFields":{}
    assert b'"extFields":{}' in ccodec.encode(cmd)
    assert ccodec.encode(cmd) == py_encode(cmd)


def test_encode_declines_what_python_must_handle() -> None:
    assert ccodec.encode(RemotingCommand(1, ext_fields={"n": 5})) is None  # non-str value
    assert ccodec.encode(RemotingCommand(1, ext_fields={1: "a"})) is None  # non-str key
    assert ccodec.encode(RemotingCommand(1, serialize_type=1)) is None
    assert ccodec.encode(RemotingCommand(1, remark="\ud800")) is None  # lone surrogate
    with pytest.raises(UnicodeEncodeError):
        RemotingCommand(1, remark="\ud800").encode()
    assert ccodec.encode(RemotingCommand(1, ext_fields={"a": "x" * 0x1000000})) is None  # header > 16 MiB
    with pytest.raises(ValueError, match="too long"):
        RemotingCommand(1, ext_fields={"a": "x" * 0x1000000}).encode()


def test_subclasses_with_their_own_header_keep_it() -> None:
    class Custom(RemotingCommand):
        __slots__ = ()

        def _encode_json_header(self) -> bytes:
            return b'{"code":1}'

    assert Custom._c_encodable is False
    assert RemotingCommand._c_encodable is True
    assert Custom(5).encode()[8:] == b'{"code":1}'


def test_pure_python_switch_disables_the_codec(monkeypatch: pytest.MonkeyPatch) -> None:
    from rocketmq_sdk import _speedups
    monkeypatch.setattr(_speedups, "PURE_PYTHON", True)
    assert _speedups.load("rocketmq_sdk.remoting._ccommand") is None


def test_configure_refuses_a_class_without_the_slots_and_keeps_decoding() -> None:
    """decode writes RemotingCommand's slots directly at the offsets configure() found: a class
    whose fields are not all slots is refused, and the refusal leaves the working setup as it was."""
    from rocketmq_sdk.remoting.command import _LANGUAGE_BY_NAME, _LANGUAGE_NAMES, _LANGUAGE_OTHER

    class WithDict:  # has __dict__: no slot offsets to write to
        pass

    class PartSlots:  # the first names are slots (at other offsets than RemotingCommand's), "body" is not
        __slots__ = ("pad", "ext_fields", "remark", "flag", "opaque", "version", "language", "code")
        body = b""
        serialize_type = 0

    frame = RemotingCommand(25, opaque=7, ext_fields={"k": "v"}, body=b"payload").encode()[4:]
    for bad in (WithDict, PartSlots):
        with pytest.raises(TypeError):
            ccodec.configure(bad, _LANGUAGE_BY_NAME, _LANGUAGE_NAMES, _LANGUAGE_OTHER)
        same_command(ccodec.decode(frame), py_decode(frame))
