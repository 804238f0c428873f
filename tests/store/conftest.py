"""Fixtures of the store tests (helpers live in ``store_helpers``)."""

from __future__ import annotations

import pytest
from rocketmq_broker.store import MessageStore, StoreConfig
from store_helpers import make_config


@pytest.fixture
def config(tmp_path) -> StoreConfig:
    return make_config(tmp_path / "store")


@pytest.fixture
def store(config):
    s = MessageStore(config)
    s.start()
    yield s
    s.shutdown()
