"""Message-body compression (``rocketmq_sdk.protocol.deflate``): zlib-ng when installed, else the
standard library; either way the streams are plain zlib (RFC 1950) that any RocketMQ client inflates."""

from __future__ import annotations

import os
import subprocess
import sys
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rocketmq_sdk.exceptions import FrameError
from rocketmq_sdk.protocol import deflate
from rocketmq_sdk.protocol.message import MessageExt
from rocketmq_sdk.protocol.message_codec import decode_messages, encode_message_ext

bodies = st.one_of(st.binary(max_size=20_000), st.text(max_size=5_000).map(str.encode),
                   st.integers(1, 20_000).map(lambda n: b"x" * n))


@settings(max_examples=150, deadline=None)
@given(body=bodies, level=st.integers(-1, 9))
def test_streams_are_plain_zlib_both_ways(body: bytes, level: int) -> None:
    assert zlib.decompress(deflate.compress(body, level)) == body  # what Java's Inflater reads
    assert deflate.decompress(zlib.compress(body, level)) == body  # what Java's Deflater writes


@pytest.mark.parametrize("junk", [b"", b"not zlib", zlib.compress(b"payload" * 100)[:-6]])
def test_a_corrupt_stream_raises_one_of_the_listed_errors(junk: bytes) -> None:
    with pytest.raises(deflate.ERRORS):
        deflate.decompress(junk)


def test_a_corrupt_compressed_record_body_is_a_frame_error() -> None:
    rec = encode_message_ext(MessageExt(topic="T", body=b"\x78\x9c garbage", sys_flag=0x1,
                                        born_host="1.2.3.4:5", store_host="1.2.3.4:6"))
    with pytest.raises(FrameError, match="malformed message record"):
        decode_messages(bytes(rec))
    assert decode_messages(bytes(rec), decompress=False)[0].body == b"\x78\x9c garbage"


def _implementation(env: dict[str, str], block_zlib_ng: bool = False) -> str:
    code = ("import sys\n" + ("sys.modules['zlib_ng'] = None\n" if block_zlib_ng else "")
            + "from rocketmq_sdk.protocol import deflate\nprint(deflate.IMPLEMENTATION)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, **env})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_standard_library_is_used_without_zlib_ng_or_when_asked() -> None:
    assert _implementation({}, block_zlib_ng=True) == "zlib"
    assert _implementation({"ROCKETMQ_ZLIB": "zlib"}) == "zlib"


def test_zlib_ng_is_used_when_installed() -> None:
    pytest.importorskip("zlib_ng")
    assert _implementation({"ROCKETMQ_ZLIB": ""}) == "zlib-ng"


def test_benchmark_results_record_the_zlib_module() -> None:
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import run  # benchmarks/run.py

    info = run.runtime_info()
    assert info["zlib"] == deflate.IMPLEMENTATION
    assert f"Message bodies: {deflate.IMPLEMENTATION}." in run.runtime_line(info)
