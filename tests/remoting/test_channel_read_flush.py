"""``Channel.data_received`` writes what its handlers answer inline in one transport write at its
end (no loop callback per request); writes outside a read keep the coalescing flush on the next
loop iteration; a protocol error or a closed channel writes nothing more."""

from __future__ import annotations

import asyncio

import pytest
from rocketmq_sdk.remoting import Channel, RemotingCommand, RemotingServer

from tests.conftest import run_async as run

pytestmark = pytest.mark.timeout(30)

ECHO = 1200
LATER = 1201
CLOSE = ECHO + 5  # the processor closes the channel before answering


class RecordingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closing = False

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 50001) if name in ("peername", "sockname") else default

    def write(self, data) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True


def _frames(*opaques: int, code: int = ECHO) -> bytes:
    out = b""
    for o in opaques:
        cmd = RemotingCommand.request(code, {"o": str(o)})
        cmd.opaque = o
        out += cmd.encode()
    return out


def _opaques(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        out.append(RemotingCommand.decode(data[pos + 4:pos + 4 + n]).opaque)
        pos += 4 + n
    return out


def _channel() -> tuple[Channel, RecordingTransport, list]:
    server = RemotingServer()
    later: list[asyncio.Future] = []
    server.register_processor(ECHO, lambda ch, cmd: cmd.response(0, cmd.ext_fields["o"]))

    def deferred(ch, cmd):
        fut = asyncio.get_running_loop().create_future()
        later.append((fut, cmd))
        return fut

    server.register_processor(LATER, deferred)

    def close_it(c, cmd):
        c.close()
        return cmd.response(0, "after close")

    server.register_processor(CLOSE, close_it)
    ch = Channel(server)
    tr = RecordingTransport()
    ch.connection_made(tr)
    return ch, tr, later


def test_inline_answers_are_written_once_at_the_end_of_the_read():
    async def main():
        ch, tr, _ = _channel()
        ch.data_received(_frames(1))
        assert [_opaques(w) for w in tr.writes] == [[1]]  # written before data_received returned
        ch.data_received(_frames(2, 3, 4))
        assert [_opaques(w) for w in tr.writes] == [[1], [2, 3, 4]]  # one write for the read's three answers
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert len(tr.writes) == 2  # nothing left for a loop callback
        ch.data_received(_frames(5)[:10])  # a partial frame: nothing to answer yet
        assert len(tr.writes) == 2
        ch.data_received(_frames(5)[10:])
        assert [_opaques(w) for w in tr.writes][-1] == [5]
    run(main())


def test_writes_outside_a_read_are_flushed_on_the_next_loop_iteration():
    async def main():
        ch, tr, later = _channel()
        ch.data_received(_frames(7, 8, code=LATER))
        assert tr.writes == [] and len(later) == 2
        for fut, cmd in later:
            fut.set_result(cmd.response(0, "late"))
        await asyncio.sleep(0)  # the done callbacks write
        await asyncio.sleep(0)  # the coalescing flush
        assert [_opaques(w) for w in tr.writes] == [[7, 8]]
        # a write of the application's between reads goes out with the next flush, not a read's end
        ch.write(RemotingCommand.request(ECHO, {"o": "9"}))
        assert len(tr.writes) == 1
        await asyncio.sleep(0)
        assert len(tr.writes) == 2
    run(main())


def test_a_read_answered_partly_inline_and_partly_later():
    async def main():
        ch, tr, later = _channel()
        ch.data_received(_frames(1, code=ECHO) + _frames(2, code=LATER) + _frames(3, code=ECHO))
        assert [_opaques(w) for w in tr.writes] == [[1, 3]]
        later[0][0].set_result(later[0][1].response(0, "x"))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert [_opaques(w) for w in tr.writes] == [[1, 3], [2]]
    run(main())


def test_a_protocol_error_mid_read_writes_nothing_more():
    async def main():
        ch, tr, _ = _channel()
        ch.data_received(_frames(1) + b"\x00\x00\x00\x01junk")  # length 1 < 4: FrameError before any frame
        assert tr.writes == [] and ch.closed and tr.closing
        await asyncio.sleep(0)
        assert tr.writes == []
    run(main())


def test_a_processor_that_closes_the_channel_stops_the_read():
    async def main():
        ch, tr, _ = _channel()
        ch.data_received(_frames(1) + _frames(2, code=CLOSE) + _frames(3))
        assert [_opaques(w) for w in tr.writes] == [[1]]  # close() flushed the first answer; no more
        await asyncio.sleep(0)
        assert [_opaques(w) for w in tr.writes] == [[1]]
    run(main())
