"""Regressions found by tests/broker/test_fuzz.py: JSON headers that made ``json``/``int`` raise
something other than ``ValueError`` (deep nesting -> RecursionError, ``1e400``/``Infinity`` ->
OverflowError) escaped ``RemotingCommand.decode`` as a non-FrameError, so asyncio reported
"Fatal error: protocol.data_received() call failed" instead of the server closing the connection
as for any malformed frame."""

from __future__ import annotations

import asyncio
import logging
import struct

import pytest
from rocketmq_sdk.exceptions import FrameError
from rocketmq_sdk.remoting import RemotingClient, RemotingCommand

from tests.remoting.test_client_server import ECHO, raw_connect, run, start_server

BAD_HEADERS = [
    b"[" * 100_000,                                                   # RecursionError in json.loads
    b'{"code":10,"extFields":{"a":' + b"[" * 50_000 + b"}}",
    b'{"code":1e400}',                                                # int(inf): OverflowError
    b'{"code":Infinity}',
    b'{"code":10,"opaque":-Infinity}',
    b'{"code":10,"flag":1e999}',
]


def _frame(header: bytes) -> bytes:
    return struct.pack(">II", 4 + len(header), len(header)) + header


@pytest.mark.parametrize("header", BAD_HEADERS, ids=range(len(BAD_HEADERS)))
def test_decode_raises_frame_error(header):
    with pytest.raises(FrameError, match="malformed JSON remoting header"):
        RemotingCommand.decode(_frame(header)[4:])


def test_server_closes_the_connection_without_an_asyncio_fatal_error(caplog):
    async def main():
        server, addr = await start_server()
        client = RemotingClient()
        try:
            for header in BAD_HEADERS:
                reader, writer = await raw_connect(addr)
                writer.write(_frame(header))
                assert await asyncio.wait_for(reader.read(), 5) == b""
                writer.close()
            resp = await client.invoke(addr, RemotingCommand.request(ECHO, body=b"still"), 2000)
            assert resp.body == b"still"
        finally:
            await client.close()
            await server.stop()

    with caplog.at_level(logging.WARNING):
        run(main())
    assert not [r for r in caplog.records if r.name == "asyncio"], [r.getMessage() for r in caplog.records]
    closes = [r for r in caplog.records if r.name == "rocketmq_sdk.remoting" and "closing connection" in r.getMessage()]
    assert len(closes) == len(BAD_HEADERS)
