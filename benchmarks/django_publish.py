"""Django integration throughput against the embedded reference broker (a child process):

1. send path: ``rocketmq_template().send(dest, dict)`` vs the raw SDK ``Producer.send(Message)``
   of the same JSON body (messages/s and this process's CPU per message, alternating chunks of 50
   sends; goal: template overhead < 20 %), plus the template's own message building alone;
2. on_commit publishing from a view under Django's test client (``POST /orders/`` of
   examples/django_shop: an ``atomic()`` insert whose post_save publisher sends after commit),
   against the same view with the publisher capturing instead of sending (the database part);
3. an idempotent listener (``reserve_stock``-like: one consumed-message insert + one update per
   message, in ``atomic()``) vs the same listener without idempotency: rows per second over a
   pre-loaded backlog.

Usage: ``python benchmarks/django_publish.py [--messages 1000] [--rounds 5] [--view-requests 200]
[--listener-messages 1000] [--out FILE]``. SQLite file database in a temporary directory (Django
defaults: rollback journal, ``synchronous=FULL``, so every commit waits for the disk); the
listeners run a second time with ``PRAGMA synchronous=OFF`` to show the integration's own cost.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "examples" / "django_shop"))


def setup_django(db_dir: str) -> None:
    os.environ["SHOP_DB_DIR"] = db_dir
    os.environ["DJANGO_SETTINGS_MODULE"] = "shop_project.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def rate(n: int, fn) -> float:
    t0 = time.perf_counter()
    fn(n)
    return n / (time.perf_counter() - t0)


def bench_send_path(n: int, rounds: int, namesrv: str) -> dict:
    from rocketmq_sdk import Message, Producer
    from rocketmq_sdk.integrations.django import rocketmq_template

    template = rocketmq_template()
    payload = {"order": 12345, "sku": "mug", "quantity": 3, "status": "placed"}
    body = json.dumps(payload, separators=(",", ":")).encode()
    raw = Producer("bench_raw", namesrv)
    raw.start()
    try:
        template.send("bench_send:created", payload)  # route + producer warm-up
        raw.send(Message("bench_send", body, tags="created"))

        def via_template(k: int) -> None:
            for i in range(k):
                template.send("bench_send:created", payload, keys=f"order-{i}")

        def via_sdk(k: int) -> None:
            for i in range(k):
                raw.send(Message("bench_send", body, tags="created", keys=f"order-{i}"))

        # fine-grained interleaving (chunks of 50 sends, alternating) so both paths see the same
        # load on a shared machine; per round: n sends of each
        t_runs, r_runs = [], []
        for _ in range(rounds):
            acc = {"raw": [0.0, 0.0], "tpl": [0.0, 0.0]}
            for _chunk in range(0, n, 50):
                for key, fn in (("raw", via_sdk), ("tpl", via_template)):
                    c0, t0 = time.process_time(), time.perf_counter()
                    fn(50)
                    acc[key][0] += time.perf_counter() - t0
                    acc[key][1] += time.process_time() - c0
            r_runs.append((n / acc["raw"][0], acc["raw"][1] / n * 1e6))
            t_runs.append((n / acc["tpl"][0], acc["tpl"][1] / n * 1e6))
        # the template's own work, without the network: building the message from the payload
        c0 = time.process_time()
        for i in range(n):
            template.message("bench_send:created", payload, keys=f"order-{i}")
        build_us = (time.process_time() - c0) / n * 1e6
        c0 = time.process_time()
        for i in range(n):
            Message("bench_send", json.dumps(payload, separators=(",", ":")).encode(), tags="created",
                    keys=f"order-{i}")
        raw_build_us = (time.process_time() - c0) / n * 1e6
    finally:
        raw.shutdown()
    r_rate, t_rate = statistics.median(x[0] for x in r_runs), statistics.median(x[0] for x in t_runs)
    r_cpu, t_cpu = statistics.median(x[1] for x in r_runs), statistics.median(x[1] for x in t_runs)
    return {"raw_sdk_msgs_per_s": round(r_rate), "template_msgs_per_s": round(t_rate),
            "template_overhead_pct_wall": round((r_rate / t_rate - 1) * 100, 1),
            "raw_sdk_client_cpu_us_per_msg": round(r_cpu, 1), "template_client_cpu_us_per_msg": round(t_cpu, 1),
            "template_overhead_pct_cpu": round((t_cpu / r_cpu - 1) * 100, 1),
            "template_build_message_cpu_us": round(build_us, 1),
            "raw_json_dumps_plus_message_cpu_us": round(raw_build_us, 1),
            "rounds_raw": [[round(a), round(b, 1)] for a, b in r_runs],
            "rounds_template": [[round(a), round(b, 1)] for a, b in t_runs]}


def bench_view(n: int, rounds: int) -> dict:
    from django.test import Client
    from rocketmq_sdk.integrations.django.capture import capture_messages

    client = Client()

    def post(k: int) -> None:
        for _ in range(k):
            r = client.post("/orders/", {"sku": "mug", "quantity": 1}, content_type="application/json")
            assert r.status_code == 201

    def post_captured(k: int) -> None:
        with capture_messages():
            post(k)

    post(20)
    sent, captured = [], []
    for _ in range(rounds):
        sent.append(rate(n, post))
        captured.append(rate(n, post_captured))
    s, c = statistics.median(sent), statistics.median(captured)
    return {"view_on_commit_publish_msgs_per_s": round(s), "view_capture_only_requests_per_s": round(c),
            "publish_cost_per_request_ms": round((1 / s - 1 / c) * 1000, 3),
            "rounds_publish": [round(x) for x in sent], "rounds_capture": [round(x) for x in captured]}


def _counting_handler(product, f):
    done = [0]

    def handle(event: dict) -> None:
        product.objects.filter(sku=event["sku"]).update(stock=f("stock") - event["quantity"])
        done[0] += 1

    return done, handle


def bench_listener(n: int, namesrv: str, label: str) -> dict:
    from django.db.models import F
    from orders.models import Product
    from rocketmq_sdk.admin import AdminClient
    from rocketmq_sdk.integrations.django import rocketmq_listener, rocketmq_template
    from rocketmq_sdk.integrations.django.listeners import ListenerContainer, registry
    from rocketmq_sdk.integrations.django.models import ConsumedMessage

    template = rocketmq_template()
    out = {}
    Product.objects.get_or_create(sku="bench", defaults={"stock": 10**9})
    for idempotent in (False, True):
        topic = f"bench_listen_{label}_{int(idempotent)}"
        with AdminClient(namesrv) as admin:
            admin.create_topic(topic, cluster="DefaultCluster", read_queue_nums=4, write_queue_nums=4)
        payloads = [{"sku": "bench", "quantity": 1, "i": i} for i in range(n)]
        for chunk in range(0, n, 200):
            template.send_batch(topic, payloads[chunk:chunk + 200], keys=lambda p: f"b-{p['i']}")
        done, handle = _counting_handler(Product, F)
        name = group = f"bench_{label}_{int(idempotent)}"
        rocketmq_listener(topic=topic, consumer_group=group, idempotent=idempotent, name=name)(handle)
        container = ListenerContainer(registry[name])
        t0 = time.perf_counter()
        container.start()
        deadline = time.monotonic() + 300
        while done[0] < n and time.monotonic() < deadline:
            time.sleep(0.02)
        elapsed = time.perf_counter() - t0
        container.shutdown()
        rows = ConsumedMessage.objects.filter(consumer_group=group).count()
        key = "idempotent" if idempotent else "plain"
        out[f"{key}_listener_msgs_per_s"] = round(done[0] / elapsed)
        if idempotent:
            out["idempotent_consumed_rows"] = rows
            out["idempotent_rows_per_s"] = round(rows / elapsed)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=1000, help="sends per round of the send path")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--view-requests", type=int, default=200, help="requests per round of the view")
    ap.add_argument("--listener-messages", type=int, default=1000)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "django_publish.json"))
    args = ap.parse_args()
    from rocketmq_broker.embedded import start_dev_cluster

    with tempfile.TemporaryDirectory() as db_dir, start_dev_cluster() as cluster:
        os.environ["NAMESRV_ADDR"] = cluster.namesrv_addr
        setup_django(db_dir)
        from django.conf import settings
        from rocketmq_sdk.integrations.django import rocketmq_template

        settings.ROCKETMQ["NAME_SERVER"] = cluster.namesrv_addr
        import django

        result = {
            "benchmark": "django_publish", "date": time.strftime("%Y-%m-%d %H:%M"),
            "django": django.get_version(), "python": platform.python_version(), "cpus": os.cpu_count(),
            "messages": args.messages, "rounds": args.rounds, "view_requests": args.view_requests,
            "listener_messages": args.listener_messages, "load_average_at_start": os.getloadavg(),
            "broker": "embedded reference broker, child process, 127.0.0.1",
            "database": "SQLite file (Django defaults)",
        }
        result["send_path"] = bench_send_path(args.messages, args.rounds, cluster.namesrv_addr)
        result["view_on_commit"] = bench_view(args.view_requests, args.rounds)
        result["listener_sqlite_synchronous_full"] = bench_listener(args.listener_messages, cluster.namesrv_addr,
                                                                    "full")
        # the same with SQLite not waiting for the disk: what the integration costs per message
        from django.db import connection
        from django.db.backends.signals import connection_created

        def no_sync(sender, connection, **kwargs):
            connection.cursor().execute("PRAGMA synchronous=OFF")

        connection_created.connect(no_sync)
        connection.close()
        result["listener_sqlite_synchronous_off"] = bench_listener(args.listener_messages, cluster.namesrv_addr,
                                                                   "off")
        rocketmq_template().close()
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
