"""Real ``celery worker`` processes for the tests: started in their own session (so a test can
SIGKILL the whole process group), logs in a file, stopped with SIGTERM (SIGKILL after 20 s)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent


def isolated_options(**extra) -> dict:
    """Transport options giving a test its own topics, groups and binding tables."""
    prefix = f"t{uuid.uuid4().hex[:8]}_"
    return {"topic_prefix": prefix, "group_prefix": prefix, **extra}


def dead_addr() -> str:
    """A 127.0.0.1 address nothing listens on (a free port, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


class Worker:
    def __init__(self, proc: subprocess.Popen, name: str, log_path: Path) -> None:
        self.proc = proc
        self.name = name
        self.log_path = log_path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL the worker and its pool processes."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)   # warm shutdown; the worker stops its pool
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


def worker_env(broker: str, backend: str, marks: Path, options: dict, queue: str = "celery") -> dict:
    env = dict(os.environ)
    # these workers are plain Celery apps: a DJANGO_SETTINGS_MODULE left by the Django tests of the
    # same pytest run would switch on Celery's Django fixup, which then imports those settings
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.update(CELERY_TEST_BROKER=broker, CELERY_TEST_BACKEND=backend, CELERY_TEST_MARKS=str(marks),
               CELERY_TEST_TRANSPORT_OPTIONS=json.dumps(options), CELERY_TEST_QUEUE=queue,
               PYTHONPATH=os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]))
    return env


@contextmanager
def running_worker(env: dict, log_dir: Path, *args: str, name: str | None = None):
    """``celery -A celery_worker_app worker <args>`` until the block ends."""
    name = name or f"w{uuid.uuid4().hex[:6]}@localhost"
    log_path = log_dir / f"{name.split('@')[0]}.log"
    cmd = [sys.executable, "-m", "celery", "-A", "celery_worker_app", "worker", "--loglevel=INFO", "-n", name, *args]
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(cmd, cwd=HERE, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    worker = Worker(proc, name, log_path)
    try:
        yield worker
    finally:
        worker.stop()


def wait_ready(app, worker: Worker, timeout_s: float = 60.0) -> None:
    """Poll ``control.ping`` (pidbox fanout + reply queue) until ``worker`` answers."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if worker.proc.poll() is not None:
            raise AssertionError(f"worker {worker.name} exited ({worker.proc.returncode}):\n{worker.log()[-3000:]}")
        replies = app.control.ping(destination=[worker.name], timeout=1.0)
        if any(worker.name in r for r in replies):
            return
    raise AssertionError(f"worker {worker.name} did not answer ping in {timeout_s} s:\n{worker.log()[-3000:]}")


def close_app(app) -> None:
    """Close the test process's app: its rpc result consumer (a consumer of the reply queue)
    and its connection pools."""
    consumer = getattr(app.backend, "result_consumer", None)
    if consumer is not None and getattr(consumer, "_connection", None) is not None:
        consumer.stop()
    app.pool.force_close_all()      # Celery's app.close() only forgets the pool
    app.close()


class RemoteTask:
    """A task of the workers' app called by name from the test process, which defines no task
    bodies of its own (``.s``, ``.delay``, ``.apply_async`` as a task's)."""

    def __init__(self, app, name: str) -> None:
        self.app, self.name = app, f"worker_app.{name}"

    def s(self, *args):
        return self.app.signature(self.name, args=args)

    def delay(self, *args):
        return self.s(*args).delay()

    def apply_async(self, args=(), **options):
        return self.s(*args).apply_async(**options)
