"""Automatic failover with a DLedger group (issue 27): send and consume under load, SIGKILL the
leader, restart it, and count what happened.

    .venv/bin/python examples/dledger_failover_demo.py [--seconds 20] [--threads 4]

Starts ``dev --cluster dledger`` (a name server and the three members n0, n1, n2 of broker-a,
one process each, on free 127.0.0.1 ports, DLedger's own timers), then: ``--threads`` producers
send for ``--seconds`` while a push consumer group reads the topic; after a third of the time the
master is SIGKILLed, the others elect a new one, and the killed member is restarted later and
catches up. Printed: messages acknowledged (SEND_OK), failed sends, acknowledged but never
consumed (lost, must be 0), consumed more than once (duplicates), how long clients saw errors,
and how long until the new master registered. Exits non-zero if anything acknowledged is lost.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
import time

from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import ConsumeConcurrentlyStatus, Message, Producer, PushConsumer
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.exceptions import MQError

TOPIC = "FailoverDemo"


def master(admin: AdminClient) -> str | None:
    try:
        rows = admin.cluster_list(runtime=False)
    except MQError:
        return None
    return next((b.addr for b in rows if b.broker_name == "broker-a" and b.broker_id == 0), None)


def wait(cond, timeout_s: float, what: str) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--threads", type=int, default=4)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="dledger-demo-") as tmp, \
            start_dev_cluster(tmp, cluster="dledger", start_timeout_s=60) as cluster, \
            AdminClient(cluster.namesrv_addr) as admin:
        wait(lambda: master(admin) is not None, 60, "the first election")
        first = master(admin)
        admin.create_topic(TOPIC, broker_addr=first, read_queue_nums=4, write_queue_nums=4)
        print(f"name server {cluster.namesrv_addr}; master of broker-a: {first}")
        consumed: dict[bytes, int] = {}
        lock = threading.Lock()

        def on_messages(msgs, context):
            with lock:
                for m in msgs:
                    consumed[m.body] = consumed.get(m.body, 0) + 1
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer("failover_demo_consumers", namesrv_addr=cluster.namesrv_addr,
                                consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        consumer.subscribe(TOPIC, "*")
        consumer.register_message_listener(on_messages)
        consumer.start()
        producer = Producer("failover_demo_producers", namesrv_addr=cluster.namesrv_addr, send_msg_timeout=1000)
        producer.start()
        acked: set[bytes] = set()
        events: list[tuple[float, bool]] = []
        end = time.monotonic() + args.seconds

        def sender(t: int) -> None:
            i = 0
            while time.monotonic() < end:
                body = f"{t}-{i}".encode()
                i += 1
                try:
                    ok = producer.send(Message(TOPIC, body)).send_status.name == "SEND_OK"
                except MQError:
                    ok = False
                with lock:
                    events.append((time.monotonic(), ok))
                    if ok:
                        acked.add(body)
                time.sleep(0.01)
        threads = [threading.Thread(target=sender, args=(t,)) for t in range(args.threads)]
        for th in threads:
            th.start()
        time.sleep(args.seconds / 3)
        victim = next(b for b in cluster.brokers if b.addr == first)
        killed = time.monotonic()
        cluster.kill_broker(victim.name, victim.broker_id, signal.SIGKILL)
        print(f"SIGKILL n{victim.broker_id} (the master, pid gone) at +{args.seconds / 3:.1f} s")
        wait(lambda: master(admin) not in (None, first), 60, "a new master")
        registered = time.monotonic()
        print(f"new master {master(admin)} registered {registered - killed:.2f} s after the kill")
        for th in threads:
            th.join()
        cluster.start_broker(victim.name, victim.broker_id)
        print(f"n{victim.broker_id} restarted; it catches up from its own store")
        wait(lambda: acked <= consumed.keys(), 60, "every acknowledged message consumed")
        producer.shutdown()
        consumer.shutdown()
    with lock:
        after = [ts for ts, ok in events if ts > killed]
        first_fail = min((ts for ts, ok in events if ts > killed and not ok), default=killed)
        recovered = min((ts for ts, ok in events if ts > first_fail and ok), default=None)
        failed = sum(1 for _, ok in events if not ok)
        lost = acked - consumed.keys()
        dups = sum(n - 1 for n in consumed.values() if n > 1)
    outage = f"{recovered - first_fail:.2f} s" if recovered is not None else "n/a"
    print(f"acked {len(acked)}, failed sends {failed}, lost {len(lost)}, consumed twice {dups}, "
          f"client-visible outage {outage} ({len(after)} sends after the kill)")
    print("RESULT: OK - nothing acknowledged was lost" if not lost else f"RESULT: FAILED - {len(lost)} lost")
    return 0 if not lost else 1


if __name__ == "__main__":
    sys.exit(main())
