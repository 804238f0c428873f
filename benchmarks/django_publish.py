"""Django integration throughput against the embedded reference broker (a child process):

1. send path: ``rocketmq_template().send(dest, dict)`` vs the raw SDK
   ``Producer.send(Message(topic, json.dumps(dict)))``, alternating call by call; wall time and the
   calling thread's CPU per send (goal: template overhead < 20 %), plus message building alone;
2. on_commit publishing from a view under Django's test client (``POST /orders/`` of
   examples/django_shop: an ``atomic()`` insert whose post_save publisher sends after commit),
   against the same view with the publisher capturing instead of sending (the database part);
3. an idempotent listener (``reserve_stock``-like: one consumed-message insert + one update per
   message, in ``atomic()``) vs the same listener without idempotency: rows per second over a
   pre-loaded backlog.

Usage: ``python benchmarks/django_publish.py [--messages 3000] [--view-requests 300]
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


def alternate(n: int, variants: dict) -> dict:
    """Call each variant once per iteration, alternating, ``n`` times; per variant the median and
    mean of the wall time and of the calling thread's CPU time (µs). Alternating call by call keeps
    both variants under the same load on a shared machine; the thread's CPU leaves out the SDK's
    I/O thread and the other processes."""
    wall = {k: [] for k in variants}
    cpu = {k: [] for k in variants}
    for i in range(n):
        for key, fn in variants.items():
            c0, t0 = time.thread_time(), time.perf_counter()
            fn(i)
            wall[key].append(time.perf_counter() - t0)
            cpu[key].append(time.thread_time() - c0)
    return {k: {"wall_us_median": round(statistics.median(wall[k]) * 1e6, 1),
                "wall_us_mean": round(statistics.mean(wall[k]) * 1e6, 1),
                "cpu_us_median": round(statistics.median(cpu[k]) * 1e6, 1),
                "cpu_us_mean": round(statistics.mean(cpu[k]) * 1e6, 1),
                "per_s_from_mean_wall": round(1 / statistics.mean(wall[k]))} for k in variants}


def _pct(a: float, b: float) -> float:
    return round((a / b - 1) * 100, 1)


def bench_send_path(n: int, namesrv: str) -> dict:
    from rocketmq_sdk import Message, Producer
    from rocketmq_sdk.integrations.django import rocketmq_template

    template = rocketmq_template()
    payload = {"order": 12345, "sku": "mug", "quantity": 3, "status": "placed"}
    raw = Producer("bench_raw", namesrv)
    raw.start()
    try:
        template.send("bench_send:created", payload)  # route + producer warm-up
        raw.send(Message("bench_send", b"{}", tags="created"))
        stats = alternate(n, {
            # what a user of the bare SDK writes for the same JSON message
            "raw_sdk": lambda i: raw.send(Message("bench_send", json.dumps(payload, separators=(",", ":")).encode(),
                                                  tags="created", keys=f"order-{i}")),
            "template": lambda i: template.send("bench_send:created", payload, keys=f"order-{i}"),
        })
        build = alternate(n, {
            "raw_message_build": lambda i: Message("bench_send", json.dumps(payload, separators=(",", ":")).encode(),
                                                   tags="created", keys=f"order-{i}"),
            "template_message_build": lambda i: template.message("bench_send:created", payload, keys=f"order-{i}"),
        })
    finally:
        raw.shutdown()
    r, t = stats["raw_sdk"], stats["template"]
    return {**stats, **build,
            "template_overhead_pct_cpu_median": _pct(t["cpu_us_median"], r["cpu_us_median"]),
            "template_overhead_pct_cpu_mean": _pct(t["cpu_us_mean"], r["cpu_us_mean"]),
            "template_overhead_pct_wall_median": _pct(t["wall_us_median"], r["wall_us_median"]),
            "template_overhead_pct_wall_mean": _pct(t["wall_us_mean"], r["wall_us_mean"])}


def bench_view(n: int) -> dict:
    from django.test import Client
    from rocketmq_sdk.integrations.django.capture import capture_messages

    client = Client()

    def post(_i: int) -> None:
        r = client.post("/orders/", {"sku": "mug", "quantity": 1}, content_type="application/json")
        assert r.status_code == 201

    def post_captured(i: int) -> None:
        with capture_messages():
            post(i)

    for i in range(20):
        post(i)
    stats = alternate(n, {"view_publish_on_commit": post, "view_capture_only": post_captured})
    p, c = stats["view_publish_on_commit"], stats["view_capture_only"]
    return {**stats, "publish_cost_us_cpu_median": round(p["cpu_us_median"] - c["cpu_us_median"], 1),
            "publish_cost_us_wall_median": round(p["wall_us_median"] - c["wall_us_median"], 1)}


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
    ap.add_argument("--messages", type=int, default=3000, help="sends of each variant on the send path")
    ap.add_argument("--view-requests", type=int, default=300, help="requests of each variant of the view")
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
            "messages": args.messages, "view_requests": args.view_requests,
            "listener_messages": args.listener_messages, "load_average_at_start": os.getloadavg(),
            "broker": "embedded reference broker, child process, 127.0.0.1",
            "database": "SQLite file (Django defaults)",
        }
        result["send_path"] = bench_send_path(args.messages, cluster.namesrv_addr)
        result["view_on_commit"] = bench_view(args.view_requests)
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
