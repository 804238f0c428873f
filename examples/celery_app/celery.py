"""The Celery app. ``rocketmq://`` needs no import here: the ``celery`` command registers it
(a ``celery.commands`` plugin of rocketmq-python-sdk); the import below is for processes that
are not started by the ``celery`` command (a web server enqueuing tasks, the demo)."""

from __future__ import annotations

import os

import rocketmq_sdk.integrations.celery  # noqa: F401  - registers rocketmq:// outside the celery command
from celery import Celery

app = Celery(
    "celery_app",
    broker=os.environ.get("CELERY_BROKER_URL", "rocketmq://127.0.0.1:9876"),
    backend=os.environ.get("CELERY_RESULT_BACKEND", "rpc://"),
    include=["celery_app.tasks"],
)
app.conf.update(
    # RocketMQ names: topic "celery" holds the default queue, group "kombu_celery" consumes it
    broker_transport_options={"group_prefix": "kombu_", "queue_nums": 4, "commit_interval": 1000},
    task_acks_late=True,              # a task whose worker dies runs again on another worker
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
)
