"""The Celery app of ``celery_tasks.py`` (``celery -A celery_bench_app worker``): a no-op task
that appends one byte to ``$CELERY_BENCH_MARK`` (so the benchmark counts executed tasks), and a
latency task that appends, on start, how long ago the producer stamped it (``time.monotonic()``,
one clock for all processes of the machine on Linux) to ``$CELERY_BENCH_MARK.latency``."""

from __future__ import annotations

import json
import os
import time

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
# shared=False: celery_tasks.py reloads this module for each round's app (new broker, new mark);
# shared tasks would register both module objects' callables in every app finalized afterwards
# (DuplicateTaskNameWarning for bench.noop / bench.latency)


@app.task(name="bench.noop", shared=False)
def noop() -> None:
    fd = os.open(_MARK, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, b".")
    finally:
        os.close(fd)


@app.task(name="bench.latency", shared=False)
def latency(enqueued_monotonic_s: float) -> None:
    """Records ``now - enqueued_monotonic_s`` (seconds, one line) when the task starts."""
    line = f"{time.monotonic() - enqueued_monotonic_s:.6f}\n".encode()
    fd = os.open(_MARK + ".latency", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
