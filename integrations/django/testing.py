"""Testing helpers for Django apps that use RocketMQ.

- :func:`embedded_broker`: a context manager that starts the embedded reference name server and
  broker on free 127.0.0.1 ports (temporary store) and points ``settings.ROCKETMQ["NAME_SERVER"]``
  at it for the duration (:func:`using_name_server`).
- :class:`RocketMQTestRunner`: Django's ``DiscoverRunner`` that does the same around the whole
  run (``TEST_RUNNER = "rocketmq_sdk.integrations.django.testing.RocketMQTestRunner"``).
- :func:`running_listeners`: start listeners for a test, stop them after.
- capture mode (no broker): :func:`~rocketmq_sdk.integrations.django.capture.capture_messages`
  and ``ROCKETMQ["CAPTURE"]``.
- pytest fixtures: :mod:`rocketmq_sdk.integrations.django.pytest_plugin`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

from django.conf import settings
from django.test.runner import DiscoverRunner
from django.test.utils import override_settings

from .capture import capture_messages

__all__ = ["DEV_BROKER_CONFIG", "DEV_CLIENT_SETTINGS", "RocketMQTestRunner", "capture_messages", "embedded_broker",
           "running_listeners", "using_name_server"]

#: broker settings of the embedded broker for tests: SQL92 filters on, retries after 1 s (instead
#: of 10 s, 30 s, ...), transaction checks every second for half messages older than 1 s
DEV_BROKER_CONFIG: dict[str, Any] = {
    "enable_property_filter": True,
    "message_delay_level": " ".join(["1s"] * 18),
    "transaction_check_interval": 1000,
    "transaction_time_out": 1000,
}


#: client settings added (where not set) while tests talk to the embedded broker: topics created
#: during a test are found within a second, offsets persisted twice a second
DEV_CLIENT_SETTINGS: dict[str, Any] = {"POLL_NAME_SERVER_INTERVAL": 1000, "PERSIST_CONSUMER_OFFSET_INTERVAL": 500}


@contextlib.contextmanager
def using_name_server(namesrv_addr: str) -> Iterator[None]:
    """Within the block ``settings.ROCKETMQ["NAME_SERVER"]`` is ``namesrv_addr`` (plus
    :data:`DEV_CLIENT_SETTINGS` where unset); the clients made meanwhile are shut down after it."""
    current = {**DEV_CLIENT_SETTINGS, **(getattr(settings, "ROCKETMQ", None) or {})}
    current["NAME_SERVER"] = namesrv_addr
    with override_settings(ROCKETMQ=current):
        try:
            yield
        finally:
            from .template import rocketmq_template

            rocketmq_template().close()


@contextlib.contextmanager
def embedded_broker(broker_config: dict[str, Any] | None = None, *, in_process: bool = True) -> Iterator[Any]:
    """Start the reference cluster and point ``ROCKETMQ["NAME_SERVER"]`` at it.

    Args:
        broker_config: ``BrokerConfig`` fields (default :data:`DEV_BROKER_CONFIG`).
        in_process: run the servers on a thread of this process (fast start) or in a child
            process (``broker_config`` then limited, see ``start_dev_cluster``).

    Yields:
        the ``DevCluster`` (``namesrv_addr``, ``broker_addr``).
    """
    from rocketmq_broker.embedded import start_dev_cluster

    cfg = DEV_BROKER_CONFIG if broker_config is None else broker_config
    with start_dev_cluster(in_process=in_process, broker_config=cfg if in_process else None) as cluster, \
            using_name_server(cluster.namesrv_addr):
        yield cluster


@contextlib.contextmanager
def running_listeners(names: Iterable[str] | None = None, groups: Iterable[str] | None = None) -> Iterator[list[Any]]:
    """Start the selected listeners (all by default) and shut them down after the block."""
    from .listeners import start_listeners, stop_listeners

    containers = start_listeners(names, groups)
    try:
        yield containers
    finally:
        stop_listeners(containers)


class RocketMQTestRunner(DiscoverRunner):
    """``DiscoverRunner`` with the embedded broker running for the whole test run (settings
    ``ROCKETMQ_TEST_BROKER_CONFIG`` override :data:`DEV_BROKER_CONFIG`)."""

    def setup_test_environment(self, **kwargs: Any) -> None:
        super().setup_test_environment(**kwargs)
        self._rocketmq = contextlib.ExitStack()
        self._rocketmq.enter_context(embedded_broker(getattr(settings, "ROCKETMQ_TEST_BROKER_CONFIG", None)))

    def teardown_test_environment(self, **kwargs: Any) -> None:
        self._rocketmq.close()
        super().teardown_test_environment(**kwargs)
