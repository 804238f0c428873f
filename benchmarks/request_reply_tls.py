"""Request-reply round trips and the cost of TLS, against an in-process dev cluster.

Measures (a) sequential ``Producer.request`` latency (p50/p99) with a PushConsumer replier,
(b) ``request_async`` throughput with many requests in flight, (c) sequential sync ``send``
rate over plain TCP and over TLS (same cluster settings, TLS cluster with a throwaway
``trustme`` certificate).

Usage: ``python benchmarks/request_reply_tls.py [--requests 2000] [--sends 5000]``. Everything
(broker, name server, clients) shares one process and its GIL, so absolute numbers are lower than
against a separate broker; compare the rows with each other.
"""

from __future__ import annotations

import argparse
import ssl
import statistics
import time

import trustme
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import ConsumeConcurrentlyStatus, Message, Producer, PushConsumer
from rocketmq_sdk.admin.client import AdminClient
from rocketmq_sdk.remoting.client import client_ssl_context


def _replier(namesrv: str, topic: str, tls: dict) -> tuple[Producer, PushConsumer]:
    replier = Producer("bench_replier", namesrv, instance_name="bench-replier", **tls)
    replier.start()

    def listener(msgs, ctx):
        for m in msgs:
            replier.reply(m, m.body)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("bench_reply_cg", namesrv, instance_name="bench-cg", rebalance_interval=500,
                            consume_from_where="CONSUME_FROM_LAST_OFFSET", suspend_timeout=1000,
                            pull_timeout=4000, **tls)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    deadline = time.monotonic() + 30
    while len(consumer.process_queues()) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    return replier, consumer


def bench_request_reply(namesrv: str, n: int) -> None:
    topic = "BenchRequestTopic"
    with AdminClient(namesrv) as admin:
        admin.create_topic(topic, cluster="DefaultCluster", read_queue_nums=4, write_queue_nums=4)
    time.sleep(0.5)  # let the route reach the name server (benchmark only)
    replier, consumer = _replier(namesrv, topic, {})
    try:
        with Producer("bench_requester", namesrv, instance_name="bench-req") as requester:
            for _ in range(50):  # warm-up: route, heartbeat, connections
                requester.request(Message(topic, b"w"), 10_000)
            lat = []
            t0 = time.perf_counter()
            for _ in range(n):
                s = time.perf_counter()
                requester.request(Message(topic, b"x" * 100), 10_000)
                lat.append((time.perf_counter() - s) * 1e3)
            wall = time.perf_counter() - t0
            lat.sort()
            print(f"request (sync, sequential): {n / wall:,.0f} req/s, p50 {statistics.median(lat):.2f} ms, "
                  f"p99 {lat[int(len(lat) * 0.99)]:.2f} ms")
            t0 = time.perf_counter()
            futs = [requester.request_async(Message(topic, b"x" * 100), 30_000) for _ in range(n)]
            for f in futs:
                f.result(60)
            print(f"request_async ({n} in flight): {n / (time.perf_counter() - t0):,.0f} req/s")
    finally:
        consumer.shutdown()
        replier.shutdown()


def bench_send(namesrv: str, n: int, label: str, tls: dict) -> float:
    name = label.replace(" ", "_")
    with Producer(f"bench_send_{name}", namesrv, instance_name=f"bench-send-{name}", **tls) as p:
        for _ in range(200):
            p.send(Message("BenchSendTopic", b"w"))
        t0 = time.perf_counter()
        for _ in range(n):
            p.send(Message("BenchSendTopic", b"x" * 100))
        rate = n / (time.perf_counter() - t0)
    print(f"sync send over {label}: {rate:,.0f} msg/s")
    return rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--sends", type=int, default=5000)
    args = ap.parse_args()
    with start_dev_cluster(in_process=True) as cluster:
        bench_request_reply(cluster.namesrv_addr, args.requests)
        plain = bench_send(cluster.namesrv_addr, args.sends, "plain TCP", {})
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    client_ctx = client_ssl_context()
    ca.configure_trust(client_ctx)
    with start_dev_cluster(in_process=True, ssl_context=server_ctx) as cluster:
        tls = bench_send(cluster.namesrv_addr, args.sends, "TLS", {"ssl_context": client_ctx})
    print(f"TLS / plain: {tls / plain:.2f}")


if __name__ == "__main__":
    main()
