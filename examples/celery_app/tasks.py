"""Example tasks. ``notify_order`` is the kind of task a web request enqueues after its database
transaction commits (``transaction.on_commit(lambda: notify_order.delay(order.id))`` in Django),
so the worker never sees an order that was rolled back."""

from __future__ import annotations

import logging

from .celery import app

log = logging.getLogger(__name__)


@app.task
def add(x: int, y: int) -> int:
    return x + y


@app.task
def xsum(values: list[int]) -> int:
    return sum(values)


@app.task(bind=True, max_retries=3, default_retry_delay=1)
def notify_order(self, order_id: int, fail_first: bool = False) -> str:
    """Pretend to notify about an order; with ``fail_first`` the first attempt fails and is
    retried after 1 s."""
    if fail_first and self.request.retries == 0:
        raise self.retry(exc=RuntimeError("mail server busy"))
    log.info("order %s notified (attempt %d)", order_id, self.request.retries + 1)
    return f"order {order_id} notified"
