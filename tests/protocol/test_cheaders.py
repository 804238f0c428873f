"""The C reader of typed headers (``_cheaders.read_header``) against the pure-Python reader.

Both readers are built by ``headers._compile_reader``; with the C module disabled it generates the
straight-line Python reader. Every header class is read from generated ``extFields`` (strings,
numbers, booleans, None, junk) both ways and compared field by field.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rocketmq_sdk.protocol import headers as headers_mod
from rocketmq_sdk.protocol.headers import Header, SendMessageRequestHeader

pytestmark = pytest.mark.skipif(headers_mod._c_read_header is None, reason="C accelerator not built or disabled")


def header_classes() -> list[type[Header]]:
    out = []
    for obj in vars(headers_mod).values():
        if isinstance(obj, type) and issubclass(obj, Header) and obj is not Header and dataclasses.is_dataclass(obj):
            out.append(obj)
    return out


CLASSES = header_classes()


def readers(cls: type[Header], keys: dict[str, str]):
    c_reader = headers_mod._compile_reader(cls, keys)
    saved = headers_mod._c_read_header
    headers_mod._c_read_header = None
    try:
        py_reader = headers_mod._compile_reader(cls, keys)
    finally:
        headers_mod._c_read_header = saved
    return c_reader, py_reader


def same(a: Header, b: Header) -> None:
    assert type(a) is type(b)
    for f in dataclasses.fields(a):
        va, vb = getattr(a, f.name), getattr(b, f.name)
        assert va == vb and type(va) is type(vb), f.name


values = st.one_of(
    st.none(), st.booleans(), st.integers(-(10 ** 20), 10 ** 20), st.floats(allow_nan=False),
    st.integers(-(10 ** 20), 10 ** 20).map(str), st.sampled_from(["true", "TRUE", "True", "false", "1", "0", " 1", "1 ",
                                                                  "\ttrue", "yes", "", "-", "-0", "007", "1_000",
                                                                  "+5", " 42 ", "４２", "İ", "\x01"]),
    st.text(max_size=6),
)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_reader_matches_python(cls: type[Header], data: st.DataObject) -> None:
    spec = cls._get_spec()
    keys = {attr: key for attr, key, _p in spec}
    ext = {key: data.draw(values) for _attr, key, _p in spec if data.draw(st.booleans())}
    ext.update(data.draw(st.dictionaries(st.text(max_size=3), values, max_size=2)))
    c_reader, py_reader = readers(cls, keys)
    got, want = outcome(c_reader, ext), outcome(py_reader, ext)
    if isinstance(want, Exception):  # float("inf") as an int: both raise the same
        assert type(got) is type(want)
    else:
        same(got, want)


def outcome(reader, ext):
    try:
        return reader(ext)
    except (OverflowError, ValueError) as exc:
        return exc


def test_send_header_v2_typical() -> None:
    ext = {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1700000000000", "h": "0",
           "i": "TAGS\x01A", "j": "0", "k": "false", "m": "1", "n": "broker-a"}
    h = SendMessageRequestHeader.from_v2(ext)
    assert (h.topic, h.queue_id, h.born_timestamp, h.unit_mode, h.batch, h.bname) == ("T", 3, 1700000000000, False,
                                                                                      True, "broker-a")
    assert h.max_reconsume_times is None
    c_reader, py_reader = readers(SendMessageRequestHeader, {attr: key for key, attr in SendMessageRequestHeader._V2})
    same(c_reader(ext), py_reader(ext))
    same(c_reader({"e": 2.5, "k": True, "g": "x"}), py_reader({"e": 2.5, "k": True, "g": "x"}))
