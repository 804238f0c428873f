"""Shared set-up of the console cases: the embedded cluster, users with the console's
permissions, waiting with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.contrib.auth.models import Permission, User
from django.test.utils import override_settings
from rocketmq_broker import embedded
from rocketmq_sdk.integrations.django.console import lifecycle

_state: dict = {}


def start_cluster(*, slaves: int = 0, **console: object):
    """Start the embedded cluster (two masters, each with ``slaves`` slaves replicating
    synchronously and copying offsets every 300 ms) and point the console at it."""
    extra: dict = {"slaves": slaves, "broker_role": "SYNC_MASTER",
                   "broker_config": {"slave_sync_interval": 300}} if slaves else {}
    cluster = embedded.start_cluster(("broker-a", "broker-b"), **extra)
    override = override_settings(ROCKETMQ_CONSOLE={"NAMESRV_ADDR": cluster.namesrv_addr, "SAMPLE_INTERVAL_S": 0.5,
                                                   **console})
    override.enable()
    _state.update(cluster=cluster, override=override)
    return cluster


def stop_cluster() -> None:
    lifecycle.reset_clients()
    _state.pop("override").disable()
    _state.pop("cluster").stop()


def make_user(name: str, *codenames: str) -> User:
    user = User.objects.create_user(name, password=f"{name}-pw")
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="rocketmq_console",
                                                       codename__in=codenames))
    return user


def wait_until(cond: Callable[[], object], timeout_s: float = 20.0, what: str = "condition") -> object:
    """Poll ``cond`` every 50 ms until truthy (returns its value); AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)
