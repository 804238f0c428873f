"""Django integration, consuming side, on SQLite and PostgreSQL (issue 25):

1. outbox relay throughput: rows/s of ``relay_batch`` over a pre-loaded outbox;
2. end to end latency: a writer commits an outbox row every few ms while the relay loop and an
   idempotent listener run; commit -> handler start, p50 / p99;
3. listener throughput over a pre-loaded backlog: a plain listener vs an idempotent one (one
   ``INSERT`` per message in the handler; the idempotent one adds the consumed-message row in
   the same transaction), the idempotent one both with one message per transaction
   (``consume_message_batch_max_size=1``, the behaviour before issue 25) and with its default
   batches of 32 (one transaction per batch); messages/s from the first to the last handler run.

Usage: ``python benchmarks/django_listener.py [--db sqlite|postgresql|both] [--messages 2000]
[--relay-rows 2000] [--latency-events 300] [--out FILE]``. Uses the Django tests' settings and
app (tests/django_integration: 4 consume threads, the embedded reference broker in this
process); SQLite: a file database with Django's defaults (rollback journal, synchronous=FULL);
PostgreSQL: a private throwaway server (tests/django_integration/pgserver.py, fsync off).
Results: benchmarks/results/django_listener.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO)]
os.environ.setdefault("ROCKETMQ_TEST_NAMESRV", "127.0.0.1:9")  # replaced by the embedded broker's


def run_one(db: str, args: argparse.Namespace) -> dict:
    """One database, in a child process (Django is configured once per process)."""
    out = subprocess.run([sys.executable, __file__, "--child", db, "--messages", str(args.messages),
                          "--relay-rows", str(args.relay_rows), "--latency-events", str(args.latency_events)],
                         capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"{db} run failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def child(db: str, args: argparse.Namespace) -> dict:
    tmp = tempfile.mkdtemp(prefix="rocketmq-bench-")
    os.environ["ROCKETMQ_TEST_DB"] = os.path.join(tmp, "bench.sqlite3")
    os.environ["DJANGO_SETTINGS_MODULE"] = "django_integration.settings"
    pg = None
    if db == "postgresql":
        from django_integration import pgserver

        pg = pgserver.start()
        os.environ.update(ROCKETMQ_TEST_DATABASE="postgresql", ROCKETMQ_TEST_PG_PORT=str(pg.port),
                          ROCKETMQ_TEST_DB="bench")
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=pg.port, user=pgserver.USER, dbname="postgres",
                             autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench")
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        from rocketmq_sdk.integrations.django.testing import embedded_broker

        with embedded_broker(in_process=False) as cluster:  # the broker in a child process: its own GIL
            return {"db": db, **bench(cluster, args)}
    finally:
        if pg is not None:
            from django.db import connections

            connections.close_all()
            pg.stop()


def _wait(cond, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.01)


def _handler(label: str, times: list[float], handled_model):
    """A listener handler: one INSERT, then the time it finished."""
    lock = threading.Lock()

    def handle(event: dict) -> None:
        handled_model.objects.create(listener=label, key=str(event["i"]))
        with lock:
            times.append(time.perf_counter())

    return handle


def bench(cluster, args: argparse.Namespace) -> dict:
    from django.db import transaction
    from django_integration.conftest import create_topic
    from django_integration.testapp.models import Handled
    from rocketmq_sdk.integrations.django import rocketmq_listener, rocketmq_template
    from rocketmq_sdk.integrations.django.listeners import registry
    from rocketmq_sdk.integrations.django.outbox import enqueue, relay_batch
    from rocketmq_sdk.integrations.django.testing import running_listeners

    def topic_of(name: str) -> str:
        t = f"{name}_{int(time.time() * 1000) % 10_000_000}"
        create_topic(cluster, t, queues=4)
        return t

    result: dict = {}
    template = rocketmq_template()

    # 1. relay throughput
    topic = topic_of("bench_relay")
    with transaction.atomic():
        for i in range(args.relay_rows):
            enqueue(topic, {"i": i})
    t0 = time.perf_counter()
    sent = 0
    while sent < args.relay_rows:
        sent += relay_batch(100).sent
    result["relay_rows_per_s"] = round(args.relay_rows / (time.perf_counter() - t0))

    # 2. listener throughput over a backlog, plain vs idempotent
    # idempotent_batch1: one message (one transaction) per listener call, as before issue 25
    for label, idempotent, options in (("plain", False, {}), ("idempotent_batch1", True,
                                       {"consume_message_batch_max_size": 1}), ("idempotent", True, {})):
        topic = topic_of(f"bench_{label}")
        for start in range(0, args.messages, 500):
            template.send_batch(topic, [{"i": i} for i in range(start, min(start + 500, args.messages))])
        times: list[float] = []
        handle = _handler(label, times, Handled)

        name = f"bench_{label}"
        rocketmq_listener(topic=topic, consumer_group=f"g_{topic}", idempotent=idempotent, name=name,
                          **options)(handle)
        with running_listeners([name]):
            _wait(lambda t=times: len(t) >= args.messages, 180, f"the {label} listener")
        registry.pop(name)
        span = max(times) - min(times)
        result[f"{label}_listener_msgs_per_s"] = round((len(times) - 1) / span) if span > 0 else None
        result[f"{label}_handler_runs"] = len(times)

    # 3. end-to-end latency: commit -> idempotent handler, relay loop running
    topic = topic_of("bench_latency")
    latencies: list[float] = []
    lock = threading.Lock()

    def on_event(event: dict) -> None:
        with lock:
            latencies.append(time.time() - event["committed"])

    rocketmq_listener(topic=topic, consumer_group=f"g_{topic}", idempotent=True, name="bench_latency")(on_event)
    stop = threading.Event()

    def relay_loop() -> None:
        from django.db import connection

        while not stop.is_set():
            if relay_batch(100).sent == 0:
                stop.wait(0.01)
        connection.close()

    relayer = threading.Thread(target=relay_loop)
    with running_listeners(["bench_latency"]):
        relayer.start()
        time.sleep(2)  # let the consumer own its queues before the first event
        for i in range(args.latency_events):
            with transaction.atomic():  # a request: the row and its commit time (the commit follows at once)
                enqueue(topic, {"i": i, "committed": time.time()})
            time.sleep(0.01)
        _wait(lambda: len(latencies) >= args.latency_events, 120, "the latency events")
        stop.set()
        relayer.join(30)
    registry.pop("bench_latency")
    lat = sorted(latencies)
    result["e2e_latency_ms_p50"] = round(statistics.median(lat) * 1000, 1)
    result["e2e_latency_ms_p99"] = round(lat[int(len(lat) * 0.99) - 1] * 1000, 1)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", choices=("sqlite", "postgresql", "both"), default="both")
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--relay-rows", type=int, default=2000)
    ap.add_argument("--latency-events", type=int, default=300)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "django_listener.json"))
    ap.add_argument("--child", choices=("sqlite", "postgresql"))
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args)))
        return
    load = os.getloadavg()
    runs = [run_one(db, args) for db in (("sqlite", "postgresql") if args.db == "both" else (args.db,))]
    result = {"command": " ".join(["python", "benchmarks/django_listener.py", *sys.argv[1:]]),
              "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": platform.platform(),
              "cpus": os.cpu_count(), "load_average_at_start": load, "load_average_at_end": os.getloadavg(),
              "runs": runs}
    print(json.dumps(result, indent=2))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
