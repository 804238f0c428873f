"""Where the SDK's client CPU goes in a sync ``Producer(..., protocol="grpc").send()`` against the
reference proxy (``python -m rocketmq_broker dev --grpc-port 0``, its own process).

Prints the caller thread's CPU (``time.thread_time``) per send, in µs:

- by layer: ``Producer.send`` (all), ``GrpcConnection.call`` with a request built once (the
  call layer: serialize, 5.x headers, parse), ``UnaryChannel.call`` with request bytes built
  once (the HTTP/2 transport alone, syscalls included);
- by step of one send, done by hand in the same order as ``send`` (``Message``, the
  ``SendMessageRequest``, serializing, the 5.x headers, the HTTP/2 call, parsing the answer,
  the ``SendResult``).

Measured in the running loop (not in a tight loop of one step): after each send's wait for the
answer the interpreter's caches are cold, so a step costs 2-4x what a micro-benchmark says.
Compare two trees with ``PYTHONPATH`` (the broker process runs the checkout's code either way).

    .venv/bin/python benchmarks/profiling/grpc_client_split.py [-n 3000] [--proxy-mode local|cluster]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import grpc_clients  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=3000)
    ap.add_argument("--proxy-mode", choices=("local", "cluster"), default="local")
    args = ap.parse_args()
    pythonpath = os.environ.pop("PYTHONPATH", "")  # the client's code only; the broker runs the checkout's
    import rocketmq_sdk
    from rocketmq_sdk import Message, Producer
    from rocketmq_sdk.grpc import v2
    from rocketmq_sdk.grpc.service import RPCS

    proc, lines = grpc_clients.start_broker(args.proxy_mode)
    tt = time.thread_time_ns
    n, body, topic = args.n, grpc_clients.BODY, "split_t"
    try:
        p = Producer("bench_pg", endpoints=lines["GRPC"], protocol="grpc")
        p.start()
        for _ in range(300):
            p.send(Message(topic, body))
        conn = p._conn
        h2, path = conn._h2, RPCS["SendMessage"].path
        req, _ = p._request([Message(topic, body)])
        data, meta = req.SerializeToString(), conn._encoded_metadata()
        layers: dict[str, list[float]] = collections.defaultdict(list)
        for _ in range(2):
            t = tt()
            for _ in range(n):
                p.send(Message(topic, body))
            layers["Producer.send"].append((tt() - t) / n / 1000)
            t = tt()
            for _ in range(n):
                conn.call("SendMessage", req, 3)
            layers["GrpcConnection.call (request built once)"].append((tt() - t) / n / 1000)
            t = tt()
            for _ in range(n):
                h2.call(path, data, meta, 3)
            layers["UnaryChannel.call (bytes built once)"].append((tt() - t) / n / 1000)
        steps: collections.Counter[str] = collections.Counter()
        for _ in range(n):
            t0 = tt()
            m = Message(topic, body)
            t1 = tt()
            req, ids = p._request([m])
            t2 = tt()
            data = req.SerializeToString()
            t3 = tt()
            meta = conn._encoded_metadata()
            t4 = tt()
            out = h2.call(path, data, meta, 3)
            t5 = tt()
            resp = v2.SendMessageResponse.FromString(out)
            t6 = tt()
            p._result(resp, topic, ids)
            t7 = tt()
            for name, a, b in (("Message()", t0, t1), ("SendMessageRequest (_request)", t1, t2),
                               ("SerializeToString", t2, t3), ("5.x headers", t3, t4), ("HTTP/2 call", t4, t5),
                               ("SendMessageResponse.FromString", t5, t6), ("SendResult (_result)", t6, t7)):
                steps[name] += b - a
        p.shutdown()
    finally:
        proc.kill()
    print(f"client code: {os.path.dirname(rocketmq_sdk.__file__)}{' (PYTHONPATH=' + pythonpath + ')' if pythonpath else ''}; "
          f"proxy mode {args.proxy_mode}; {n} sends of {len(body)} B; load {os.getloadavg()[0]:.1f}")
    print("caller thread CPU per send, µs, by layer (two passes):")
    for name, values in layers.items():
        print(f"  {name:42s} " + " / ".join(f"{v:.1f}" for v in values))
    print("by step:")
    for name, ns in steps.items():
        print(f"  {name:42s} {ns / n / 1000:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
