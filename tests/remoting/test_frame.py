"""FrameDecoder: stream splitting at arbitrary boundaries and Java's frame limits."""

from __future__ import annotations

import random
import struct

import pytest
from rocketmq_sdk.exceptions import FrameError
from rocketmq_sdk.remoting.command import RemotingCommand
from rocketmq_sdk.remoting.frame import FrameDecoder


def _stream() -> tuple[bytes, list[bytes]]:
    cmds = [RemotingCommand.request(310, {"a": "g", "b": f"topic{i}"}, bytes(range(i % 256)) * (i % 7))
            for i in range(60)]
    cmds.append(RemotingCommand.request(34))  # no body
    frames = [c.encode() for c in cmds]
    return b"".join(frames), [f[4:] for f in frames]


def test_whole_stream_in_one_feed():
    data, expected = _stream()
    dec = FrameDecoder()
    assert dec.feed(data) == expected
    assert dec.buffered == 0


def test_byte_by_byte():
    data, expected = _stream()
    dec = FrameDecoder()
    got = []
    for i in range(len(data)):
        got.extend(dec.feed(data[i:i + 1]))
    assert got == expected and dec.buffered == 0


@pytest.mark.parametrize("seed", range(20))
def test_random_split_points(seed):
    rnd = random.Random(seed)
    data, expected = _stream()
    cuts = sorted(rnd.sample(range(1, len(data)), rnd.randint(1, 40)))
    dec = FrameDecoder()
    got = []
    for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
        got.extend(dec.feed(data[a:b]))
    assert got == expected
    assert [RemotingCommand.decode(f).ext_fields["b"] for f in got[:3]] == ["topic0", "topic1", "topic2"]


def test_partial_frame_is_kept():
    frame = RemotingCommand.request(11, body=b"x" * 100).encode()
    dec = FrameDecoder()
    assert dec.feed(frame[:50]) == []
    assert dec.buffered == 50
    assert dec.feed(frame[50:] + frame[:3]) == [frame[4:]]
    assert dec.buffered == 3


@pytest.mark.parametrize("data", [
    struct.pack(">I", 3),                                   # length < 4
    struct.pack(">I", 0),
    struct.pack(">II", 100, 97),                            # header length > length - 4
])
def test_malformed_lengths(data):
    with pytest.raises(FrameError):
        FrameDecoder().feed(data)


def test_max_frame_length_counts_the_prefix():
    dec = FrameDecoder(max_frame_length=64)
    ok = struct.pack(">II", 60, 0) + b"\0" * 56
    assert dec.feed(ok) == [ok[4:]]
    with pytest.raises(FrameError):
        FrameDecoder(max_frame_length=64).feed(struct.pack(">I", 61))


def test_default_limit_is_16_mib():
    with pytest.raises(FrameError):
        FrameDecoder().feed(struct.pack(">I", 16 * 1024 * 1024 - 3))
    assert FrameDecoder().feed(struct.pack(">II", 16 * 1024 * 1024 - 4, 0)) == []
