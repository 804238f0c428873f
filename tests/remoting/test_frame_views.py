"""FrameDecoder fed from a reused read buffer (the server's ``recv_into`` buffer, shared by its
connections): frames cut straight from the view and partial frames kept must not change when the
buffer is overwritten by the next read, for any split of the stream."""

from __future__ import annotations

import random

from rocketmq_sdk.remoting.command import RemotingCommand
from rocketmq_sdk.remoting.frame import FrameDecoder


def test_frames_survive_reuse_of_the_read_buffer():
    rnd = random.Random(3)
    cmds = [RemotingCommand.request(310, {"k": "v" * rnd.randrange(0, 50)}, bytes([i % 256]) * rnd.randrange(0, 300))
            for i in range(300)]
    stream = b"".join(c.encode() for c in cmds)
    expected = [c.encode()[4:] for c in cmds]
    for _ in range(20):
        shared = bytearray(4096)
        view = memoryview(shared)
        dec = FrameDecoder()
        got: list[bytes] = []
        pos = 0
        while pos < len(stream):
            n = min(rnd.choice([1, 3, 7, 100, 1000, 4096]), len(stream) - pos)
            view[:n] = stream[pos:pos + n]
            got += dec.feed(view[:n])
            view[:n] = b"\xff" * n  # the next read overwrites the buffer
            pos += n
        assert got == expected
        assert dec.buffered == 0
