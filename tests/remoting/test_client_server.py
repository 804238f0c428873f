"""RemotingClient and RemotingServer over real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import socket
import struct
import time

import pytest
from rocketmq_sdk.exceptions import (
    ClientStateError,
    IllegalArgumentError,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from rocketmq_sdk.protocol.codes import ResponseCode, SerializeType
from rocketmq_sdk.remoting import EventLoopThread, RemotingClient, RemotingCommand, RemotingServer
from rocketmq_sdk.remoting.client import parse_addr
from rocketmq_sdk.remoting.frame import FrameDecoder

from tests.conftest import run_async as run
from tests.conftest import wait_until_async as wait_for

pytestmark = pytest.mark.timeout(30)

ECHO = 1000
SILENT = 1001
FAIL = 1002


async def echo(channel, cmd):
    return cmd.response(ResponseCode.SUCCESS, ext_fields=dict(cmd.ext_fields), body=cmd.body)


async def start_server(**kw) -> tuple[RemotingServer, str]:
    server = RemotingServer(**kw)
    server.register_processor(ECHO, echo)
    server.register_processor(SILENT, lambda ch, cmd: None)

    def fail(ch, cmd):
        raise ValueError("disk on fire")

    server.register_processor(FAIL, fail)
    port = await server.start("127.0.0.1", 0)
    return server, f"127.0.0.1:{port}"


async def raw_connect(addr: str):
    host, port = addr.split(":")
    return await asyncio.open_connection(host, int(port))


async def read_frame(reader: asyncio.StreamReader) -> RemotingCommand:
    (length,) = struct.unpack(">I", await reader.readexactly(4))
    return RemotingCommand.decode(await reader.readexactly(length))


def test_echo_request_response():
    async def main():
        server, addr = await start_server()
        client = RemotingClient()
        try:
            resp = await client.invoke(addr, RemotingCommand.request(ECHO, {"k": "v"}, b"payload"), 2000)
            assert resp.is_response and resp.code == ResponseCode.SUCCESS
            assert resp.ext_fields == {"k": "v"} and resp.body == b"payload"
        finally:
            await client.close()
            await server.stop()
    run(main())


def test_thousand_in_flight_requests_answered_out_of_order():
    n = 1000

    async def main():
        server, addr = await start_server()
        held: list[tuple[RemotingCommand, asyncio.Future]] = []
        all_in = asyncio.Event()

        async def hold(channel, cmd):
            fut = asyncio.get_running_loop().create_future()
            held.append((cmd, fut))
            if len(held) == n:
                all_in.set()
            await fut
            return cmd.response(0, body=cmd.body)

        server.register_processor(ECHO, hold)
        client = RemotingClient()
        try:
            calls = [asyncio.ensure_future(client.invoke(addr, RemotingCommand.request(ECHO, body=str(i).encode()), 10000))
                     for i in range(n)]
            await asyncio.wait_for(all_in.wait(), 10)
            assert len(server.channels) == 1
            for _, fut in reversed(held):  # answer newest first
                fut.set_result(None)
            results = await asyncio.gather(*calls)
            assert [r.body for r in results] == [str(i).encode() for i in range(n)]
            channel = await client.get_channel(addr)
            assert channel.pending_count == 0
        finally:
            await client.close()
            await server.stop()
    run(main())


def test_timeout_removes_the_waiter_and_late_response_is_dropped():
    async def main():
        server, addr = await start_server()
        release = asyncio.Event()

        async def late(channel, cmd):
            await release.wait()
            return cmd.response(0)

        server.register_processor(ECHO, late)
        client = RemotingClient()
        try:
            channel = await client.get_channel(addr)
            t0 = time.monotonic()
            with pytest.raises(RemotingTimeoutError):
                await client.invoke(addr, RemotingCommand.request(ECHO), 150)
            assert 0.1 < time.monotonic() - t0 < 2
            assert channel.pending_count == 0
            with pytest.raises(RemotingTimeoutError):
                await client.invoke(addr, RemotingCommand.request(SILENT), 50)  # processor returns None
            assert channel.pending_count == 0
            release.set()
            # the late response arrives and is ignored; the connection keeps working
            resp = await client.invoke(addr, RemotingCommand.request(FAIL), 2000)
            assert resp.code == ResponseCode.SYSTEM_ERROR
            assert channel.pending_count == 0 and not channel.closed
        finally:
            await client.close()
            await server.stop()
    run(main())


def test_oneway_request_is_never_answered():
    async def main():
        server, addr = await start_server()
        seen: list[RemotingCommand] = []

        def record(ch, cmd):
            seen.append(cmd)
            return cmd.response(0)

        server.register_processor(ECHO, record)
        reader, writer = await raw_connect(addr)
        try:
            oneway = RemotingCommand.request(ECHO, oneway=True)
            unknown_oneway = RemotingCommand.request(4242, oneway=True)
            failing_oneway = RemotingCommand.request(FAIL, oneway=True)
            normal = RemotingCommand.request(ECHO)
            writer.write(oneway.encode() + unknown_oneway.encode() + failing_oneway.encode() + normal.encode())
            resp = await asyncio.wait_for(read_frame(reader), 5)
            assert resp.opaque == normal.opaque  # the first and only answer
            assert [c.is_oneway for c in seen] == [True, False]
        finally:
            writer.close()
            await server.stop()
    run(main())


def test_client_invoke_oneway_sets_flag():
    async def main():
        server, addr = await start_server()
        got: list[RemotingCommand] = []
        server.register_processor(ECHO, lambda ch, cmd: got.append(cmd))
        client = RemotingClient()
        try:
            await client.invoke_oneway(addr, RemotingCommand.request(ECHO, {"x": "1"}))
            await wait_for(lambda: got, what="oneway request")
            assert got[0].is_oneway and got[0].ext_fields == {"x": "1"}
        finally:
            await client.close()
            await server.stop()
    run(main())


def test_server_to_client_requests_on_the_clients_connection():
    async def main():
        server, addr = await start_server()
        client = RemotingClient()
        notified: list[RemotingCommand] = []
        client.register_processor(40, lambda ch, cmd: notified.append(cmd))  # NOTIFY_CONSUMER_IDS_CHANGED

        async def running_info(channel, cmd):
            return cmd.response(0, body=b"info:" + channel.remote_addr.encode())

        client.register_processor(307, running_info)
        try:
            await client.invoke(addr, RemotingCommand.request(ECHO), 2000)
            (channel,) = server.channels
            client_channel = await client.get_channel(addr)
            assert channel.remote_addr == client_channel.local_addr
            resp = await channel.invoke(RemotingCommand.request(307, {"consumerGroup": "g"}), 2000)
            assert resp.code == 0 and resp.body == f"info:{addr}".encode()
            await channel.invoke_oneway(RemotingCommand.request(40, {"consumerGroup": "g"}))
            await wait_for(lambda: notified, what="oneway notification")
            assert notified[0].is_oneway and notified[0].ext_fields == {"consumerGroup": "g"}
            resp = await channel.invoke(RemotingCommand.request(4242), 2000)
            assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            assert channel.pending_count == 0
        finally:
            await client.close()
            await server.stop()
    run(main())


def test_unknown_code_and_handler_error_and_serialize_type():
    async def main():
        server, addr = await start_server()
        client = RemotingClient()
        try:
            resp = await client.invoke(addr, RemotingCommand.request(777), 2000)
            assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED == 3
            assert resp.remark == " request type 777 not supported"
            resp = await client.invoke(addr, RemotingCommand.request(FAIL), 2000)
            assert resp.code == ResponseCode.SYSTEM_ERROR == 1 and "disk on fire" in resp.remark

            async def async_fail(ch, cmd):
                raise RuntimeError("async boom")

            server.register_processor(FAIL, async_fail)
            resp = await client.invoke(addr, RemotingCommand.request(FAIL), 2000)
            assert resp.code == ResponseCode.SYSTEM_ERROR and "async boom" in resp.remark
            req = RemotingCommand.request(ECHO, {"a": "b"}, serialize_type=SerializeType.ROCKETMQ)
            resp = await client.invoke(addr, req, 2000)
            assert resp.serialize_type == SerializeType.ROCKETMQ and resp.ext_fields == {"a": "b"}
        finally:
            await client.close()
            await server.stop()
    run(main())


def test_default_processor_handles_unregistered_codes():
    async def main():
        server, addr = await start_server()
        server.default_processor = lambda ch, cmd: cmd.response(0, remark=f"default {cmd.code}")
        client = RemotingClient()
        try:
            resp = await client.invoke(addr, RemotingCommand.request(555), 2000)
            assert (resp.code, resp.remark) == (0, "default 555")
        finally:
            await client.close()
            await server.stop()
    run(main())


@pytest.mark.parametrize("garbage", [
    struct.pack(">I", 2) + b"xx",                                    # length < 4
    struct.pack(">II", 10, 50) + b"\0" * 6,                          # header longer than frame
    struct.pack(">II", 6, 2) + b"{x",                                # not JSON
    struct.pack(">II", 5000, 10),                                    # larger than max_frame_length
])
def test_malformed_frame_closes_only_that_connection(garbage):
    async def main():
        server, addr = await start_server(max_frame_length=4096)
        closed: list[str] = []
        server.on_channel_close(lambda ch: closed.append(ch.remote_addr))
        client = RemotingClient()
        try:
            await client.invoke(addr, RemotingCommand.request(ECHO), 2000)
            reader, writer = await raw_connect(addr)
            writer.write(garbage)
            assert await asyncio.wait_for(reader.read(), 5) == b""  # server closed it, no reply
            writer.close()
            await wait_for(lambda: closed, what="close callback")
            assert len(closed) == 1
            resp = await client.invoke(addr, RemotingCommand.request(ECHO, body=b"still"), 2000)
            assert resp.body == b"still"
            assert len(server.channels) == 1
        finally:
            await client.close()
            await server.stop()
    run(main())


def test_connection_loss_fails_pending_requests_at_once():
    async def main():
        server, addr = await start_server()
        client = RemotingClient()
        try:
            await client.get_channel(addr)
            calls = [asyncio.ensure_future(client.invoke(addr, RemotingCommand.request(SILENT), 20000))
                     for _ in range(10)]
            channel = await client.get_channel(addr)
            await wait_for(lambda: channel.pending_count == 10, what="requests in flight")
            t0 = time.monotonic()
            (server_side,) = server.channels
            server_side.close()
            results = await asyncio.gather(*calls, return_exceptions=True)
            assert time.monotonic() - t0 < 2
            assert all(isinstance(r, RemotingSendRequestError) for r in results)
            assert channel.pending_count == 0 and client.addresses == []
            # next call reconnects
            resp = await client.invoke(addr, RemotingCommand.request(ECHO), 2000)
            assert resp.code == 0
        finally:
            await client.close()
            await server.stop()
    run(main())


def test_client_close_fails_pending_and_refuses_new_requests():
    async def main():
        server, addr = await start_server()
        client = RemotingClient()
        try:
            call = asyncio.ensure_future(client.invoke(addr, RemotingCommand.request(SILENT), 20000))
            await wait_for(lambda: server.channels, what="connection")
            channel = await client.get_channel(addr)
            await wait_for(lambda: channel.pending_count == 1, what="request in flight")
            await client.close()
            with pytest.raises(RemotingSendRequestError):
                await call
            with pytest.raises(ClientStateError):
                await client.invoke(addr, RemotingCommand.request(ECHO), 1000)
        finally:
            await server.stop()
    run(main())


def test_connect_error():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()

    async def main():
        client = RemotingClient(connect_timeout_ms=1000)
        with pytest.raises(RemotingConnectError) as info:
            await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO), 2000)
        assert info.value.addr == f"127.0.0.1:{port}"
        await client.close()
    run(main())


def test_concurrent_callers_share_one_connection_and_hooks_run():
    async def main():
        server, addr = await start_server()
        calls: list[tuple[str, int, int | None]] = []

        class Hook:
            def before_request(self, a, cmd):
                cmd.ext_fields["AccessKey"] = "ak"
                calls.append(("before", cmd.opaque, None))

            def after_response(self, a, cmd, resp):
                calls.append(("after", cmd.opaque, resp.code))

        client = RemotingClient(rpc_hooks=[Hook()])
        try:
            resps = await asyncio.gather(*(client.invoke(addr, RemotingCommand.request(ECHO), 3000)
                                           for _ in range(50)))
            assert len(server.channels) == 1 and client.addresses == [addr]
            assert all(r.ext_fields == {"AccessKey": "ak"} for r in resps)
            assert sum(1 for c in calls if c[0] == "before") == 50
            assert sum(1 for c in calls if c[0] == "after" and c[2] == 0) == 50
            client.close_connection(addr)
            await wait_for(lambda: not server.channels, what="server to see the close")
        finally:
            await client.close()
            await server.stop()
    run(main())


def test_idle_channel_is_closed_by_the_server():
    async def main():
        server, addr = await start_server(idle_timeout_s=0.2)
        closed: list[str] = []
        server.on_channel_close(lambda ch: closed.append(ch.remote_addr))
        client = RemotingClient()
        try:
            await client.invoke(addr, RemotingCommand.request(ECHO), 2000)
            local = (await client.get_channel(addr)).local_addr
            await wait_for(lambda: closed, timeout=5, what="idle close")
            assert closed == [local]
            await wait_for(lambda: client.addresses == [], what="client to see the close")
        finally:
            await client.close()
            await server.stop()
    run(main())


def test_response_is_json_for_a_cpp_style_request():
    async def main():
        server, addr = await start_server()
        reader, writer = await raw_connect(addr)
        try:
            header = (b'{"code":1000,"extFields":{"queueId":0,"topic":"T"},"flag":0,"language":"CPP",'
                      b'"opaque":77,"remark":"","version":63}\n')
            writer.write(struct.pack(">II", 4 + len(header), len(header)) + header)
            (length,) = struct.unpack(">I", await asyncio.wait_for(reader.readexactly(4), 5))
            frame = await reader.readexactly(length)
            assert frame[0] == 0  # serialize type JSON: the C++ client reads the whole int as length
            (resp,) = FrameDecoder().feed(struct.pack(">I", length) + frame)
            resp = RemotingCommand.decode(resp)
            assert resp.opaque == 77 and resp.is_response and resp.ext_fields == {"queueId": "0", "topic": "T"}
        finally:
            writer.close()
            await server.stop()
    run(main())


def test_oneway_respects_backpressure_when_the_peer_stops_reading():
    async def main():
        server, addr = await start_server()
        stalled = asyncio.Event()

        def stall(channel, cmd):
            channel.transport.pause_reading()
            stalled.set()

        server.register_processor(ECHO, stall)
        client = RemotingClient()
        try:
            await client.invoke_oneway(addr, RemotingCommand.request(ECHO))
            await asyncio.wait_for(stalled.wait(), 5)
            body = b"x" * (1024 * 1024)
            with pytest.raises(RemotingTimeoutError):
                for _ in range(500):  # kernel buffers absorb a few MiB, then the writer must wait
                    await client.invoke_oneway(addr, RemotingCommand.request(SILENT, body=body), timeout_ms=200)
            channel = await client.get_channel(addr)
            assert channel.transport.get_write_buffer_size() < 8 * len(body)  # buffering stayed bounded
        finally:
            await client.close(timeout_s=0.2)  # the peer never reads: unsent data is dropped
            await server.stop()
    run(main())


@pytest.mark.parametrize("addr", ["nohost", ":9876", "h:", "h:x", "h:0", "h:70000"])
def test_parse_addr_rejects_bad_addresses(addr):
    with pytest.raises(IllegalArgumentError):
        parse_addr(addr)


def test_parse_addr():
    assert parse_addr("127.0.0.1:9876") == ("127.0.0.1", 9876)
    assert parse_addr("[::1]:10911") == ("::1", 10911)


def test_sync_facade_over_event_loop_thread():
    """The SDK's sync API shape: a client living on an EventLoopThread, called from other threads."""
    io = EventLoopThread("facade-io")
    try:
        server, addr = io.run(start_server(), 5)
        client = RemotingClient()

        def call(i: int) -> bytes:
            return io.run(client.invoke(addr, RemotingCommand.request(ECHO, body=str(i).encode()), 3000), 5).body

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            assert list(pool.map(call, range(200))) == [str(i).encode() for i in range(200)]
        with pytest.raises(RemotingTimeoutError):
            io.run(client.invoke(addr, RemotingCommand.request(SILENT), 100), 5)
        io.run(client.close(), 5)
        io.run(server.stop(), 5)
        io.run(server.stop(), 5)  # idempotent
    finally:
        io.stop()


def test_server_cannot_start_twice():
    async def main():
        server, _ = await start_server()
        try:
            with pytest.raises(ClientStateError):
                await server.start()
        finally:
            await server.stop()
    run(main())


@pytest.mark.parametrize("side", ["client", "server"])
def test_close_ends_processor_tasks_that_had_not_started(side):
    """A request that arrives just before close() has its async processor scheduled as a Task that
    has not run yet; close() cancels it. The cancellation must reach the processor's own coroutine:
    a wrapper task cancelled before its first step never awaited it ("coroutine ... was never
    awaited", seen in test_unregister_client_notifies_the_remaining_members), and close() must
    return with the task ended."""
    async def main():
        server, addr = await start_server()
        client = RemotingClient()
        started: list[int] = []
        coros: list = []

        async def slow(channel, cmd):
            started.append(cmd.code)
            await asyncio.sleep(30)  # held until close() cancels it

        def processor(channel, cmd):
            coros.append(slow(channel, cmd))
            return coros[-1]

        owner = client if side == "client" else server
        owner.register_processor(41, processor)
        try:
            await client.invoke(addr, RemotingCommand.request(ECHO), 2000)
            (server_channel,) = server.channels
            client_channel = await client.get_channel(addr)
            # hand the request to the processor directly (as data_received does), then close at
            # once: the processor's Task exists but has not had a step yet
            channel = client_channel if side == "client" else server_channel
            owner._on_request(channel, RemotingCommand.request(41))
            (task,) = owner._tasks
            assert not started
            if side == "client":
                await client.close()
            else:
                await server.stop()
            assert task.done(), "close() returned with a processor task still pending"
            # the cancellation reached the processor's coroutine (CREATED = never awaited)
            assert inspect.getcoroutinestate(coros[0]) == inspect.CORO_CLOSED
        finally:
            await client.close()
            await server.stop()
    run(main())
