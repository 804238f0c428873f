"""Django integration throughput against the embedded reference broker (a child process):

1. send path: ``rocketmq_template().send(dest, dict)`` vs the raw SDK ``Producer.send(Message)``
   of the same JSON body (messages/s, interleaved rounds; goal: template overhead < 20 %);
2. on_commit publishing from a view under Django's test client (``POST /orders/`` of
   examples/django_shop: an ``atomic()`` insert whose post_save publisher sends after commit),
   against the same view with the publisher capturing instead of sending (the database part);
3. an idempotent listener (``reserve_stock``-like: one consumed-message insert + one update per
   message, in ``atomic()``) vs the same listener without idempotency: rows per second over a
   pre-loaded backlog.

Usage: ``python benchmarks/django_publish.py [--messages 2000] [--rounds 3] [--out FILE]``.
SQLite file database in a temporary directory (WAL off, Django defaults).
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

        t_rates, r_rates = [], []
        for _ in range(rounds):  # interleaved A/B
            r_rates.append(rate(n, via_sdk))
            t_rates.append(rate(n, via_template))
    finally:
        raw.shutdown()
    t, r = statistics.median(t_rates), statistics.median(r_rates)
    return {"raw_sdk_msgs_per_s": round(r), "template_msgs_per_s": round(t),
            "template_overhead_pct": round((r / t - 1) * 100, 1), "rounds_raw": [round(x) for x in r_rates],
            "rounds_template": [round(x) for x in t_rates]}


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


def bench_listener(n: int, namesrv: str) -> dict:
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
        topic = f"bench_listen_{int(idempotent)}"
        with AdminClient(namesrv) as admin:
            admin.create_topic(topic, cluster="DefaultCluster", read_queue_nums=4, write_queue_nums=4)
        payloads = [{"sku": "bench", "quantity": 1, "i": i} for i in range(n)]
        for chunk in range(0, n, 200):
            template.send_batch(topic, payloads[chunk:chunk + 200], keys=lambda p: f"b-{p['i']}")
        done, handle = _counting_handler(Product, F)
        name = f"bench_{int(idempotent)}"
        rocketmq_listener(topic=topic, consumer_group=f"bench_group_{int(idempotent)}", idempotent=idempotent,
                          name=name)(handle)
        container = ListenerContainer(registry[name])
        t0 = time.perf_counter()
        container.start()
        deadline = time.monotonic() + 300
        while done[0] < n and time.monotonic() < deadline:
            time.sleep(0.02)
        elapsed = time.perf_counter() - t0
        container.shutdown()
        rows = ConsumedMessage.objects.filter(consumer_group=f"bench_group_{int(idempotent)}").count()
        key = "idempotent" if idempotent else "plain"
        out[f"{key}_listener_msgs_per_s"] = round(done[0] / elapsed)
        if idempotent:
            out["idempotent_consumed_rows"] = rows
            out["idempotent_rows_per_s"] = round(rows / elapsed)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
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
            "messages": args.messages, "rounds": args.rounds,
            "broker": "embedded reference broker, child process, 127.0.0.1",
            "database": "SQLite file (Django defaults)",
        }
        result["send_path"] = bench_send_path(args.messages, args.rounds, cluster.namesrv_addr)
        result["view_on_commit"] = bench_view(args.messages // 2, args.rounds)
        result["listener"] = bench_listener(args.messages, cluster.namesrv_addr)
        rocketmq_template().close()
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
