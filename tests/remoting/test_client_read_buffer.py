"""The client reads its connections with ``recv_into`` one buffer per loop thread
(``BufferedChannel``): responses (and requests the server sends to the client) kept by their
callers must not change when later reads reuse the buffer."""

from __future__ import annotations

import asyncio
import random

import pytest
from rocketmq_sdk.protocol.codes import ResponseCode
from rocketmq_sdk.remoting import RemotingClient, RemotingCommand, RemotingServer
from rocketmq_sdk.remoting.channel import READ_BUFFER_SIZE, BufferedChannel

from tests.conftest import run_async as run
from tests.conftest import wait_until_async as wait_for

pytestmark = pytest.mark.timeout(30)

ECHO = 1000
PUSH = 1003  # a request the server sends to the client


async def echo(channel, cmd):
    return cmd.response(ResponseCode.SUCCESS, ext_fields=dict(cmd.ext_fields), body=cmd.body)


def test_responses_kept_by_callers_survive_reuse_of_the_read_buffer():
    rnd = random.Random(7)
    # small bodies (many frames per read) and bodies larger than one read (frames across reads)
    bodies = [bytes([i % 251]) * rnd.choice([0, 1, 100, 3000, 40_000, READ_BUFFER_SIZE + 1234]) for i in range(300)]

    async def main():
        servers = [RemotingServer(), RemotingServer()]
        addrs = []
        for server in servers:
            server.register_processor(ECHO, echo)
            addrs.append(f"127.0.0.1:{await server.start('127.0.0.1', 0)}")
        client = RemotingClient()
        try:
            resps = await asyncio.gather(*(
                client.invoke(addrs[i % 2], RemotingCommand.request(ECHO, {"i": str(i)}, body), 10_000)
                for i, body in enumerate(bodies)))
            # every answer is checked only after all of them arrived (the buffer was refilled since)
            assert [r.ext_fields["i"] for r in resps] == [str(i) for i in range(len(bodies))]
            assert [r.body for r in resps] == bodies
            assert all(type(r.body) is bytes for r in resps)
            channels = [await client.get_channel(a) for a in addrs]
            assert all(isinstance(ch, BufferedChannel) for ch in channels)
            assert channels[0]._read_view is channels[1]._read_view  # one buffer for the loop thread
        finally:
            await client.close()
            for server in servers:
                await server.stop()
    run(main())


def test_requests_from_the_server_to_the_client_survive_reuse_of_the_read_buffer():
    got: list[RemotingCommand] = []

    async def main():
        server = RemotingServer()
        server.register_processor(ECHO, echo)
        addr = f"127.0.0.1:{await server.start('127.0.0.1', 0)}"
        client = RemotingClient()
        client.register_processor(PUSH, lambda ch, cmd: got.append(cmd))
        try:
            await client.invoke(addr, RemotingCommand.request(ECHO, {}, b"hello"), 5000)
            (server_side,) = server.channels
            for i in range(200):
                await server_side.invoke_oneway(RemotingCommand.request(PUSH, {"i": str(i)}, bytes([i]) * (i * 37)))
            await wait_for(lambda: len(got) == 200, what="200 pushed requests")
            assert [(c.ext_fields["i"], c.body) for c in got] == [(str(i), bytes([i]) * (i * 37)) for i in range(200)]
        finally:
            await client.close()
            await server.stop()
    run(main())
