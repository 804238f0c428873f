"""The console's connections to RocketMQ: one shared :class:`AdminClient`, one lazily started
producer (test messages, DLQ resends), settings, and the audit log of every change. The clients
are per process (:mod:`rocketmq_sdk.client.process_local`): a worker forked after they were made
(gunicorn ``--preload``) makes its own; they are closed at interpreter exit.

Settings (``ROCKETMQ_CONSOLE`` dict in the Django settings, all optional):

* ``NAMESRV_ADDR`` — name servers ``host:port;host:port`` (default ``$NAMESRV_ADDR``).
* ``ACCESS_KEY`` / ``SECRET_KEY`` — ACL credentials for every request.
* ``TRACE_TOPIC`` — the topic traces are read from (``RMQ_SYS_TRACE_TOPIC``).
* ``PRODUCER_GROUP`` — group of the console's producer (``rocketmq_console_producer``).
* ``MSG_TRACE`` — the console's producer writes message traces (True).
* ``SAMPLE_INTERVAL_S`` — seconds between chart samples (10); ``SAMPLE_WINDOW_S`` (3600).
* ``TIMEOUT_MS`` — per-request timeout (5000).
* ``LOGIN_FAILURE_LIMIT`` (5) failed logins per user name and address in
  ``LOGIN_FAILURE_WINDOW_S`` (600) before further attempts are refused (``security.py``).
* ``SESSION_AGE_S`` — how long a login lasts, seconds (28800: 8 h).
* ``NOTIFIER`` — dotted path of the lag-alarm notifier (``monitor.log_notifier``);
  ``WEBHOOK_URL`` (none) also POSTs each alarm as JSON, ``WEBHOOK_TIMEOUT_S`` (5).
* ``CHART_HISTORY_S`` — how long one-minute chart samples stay in the database (86400: a day).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from django.conf import settings
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.client.process_local import ProcessLocalClient
from rocketmq_sdk.producer import Producer
from rocketmq_sdk.trace import TRACE_TOPIC_DEFAULT

__all__ = ["acl_brokers", "admin", "audit", "close_clients", "console_setting", "producer"]

audit_log = logging.getLogger("rocketmq_sdk.integrations.django.console.audit")

_DEFAULTS: dict[str, Any] = {
    "NAMESRV_ADDR": None, "ACCESS_KEY": None, "SECRET_KEY": None, "TRACE_TOPIC": TRACE_TOPIC_DEFAULT,
    "PRODUCER_GROUP": "rocketmq_console_producer", "MSG_TRACE": True, "SAMPLE_INTERVAL_S": 10.0,
    "SAMPLE_WINDOW_S": 3600.0, "TIMEOUT_MS": 5000, "LOGIN_FAILURE_LIMIT": 5, "LOGIN_FAILURE_WINDOW_S": 600.0,
    "SESSION_AGE_S": 8 * 3600,
    "NOTIFIER": "rocketmq_sdk.integrations.django.console.monitor.log_notifier", "WEBHOOK_URL": None,
    "WEBHOOK_TIMEOUT_S": 5.0, "CHART_HISTORY_S": 86400.0,
}
def console_setting(name: str) -> Any:
    """``settings.ROCKETMQ_CONSOLE[name]``, else the default above."""
    conf = getattr(settings, "ROCKETMQ_CONSOLE", {}) or {}
    return conf.get(name, _DEFAULTS[name])


def _namesrv() -> str:
    addr = console_setting("NAMESRV_ADDR") or os.environ.get("NAMESRV_ADDR", "")
    if not addr:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured("set ROCKETMQ_CONSOLE['NAMESRV_ADDR'] (or $NAMESRV_ADDR) for the RocketMQ console")
    return addr


def _make_admin() -> AdminClient:
    return AdminClient(_namesrv(), timeout_ms=float(console_setting("TIMEOUT_MS")),
                       access_key=console_setting("ACCESS_KEY"), secret_key=console_setting("SECRET_KEY"))


def _make_producer() -> Producer:
    kwargs: dict[str, Any] = {}
    if console_setting("ACCESS_KEY"):
        kwargs.update(access_key=console_setting("ACCESS_KEY"), secret_key=console_setting("SECRET_KEY"))
    prod = Producer(console_setting("PRODUCER_GROUP"), _namesrv(), enable_msg_trace=bool(console_setting("MSG_TRACE")),
                    customized_trace_topic=console_setting("TRACE_TOPIC"), **kwargs)
    prod.start()
    return prod


_admin = ProcessLocalClient(_make_admin, close=AdminClient.close, name="console admin client")
_producer = ProcessLocalClient(_make_producer, name="console producer")
_lock = threading.Lock()
_acl: list[tuple[float, list[str]]] = []  # (valid until, monotonic s; the answer) of acl_brokers()


def admin() -> AdminClient:
    """The shared admin client (created at first use; thread-safe)."""
    return _admin.get()


def producer() -> Producer:
    """The console's producer (started at first use; traced unless ``MSG_TRACE`` is False)."""
    return _producer.get()


ACL_CHECK_S = 60.0  # how long the answer of acl_brokers() is reused


def acl_brokers() -> list[str]:
    """The master addresses whose broker config has ``aclEnable=true`` (asked at most once a
    minute; [] when no broker answers)."""
    from rocketmq_sdk.exceptions import MQError

    with _lock:
        if _acl and _acl[0][0] > time.monotonic():
            return list(_acl[0][1])
    found = []
    try:
        for b in admin().cluster_list(runtime=False):
            if b.role == "MASTER" and admin().broker_config(b.addr).get("aclEnable", "").lower() == "true":
                found.append(b.addr)
    except MQError as exc:
        logging.getLogger("rocketmq_sdk.integrations.django.console").debug("ACL check: %s", exc)
    with _lock:
        _acl[:] = [(time.monotonic() + ACL_CHECK_S, found)]
    return found


def close_clients() -> None:
    """Close this process's clients and forget the ACL answer (the next call makes new ones);
    :func:`.lifecycle.reset_clients` also stops the sampler first."""
    with _lock:
        _acl.clear()
    _producer.close()
    _admin.close()


def audit(request: Any, action: str, outcome: str, **params: Any) -> None:
    """Log one change made through the console: who, what, with which parameters, outcome
    (``ok`` or the error), on logger ``rocketmq_sdk.integrations.django.console.audit``."""
    user = getattr(getattr(request, "user", None), "get_username", lambda: "?")()
    addr = request.META.get("REMOTE_ADDR", "?") if hasattr(request, "META") else "?"
    args = " ".join(f"{k}={v!r}" for k, v in sorted(params.items()))
    level = logging.INFO if outcome == "ok" else logging.WARNING
    audit_log.log(level, "user=%s addr=%s action=%s %s outcome=%s", user, addr, action, args, outcome)
