"""The Celery app of ``celery_tasks.py`` (``celery -A celery_bench_app worker``): one no-op task
that appends one byte to ``$CELERY_BENCH_MARK`` (so the benchmark counts executed tasks)."""

from __future__ import annotations

import json
import os

from celery import Celery

app = Celery("celery_bench_app", broker=os.environ.get("CELERY_BENCH_BROKER", "memory://"), set_as_current=False)
app.conf.update(
    broker_transport_options=json.loads(os.environ.get("CELERY_BENCH_OPTIONS", "{}")),
    task_ignore_result=True,
    worker_prefetch_multiplier=int(os.environ.get("CELERY_BENCH_PREFETCH", "64")),
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
    task_default_queue="bench",
)
_MARK = os.environ.get("CELERY_BENCH_MARK", os.devnull)


@app.task(name="bench.noop")
def noop() -> None:
    fd = os.open(_MARK, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, b".")
    finally:
        os.close(fd)
