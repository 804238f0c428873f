"""The transport options (``broker_transport_options`` in Celery, ``transport_options=`` in
kombu): every name with its default, in one table (documented in docs/celery.md, "Transport
options"). :class:`~.transport.Channel` declares them all in ``from_transport_options``; the
connection's :class:`~.client.BrokerClient` reads them through :func:`resolve`."""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["OPTIONS", "resolve"]

log = logging.getLogger("rocketmq_sdk.integrations.celery")

#: option -> default (None: not set)
OPTIONS: dict[str, Any] = {
    "topic_prefix": "",
    "group_prefix": "kombu_",
    "namespace": None,
    "queue_topics": {},
    "access_key": None,             # also the URL's user
    "secret_key": None,             # also the URL's password
    "use_tls": None,                # also ssl=True on the connection
    "ssl_context": None,
    "cluster": None,                # every cluster
    "queue_nums": 4,
    "commit_interval": 1000,        # ms
    "buffer_limit": 64,
    "pull_batch_size": 32,
    "pull_threshold_for_queue": 256,
    "pull_threshold_for_all": 1024,
    "long_poll_ms": 15000,
    "priority_steps": (0, 3, 6, 9),
    "binding_cache_ttl": 1.0,       # s
    "catch_up_timeout": 1.0,        # s
    "polling_interval": 1.0,        # s
    "producer_group": "kombu_producer",
    "send_timeout": 3000,           # ms
    "dead_letter_rejected": False,
    "expiry_check_interval": 5.0,   # s
    "connect_timeout_ms": 5000,     # also connect_timeout (s) of the connection
    "eta_timers": True,             # ETA/countdown tasks as timer messages on 5.x brokers (eta.py)
}

#: options kombu itself reads or sets (not ours, not warned about)
KOMBU_OPTIONS = frozenset({"body_encoding", "deadletter_queue", "virtual_host", "max_retries", "interval_start",
                           "interval_step", "interval_max", "confirm_publish", "client_properties"})


def resolve(given: dict[str, Any]) -> dict[str, Any]:
    """``given`` over the defaults; names this transport does not know (e.g. Redis'
    ``visibility_timeout``) are logged once as a WARNING and ignored."""
    unknown = sorted(set(given) - set(OPTIONS) - KOMBU_OPTIONS)
    if unknown:
        log.warning("transport options not known to the rocketmq transport, ignored: %s", ", ".join(unknown))
    merged = dict(OPTIONS)
    merged.update({k: v for k, v in given.items() if v is not None or k not in OPTIONS})
    return merged
