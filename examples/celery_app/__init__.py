"""Example Celery project on RocketMQ (``celery -A celery_app worker`` from ``examples/``).

The broker URL comes from ``CELERY_BROKER_URL`` (default ``rocketmq://127.0.0.1:9876``), the
result backend from ``CELERY_RESULT_BACKEND`` (default ``rpc://``, results over RocketMQ too).
``python -m celery_app.demo`` (from ``examples/``) runs everything against an embedded broker.
"""

from .celery import app

__all__ = ["app"]
