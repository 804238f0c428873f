"""pytest fixtures for Django apps that use RocketMQ (with pytest-django).

Enable with ``pytest_plugins = ["rocketmq_sdk.integrations.django.pytest_plugin"]`` in a
``conftest.py``. Fixtures:

- ``rocketmq_broker_config`` (session): ``BrokerConfig`` fields of the embedded broker;
  override it to change them (default ``testing.DEV_BROKER_CONFIG``).
- ``rocketmq_cluster`` (session): the embedded reference cluster, started once.
- ``rocketmq`` (function): ``settings.ROCKETMQ["NAME_SERVER"]`` points at the cluster during the
  test; yields the cluster. Clients made during the test are shut down after it.
- ``rocketmq_outbox`` (function): capture mode, yields the list of
  :class:`~rocketmq_sdk.integrations.django.capture.CapturedMessage` sent during the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def rocketmq_broker_config() -> dict[str, Any]:
    from .testing import DEV_BROKER_CONFIG

    return dict(DEV_BROKER_CONFIG)


@pytest.fixture(scope="session")
def rocketmq_cluster(rocketmq_broker_config: dict[str, Any]) -> Iterator[Any]:
    from rocketmq_broker.embedded import start_dev_cluster

    with start_dev_cluster(in_process=True, broker_config=rocketmq_broker_config) as cluster:
        yield cluster


@pytest.fixture
def rocketmq(rocketmq_cluster: Any) -> Iterator[Any]:
    from .testing import using_name_server

    with using_name_server(rocketmq_cluster.namesrv_addr):
        yield rocketmq_cluster


@pytest.fixture
def rocketmq_outbox() -> Iterator[list[Any]]:
    from .capture import capture_messages

    with capture_messages() as sent:
        yield sent
