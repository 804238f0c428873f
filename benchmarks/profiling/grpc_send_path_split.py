"""The proxy + broker's CPU per served SendMessage (local mode, issue 31), split by stage: each
stage of ``Producing.send`` timed alone in a tight loop (best of 3), then the whole handler
(``MessagingService._unary("SendMessage")``: parse, checks, route, conversion, the broker's
dispatch and store put, the response) in a loop without grpc. The sum of the stages is well
below the whole: the rest is the glue between them (coroutines, awaits) and a colder cache when
they run in turn (recorded in ``benchmarks/results/2026-11-28-grpc-proxy-server-cpu.md``).

    .venv/bin/python benchmarks/profiling/grpc_send_path_split.py [-n 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc_proxy_cpu as g  # noqa: E402
from rocketmq_broker.proxy import GrpcProxy  # noqa: E402
from rocketmq_broker.proxy.checks import check_message, topic_name  # noqa: E402
from rocketmq_broker.proxy.local import LocalChannel  # noqa: E402
from rocketmq_sdk import Message, Producer  # noqa: E402
from rocketmq_sdk.client.mq_client_api import send_result_from_response  # noqa: E402
from rocketmq_sdk.grpc import v2  # noqa: E402
from rocketmq_sdk.grpc.convert import from_v2  # noqa: E402
from rocketmq_sdk.producer.prepare import SendHeaderTemplate  # noqa: E402
from rocketmq_sdk.protocol.message_codec import encode_properties  # noqa: E402
from rocketmq_sdk.remoting import RemotingCommand  # noqa: E402

N = 20000


def t(label: str, fn, n: int) -> float:
    """Best of 3 loops of ``n`` calls of ``fn``: CPU µs per call."""
    for _ in range(500):
        fn()
    best = 1e9
    for _ in range(3):
        c0 = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, (time.process_time() - c0) / n * 1e6)
    print(f"{label:66} {best:6.2f} µs")
    return best


async def main(n: int) -> None:
    ns, broker, cfg = await g.start_broker("grpc-send-split-")
    raw = Producer("bench_pg", endpoints="127.0.0.1:1", protocol="grpc")._request(
        [Message("cpu_path", b"x" * 128)])[0].SerializeToString()
    proxy = GrpcProxy(ns.addr, local_broker=(broker.server, cfg.broker_addr))
    await proxy.serve()
    call, ctx = proxy.service._unary("SendMessage"), g._Context()
    for _ in range(300):
        await call(raw, ctx)
    c0 = time.process_time()
    for _ in range(n):
        await call(raw, ctx)
    total = (time.process_time() - c0) / n * 1e6
    req = v2.SendMessageRequest.FromString(raw)
    m = req.messages[0]
    routes = proxy.service.routes
    route = await routes.get("cpu_path")
    now = int(time.time() * 1000)
    props = from_v2(m, now_ms=now)
    wq = routes.select(route, None)

    def header() -> dict[str, str]:  # as Producing._send_one builds it
        return SendHeaderTemplate.fields("GRPC_PROXY_PRODUCER", "cpu_path", "TBW102", "4", False, str(wq.queue_id),
                                         "0", str(now), "0", encode_properties(props), wq.broker_name)

    hdr = header()
    ch = LocalChannel("127.0.0.1:9", cfg.broker_addr, asyncio.get_running_loop())
    srv = broker.server

    def dispatch() -> asyncio.Future:
        cmd = RemotingCommand.request(310, dict(hdr), m.body)
        fut = ch.expect(cmd.opaque)
        srv._on_request(ch, cmd)  # type: ignore[arg-type]
        return fut

    resp = dispatch().result()

    def build() -> bytes:
        r = v2.SendMessageResponse()
        e = r.entries.add()
        e.message_id, e.transaction_id, e.offset, e.recall_handle = "01ABC", "", 5, ""
        e.status.code, e.status.message = v2.OK, "OK"
        r.status.code, r.status.message = v2.OK, "OK"
        return r.SerializeToString()

    stages = [
        ("parse SendMessageRequest (upb FromString)", lambda: v2.SendMessageRequest.FromString(raw)),
        ("topic name (a remembered legal name)", lambda: topic_name(m.topic)),
        ("check_message (id, tag, keys, properties, body)", lambda: check_message(m, 4 << 20, now)),
        ("queue choice (RouteCache.select)", lambda: routes.select(route, None)),
        ("from_v2: 5.x message -> RocketMQ properties", lambda: from_v2(m, now_ms=now)),
        ("V2 header fields + encode_properties", header),
        ("RemotingCommand.request", lambda: RemotingCommand.request(310, hdr, m.body)),
        ("broker: request + hooks + SendProcessor + store put + response", dispatch),
        ("send_result_from_response", lambda: send_result_from_response(resp, wq.addr, wq.mq, "id")),
        ("SendMessageResponse built + serialised", build),
    ]
    s = sum(t(label, fn, n) for label, fn in stages)
    print(f"{'sum of the stages':66} {s:6.2f} µs")
    print(f"{'the whole handler in a loop (no grpc)':66} {total:6.2f} µs   load {os.getloadavg()[0]:.1f}")
    await proxy.aclose()
    await broker.stop()
    await ns.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=N)
    asyncio.run(main(ap.parse_args().n))
