"""RocketMQ 5 gRPC: the official Python 5.x client (rocketmq-python-client 5.1.2) vs this SDK over
gRPC vs this SDK over remoting, against one reference broker (``python -m rocketmq_broker dev
--grpc-port 0``, its own process): sync sends (this SDK over gRPC twice: ``sdk-grpc`` with its own
HTTP/2 unary transport, the default, and ``sdk-grpcio`` with ``ROCKETMQ_GRPC_TRANSPORT=grpcio``) (msgs/s, client CPU µs/msg) and receive + ack
(msgs/s), and with ``--push`` push consumers (first to last message consumed, msgs/s and CPU).
Each client runs in its own worker process, one after the other; the sends alternate
(official, sdk-grpc, sdk-grpcio, sdk-remoting, then the reverse order; sdk-grpcio sends only) and totals are reported.

    .venv/bin/python benchmarks/grpc_clients.py [--quick] [-n 3000] [--proxy-mode local|cluster|both] [--push]

``--proxy-mode`` is the broker's ``dev --grpc-mode`` (default local: the proxy on the broker's
loop, sends handed over without a connection; cluster: a proxy thread speaking remoting); ``both``
runs the whole comparison once per mode (cluster first) and reports each (an A/B of the proxy).
``--push`` adds push consumers of each kind (the same number of messages sent again, then
consumed; first to last message consumed).

Writes ``benchmarks/results/<date>-<HHMM>-grpc.json`` / ``.md`` (``-grpc-quick``) with the command,
machine load and git commit. Needs .venv/rmq5 (``make test`` installs it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RMQ5 = os.path.join(ROOT, ".venv", "rmq5")
BODY = b"x" * 128


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# -- workers (run in a child process: python grpc_clients.py --worker KIND ...) --------------------
def worker_send(kind: str, endpoint: str, namesrv: str, topic: str, n: int) -> dict:
    if kind == "official":
        from rocketmq import ClientConfiguration, Credentials, Message, Producer

        p = Producer(ClientConfiguration(endpoint, Credentials()), (topic,))
        p.startup()

        def send(i: int) -> None:
            m = Message()
            m.topic, m.body = topic, BODY
            p.send(m)

        stop = p.shutdown
    else:
        from rocketmq_sdk import Message, Producer

        p = Producer("bench_pg", endpoints=endpoint, protocol="grpc") if kind.startswith("sdk-grpc") \
            else Producer("bench_pg", namesrv)
        p.start()

        def send(i: int) -> None:
            p.send(Message(topic, BODY))

        stop = p.shutdown
    for i in range(min(200, n)):  # warm-up: route, connection
        send(i)
    t0, c0 = time.perf_counter(), _cpu()
    for i in range(n):
        send(i)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    stop()
    return {"kind": kind, "op": "send", "n": n, "wall_s": wall, "cpu_s": cpu}


def _drain(c, n: int) -> tuple[int, float, float]:
    """Receive (32 at a time, invisible 30 s) and ack ``n`` messages: (count, wall s, CPU s); the
    first receive (route, connection, group creation) is not timed."""
    got = 0
    batch = c.receive(32, 30)
    t0, c0 = time.perf_counter(), _cpu()
    while got < n and batch:
        for m in batch:
            c.ack(m)
        got += len(batch)
        if got < n:
            batch = c.receive(32, 30)
    return got, time.perf_counter() - t0, _cpu() - c0


def worker_receive(kind: str, endpoint: str, namesrv: str, topic: str, n: int) -> dict:
    group = f"bench_{kind.replace('-', '_')}_{os.getpid()}"
    if kind == "official":
        from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

        c = SimpleConsumer(ClientConfiguration(endpoint, Credentials()), group, {topic: FilterExpression()},
                           await_duration=2)
        c.startup()
        got, wall, cpu = _drain(c, n)
        c.shutdown()
    else:
        from rocketmq_sdk.consumer.simple_consumer import SimpleConsumer

        c = SimpleConsumer(group, endpoints=endpoint, protocol="grpc", await_duration=2) if kind == "sdk-grpc" \
            else SimpleConsumer(group, namesrv, await_duration=2, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        c.subscribe(topic)
        c.start()
        got, wall, cpu = _drain(c, n)
        c.shutdown()
    return {"kind": kind, "op": "receive+ack", "n": got, "wall_s": wall, "cpu_s": cpu}


class _Counter:
    """Counts consumed messages: the window runs from the first to the ``n``-th (CPU over it)."""

    def __init__(self, n: int) -> None:
        import threading

        self.n, self.got, self.lock, self.done = n, 0, threading.Lock(), threading.Event()
        self.t0 = self.c0 = self.t1 = self.c1 = 0.0

    def add(self, k: int) -> None:
        with self.lock:
            if self.got == 0:
                self.t0, self.c0 = time.perf_counter(), _cpu()
            self.got += k
            if self.got >= self.n and not self.done.is_set():
                self.t1, self.c1 = time.perf_counter(), _cpu()
                self.done.set()


def worker_push(kind: str, endpoint: str, namesrv: str, topic: str, n: int) -> dict:
    """A push consumer of each kind consumes the ``n`` messages of ``topic`` (listener: success)."""
    group = f"bench_push_{kind.replace('-', '_')}_{os.getpid()}"
    count = _Counter(n)
    if kind == "official":
        from rocketmq import (
            ClientConfiguration,
            ConsumeResult,
            Credentials,
            FilterExpression,
            MessageListener,
            PushConsumer,
        )

        class Listener(MessageListener):
            def consume(self, message):
                count.add(1)
                return ConsumeResult.SUCCESS

        c = PushConsumer(ClientConfiguration(endpoint, Credentials()), group, Listener(), {topic: FilterExpression()})
        c.startup()
    else:
        from rocketmq_sdk import PushConsumer
        from rocketmq_sdk.consumer.listener import ConsumeConcurrentlyStatus

        c = PushConsumer(group, endpoints=endpoint, protocol="grpc") if kind == "sdk-grpc" \
            else PushConsumer(group, namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        c.subscribe(topic)

        @c.listener
        def handle(msgs, ctx):
            count.add(len(msgs))
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        c.start()
    count.done.wait(300)
    c.shutdown()
    return {"kind": kind, "op": "push", "n": count.got, "wall_s": count.t1 - count.t0, "cpu_s": count.c1 - count.c0}


# -- driver -------------------------------------------------------------------------------------
def run_worker(op: str, kind: str, endpoint: str, namesrv: str, topic: str, n: int) -> dict:
    env = dict(os.environ)
    if kind == "official":
        env["PYTHONPATH"] = RMQ5
    env["ROCKETMQ_GRPC_TRANSPORT"] = "grpcio" if kind == "sdk-grpcio" else "h2"
    out = subprocess.run([sys.executable, __file__, "--worker", op, kind, endpoint, namesrv, topic, str(n)],
                         env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{op} {kind} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def start_broker(mode: str = "local") -> tuple[subprocess.Popen, dict[str, str]]:
    p = subprocess.Popen([sys.executable, "-m", "rocketmq_broker", "dev", "--namesrv-port", "0", "--broker-port",
                          "0", "--grpc-port", "0", "--grpc-mode", mode, "--log-level", "WARNING"],
                         stdout=subprocess.PIPE, text=True)
    lines: dict[str, str] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line or line.strip() == "READY":
            break
        key, _, value = line.strip().partition(" ")
        lines[key] = value
    if "GRPC" not in lines:
        p.kill()
        raise RuntimeError(f"the broker did not start: {lines}")
    return p, lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-n", type=int, default=None, help="messages per client and operation")
    ap.add_argument("--proxy-mode", choices=("local", "cluster", "both"), default="local",
                    help="the proxy's mode (dev --grpc-mode); both: one comparison per mode")
    ap.add_argument("--push", action="store_true", help="also push consumers (official, SDK over gRPC, remoting)")
    args = ap.parse_args()
    n = args.n or (1000 if args.quick else 5000)
    load_before = os.getloadavg()
    modes = ["cluster", "local"] if args.proxy_mode == "both" else [args.proxy_mode]
    results = []
    for mode in modes:
        proc, lines = start_broker(mode)
        try:
            kinds = ["official", "sdk-grpc", "sdk-grpcio", "sdk-remoting"]
            for order in (kinds, kinds[::-1]):
                for kind in order:
                    topic = f"bench_{kind.replace('-', '_')}_{len(results)}"
                    ops = [("send", topic), ("receive", topic)] if kind != "sdk-grpcio" else [("send", topic)]
                    if args.push and kind != "sdk-grpcio":  # the same number again, consumed by a push consumer of the kind
                        ops += [("send", topic + "_p"), ("push", topic + "_p")]
                    for op, t in ops:
                        results.append({**run_worker(op, kind, lines["GRPC"], lines["NAMESRV"], t, n),
                                        "proxy_mode": mode})
                        print(json.dumps(results[-1]), flush=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    summary = {}
    for mode in modes:
        for op in ("send", "receive+ack", "push"):
            for kind in ("official", "sdk-grpc", "sdk-grpcio", "sdk-remoting"):
                rs = [r for r in results if r["op"] == op and r["kind"] == kind and r["proxy_mode"] == mode]
                if not rs:
                    continue
                total_n = sum(r["n"] for r in rs)
                wall = sum(r["wall_s"] for r in rs)
                cpu = sum(r["cpu_s"] for r in rs)
                summary[f"{mode} {op} {kind}"] = {"msgs_per_s": total_n / wall if wall else 0.0,
                                                  "cpu_us_per_msg": cpu / total_n * 1e6 if total_n else 0.0,
                                                  "n": total_n}
    now = datetime.datetime.now()
    date = now.date().isoformat()
    name = f"{date}-{now:%H%M}-grpc{'-quick' if args.quick else ''}"  # runs of one day side by side
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    meta = {"command": " ".join([os.path.relpath(sys.executable, ROOT), *sys.argv]), "commit": commit,
            "cores": os.cpu_count(), "load_before": load_before, "load_after": os.getloadavg(),
            "python": sys.version.split()[0], "grpc_server": os.environ.get("ROCKETMQ_GRPC_SERVER") or "own",
            "body_bytes": len(BODY), "n": n, "proxy_modes": modes,
            "pythonpath": os.environ.get("PYTHONPATH", "")}  # an A/B run of other code: whose code ran
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", name + ".json"), "w") as f:
        json.dump({"meta": meta, "summary": summary, "runs": results}, f, indent=1)
    rows = ["| proxy mode | operation | client | msgs/s | client CPU µs/msg |", "|---|---|---|---:|---:|"]
    for key, v in summary.items():
        mode, op, kind = key.split(" ")
        rows.append(f"| {mode} | {op} | {kind} | {v['msgs_per_s']:.0f} | {v['cpu_us_per_msg']:.0f} |")
    ratios = []
    for mode in modes:
        sg, so = summary[f"{mode} send sdk-grpc"]["msgs_per_s"], summary[f"{mode} send official"]["msgs_per_s"]
        sgi = summary[f"{mode} send sdk-grpcio"]["msgs_per_s"]
        ratios.append(f"SDK over gRPC / official 5.x client, sync send, proxy mode {mode}: **{sg / so:.2f}×** "
                      f"(with the grpcio transport: {sgi / so:.2f}×).")
    code = f" with PYTHONPATH={meta['pythonpath']} (that code ran)" if meta["pythonpath"] else ""
    text = (f"# gRPC clients, {date}\n\n`{meta['command']}` at {commit}{code}; {meta['cores']} cores, load "
            f"{load_before[0]:.2f} before / {meta['load_after'][0]:.2f} after; {n} messages of {len(BODY)} B per "
            f"client and operation, twice per proxy mode (orders official→sdk-grpc→sdk-grpcio→sdk-remoting and back), "
            f"totals; the proxy on the {meta['grpc_server']} gRPC server (ROCKETMQ_GRPC_SERVER).\n\n" + "\n".join(rows) + "\n\n" + "\n".join(ratios) + "\n")
    with open(os.path.join(HERE, "results", name + ".md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        op, kind, endpoint, namesrv, topic, n = sys.argv[2:8]
        fn = {"send": worker_send, "receive": worker_receive, "push": worker_push}[op]
        print(json.dumps(fn(kind, endpoint, namesrv, topic, int(n))))
        sys.exit(0)
    sys.exit(main())
