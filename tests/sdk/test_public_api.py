"""The names a user imports from ``rocketmq_sdk``: every one exists, and the configuration
classes, every exception, the lifecycle states and the retry policy are among them."""

from __future__ import annotations

import inspect

import pytest
import rocketmq_sdk
from rocketmq_sdk import config, config_types, exceptions, lifecycle, retry


def _defined_in(module) -> dict[str, type]:
    return {name: obj for name, obj in vars(module).items()
            if inspect.isclass(obj) and obj.__module__ == module.__name__ and not name.startswith("_")}


def test_every_name_of_all_exists_once():
    assert len(rocketmq_sdk.__all__) == len(set(rocketmq_sdk.__all__))
    missing = [name for name in rocketmq_sdk.__all__ if not hasattr(rocketmq_sdk, name)]
    assert missing == []
    star: dict[str, object] = {}
    exec("from rocketmq_sdk import *", star)
    assert set(star) - {"__builtins__"} == set(rocketmq_sdk.__all__)


def test_every_exception_is_exported():
    errors = {name: cls for name, cls in _defined_in(exceptions).items() if issubclass(cls, BaseException)}
    assert len(errors) == 18 and "MQError" in errors and "FrameError" in errors
    for name, cls in errors.items():
        assert name in rocketmq_sdk.__all__, name
        assert getattr(rocketmq_sdk, name) is cls
        assert issubclass(cls, rocketmq_sdk.MQError)


@pytest.mark.parametrize("module", [config, config_types, retry], ids=lambda m: m.__name__)
def test_public_classes_of_config_and_retry_are_exported(module):
    classes = {name: obj for name, obj in _defined_in(module).items() if name in module.__all__}
    assert classes, module.__name__
    for name, cls in classes.items():
        assert name in rocketmq_sdk.__all__, name
        assert getattr(rocketmq_sdk, name) is cls


def test_config_classes_lifecycle_and_retry_names():
    wanted = {"ClientConfig", "ProducerConfig", "ConsumerConfig", "LitePullConsumerConfig", "ProducerSettings",
              "ConsumerSettings", "ServiceState", "RetryPolicy", "ExponentialBackoff", "ConstantBackoff",
              "NoBackoff", "ErrorCodeBackoff", "Backoff"}
    assert wanted <= set(rocketmq_sdk.__all__)
    assert rocketmq_sdk.ServiceState is lifecycle.ServiceState
    assert rocketmq_sdk.ServiceState.RUNNING.value == "RUNNING"
