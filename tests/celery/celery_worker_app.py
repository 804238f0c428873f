"""The Celery app the worker tests run with ``celery -A celery_worker_app worker`` (configured from
the environment by :func:`make_app`, so the test process builds the same app)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from celery import Celery


def make_app(broker: str, backend: str, marks: str, transport_options: dict | None = None,
             queue: str = "celery", define_tasks: bool = True) -> Celery:
    app = Celery("celery_worker_app", broker=broker, backend=backend, set_as_current=False)
    app.conf.update(
        broker_transport_options=transport_options or {},
        result_backend_transport_options=transport_options or {},
        task_default_queue=queue,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        result_extended=True,
    )
    beat_every = os.environ.get("CELERY_TEST_BEAT_EVERY")
    if beat_every:   # celery beat: worker_app.add(1, 2) every that many seconds
        app.conf.beat_schedule = {"add-every": {"task": "worker_app.add", "schedule": float(beat_every),
                                                "args": (1, 2)}}
    if not define_tasks:   # the test process only sends by name
        return app
    marks_dir = Path(marks)

    @app.task(name="worker_app.add")
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(name="worker_app.xsum")
    def xsum(values: list[int]) -> int:
        return sum(values)

    @app.task(name="worker_app.flaky", bind=True, max_retries=5)
    def flaky(self, key: str, fail_times: int) -> int:
        """Fails ``fail_times`` times (retried after 1 s each), then returns the attempt count."""
        path = marks_dir / f"{key}.attempts"
        n = int(path.read_text()) if path.exists() else 0
        path.write_text(str(n + 1))
        if n < fail_times:
            raise self.retry(countdown=1)
        return n + 1

    @app.task(name="worker_app.stamp")
    def stamp(key: str) -> float:
        """Records each run (``<key>.ran.<n>``, holding the epoch time it ran) and returns that time."""
        now = time.time()
        (marks_dir / f"{key}.ran.{os.getpid()}.{time.monotonic_ns()}").write_text(repr(now))
        return now

    @app.task(name="worker_app.hold", acks_late=True)
    def hold(key: str, timeout_s: float = 60.0) -> int:
        """Records each start (``<key>.started.<pid>``), then waits for ``<key>.release``."""
        (marks_dir / f"{key}.started.{os.getpid()}").touch()
        deadline = time.monotonic() + timeout_s
        while not (marks_dir / f"{key}.release").exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{key} was not released")
            time.sleep(0.05)
        return os.getpid()

    return app


if "CELERY_TEST_BROKER" in os.environ:
    app = make_app(os.environ["CELERY_TEST_BROKER"], os.environ.get("CELERY_TEST_BACKEND", "rpc://"),
                   os.environ["CELERY_TEST_MARKS"], json.loads(os.environ.get("CELERY_TEST_TRANSPORT_OPTIONS", "{}")),
                   os.environ.get("CELERY_TEST_QUEUE", "celery"))
