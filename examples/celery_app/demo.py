"""``python -m celery_app.demo`` (from ``examples/``): an embedded RocketMQ name server and broker,
one ``celery worker`` process (prefork, 2 processes) on it, a few tasks, a chain and a group;
prints the results and exits non-zero on any mismatch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rocketmq_broker.embedded import start_dev_cluster

EXAMPLES = Path(__file__).resolve().parent.parent


def main() -> int:
    with start_dev_cluster() as cluster:
        broker_url = f"rocketmq://{cluster.namesrv_addr}"
        os.environ["CELERY_BROKER_URL"] = broker_url
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(EXAMPLES), os.environ.get("PYTHONPATH", "")]))
        worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "celery_app", "worker", "-P", "prefork",
                                   "-c", "2", "-n", "demo@localhost", "--loglevel=WARNING"], cwd=EXAMPLES, env=env)
        try:
            from celery import chain, group

            from celery_app import app
            from celery_app.tasks import add, notify_order

            deadline = time.monotonic() + 60
            while not app.control.ping(destination=["demo@localhost"], timeout=1.0):
                if time.monotonic() > deadline or worker.poll() is not None:
                    print("worker did not start", file=sys.stderr)
                    return 1
            print(f"worker ready on {broker_url}")
            checks = {
                "add(2, 3)": (add.delay(2, 3).get(timeout=30), 5),
                "chain": (chain(add.s(1, 2), add.s(3)).apply_async().get(timeout=30), 6),
                "group": (group(add.s(i, i) for i in range(5)).apply_async().get(timeout=30), [0, 2, 4, 6, 8]),
                "retry": (notify_order.delay(42, fail_first=True).get(timeout=30), "order 42 notified"),
            }
            ok = True
            for name, (got, want) in checks.items():
                print(f"{name:10} -> {got!r}" + ("" if got == want else f"   MISMATCH, expected {want!r}"))
                ok &= got == want
            return 0 if ok else 1
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()


if __name__ == "__main__":
    sys.path.insert(0, str(EXAMPLES))
    sys.exit(main())
