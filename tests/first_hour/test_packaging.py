"""Packaging a user can rely on (issue 17 item 9, issue 18 item 8): version, typing marker,
license; the built wheel itself is checked by ``make wheel-check`` (tests/packaging/)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import rocketmq_broker
import rocketmq_sdk

ROOT = Path(__file__).resolve().parents[2]


def test_version_is_the_distributions():
    assert rocketmq_sdk.__version__ == importlib.metadata.version("rocketmq-python-sdk")
    assert "__version__" in rocketmq_sdk.__all__


def test_packages_are_marked_typed():
    for package in (rocketmq_sdk, rocketmq_broker):
        assert (Path(package.__file__).parent / "py.typed").is_file()


def test_license_is_apache_2():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert importlib.metadata.metadata("rocketmq-python-sdk")["License-Expression"] == "Apache-2.0"
