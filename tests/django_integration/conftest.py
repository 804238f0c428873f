"""Django integration tests: pytest-django with ``django_integration.settings``, the embedded
reference cluster from the integration's own pytest plugin, and helpers to read topics."""

from __future__ import annotations

import itertools
import os
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("django")
pytest.importorskip("pytest_django")

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "django_integration.settings")

# ROCKETMQ_TEST_DATABASE=postgresql (make test's PostgreSQL pass): a private throwaway server for
# this run, started before Django reads the settings; child processes inherit its port
if os.environ.get("ROCKETMQ_TEST_DATABASE") == "postgresql" and not os.environ.get("ROCKETMQ_TEST_PG_PORT"):
    import atexit

    from django_integration import pgserver

    _pg = pgserver.start()
    atexit.register(_pg.stop)
    os.environ["ROCKETMQ_TEST_PG_PORT"] = str(_pg.port)

import django  # noqa: E402

django.setup()

from rocketmq_sdk.integrations.django.pytest_plugin import (  # noqa: E402, F401 - fixtures
    rocketmq,
    rocketmq_broker_config,
    rocketmq_cluster,
    rocketmq_outbox,
)

from tests.conftest import wait_until  # noqa: E402, F401

REPO = Path(__file__).resolve().parents[2]
_names = itertools.count()


def unique(prefix: str) -> str:
    """A topic or group name no other test uses (the cluster lives for the session)."""
    return f"{prefix}_{next(_names)}_{int(time.time() * 1000) % 100000}"


def child_env(**extra: str) -> dict[str, str]:
    """Environment of a child Django process (the tests' settings and import paths)."""
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "django_integration.settings"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "tests"), str(REPO), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def create_topic(cluster, topic: str, queues: int = 4) -> None:
    """Create ``topic`` on the cluster's broker (consumers only find topics that exist)."""
    from rocketmq_sdk.admin import AdminClient

    with AdminClient(cluster.namesrv_addr) as admin:
        admin.create_topic(topic, broker_addr=cluster.broker_addr, read_queue_nums=queues, write_queue_nums=queues)


def read_topic(cluster, topic: str, expected: int, timeout_s: float = 20.0, group: str | None = None) -> list:
    """Pull every message of ``topic`` from offset 0 until ``expected`` arrived and a pass over
    the queues finds nothing more (deadline)."""
    from rocketmq_sdk.consumer import PullConsumer
    from rocketmq_sdk.protocol.message import PullStatus

    found: list = []
    deadline = time.monotonic() + timeout_s
    with PullConsumer(group or unique("reader"), cluster.namesrv_addr) as pc:
        offsets: dict = {}
        while True:
            try:
                mqs = pc.fetch_subscribe_message_queues(topic)
            except Exception:
                mqs = []
            more = False
            for mq in mqs:
                r = pc.pull(mq, "*", offsets.get(mq, 0), 32, block=False)
                if r.pull_status is PullStatus.FOUND:
                    found.extend(r.msg_found_list)
                    offsets[mq] = r.next_begin_offset
                    more = True
            if len(found) >= expected and not more:  # everything stored so far, not the first 32 a queue
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(found)} of {expected} messages in {topic} after {timeout_s} s")
            time.sleep(0.05)


PY = sys.executable


def pytest_report_header(config):
    from django.db import connection

    return (f"django: {django.get_version()} (from {Path(django.__file__).parent}), database: {connection.vendor}"
            f" {connection.settings_dict.get('PORT') or ''}")
