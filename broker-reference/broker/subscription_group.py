"""Consumer group settings of the broker (RocketMQ ``SubscriptionGroupManager``), persisted in
``config/subscriptionGroup.json`` (same form as the GET_ALL_SUBSCRIPTIONGROUP_CONFIG body)."""

from __future__ import annotations

import logging
import os
import threading
import time

from rocketmq_sdk.protocol.admin_bodies import SubscriptionGroupConfig, SubscriptionGroupWrapper
from rocketmq_sdk.protocol.bodies import DataVersion

from .config_file import read_json, write_atomically

log = logging.getLogger("rocketmq_broker")

#: groups a 4.9.8 broker always knows (its ``SubscriptionGroupManager.init``)
SYSTEM_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
                 "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER")


class SubscriptionGroupManager:
    """Thread-safe table of :class:`SubscriptionGroupConfig` by group name.

    Args:
        config_dir: the broker's ``config/`` directory.
        auto_create: ``autoCreateSubscriptionGroup``: unknown groups get default settings on
            first use (else :meth:`find` returns None and the broker answers
            SUBSCRIPTION_GROUP_NOT_EXIST).
    """

    def __init__(self, config_dir: str, auto_create: bool = True) -> None:
        self.path = os.path.join(config_dir, "subscriptionGroup.json")
        self.auto_create = auto_create
        self.table: dict[str, SubscriptionGroupConfig] = {g: SubscriptionGroupConfig(g) for g in SYSTEM_GROUPS}
        self.data_version = DataVersion(int(time.time() * 1000), 0)
        self._lock = threading.RLock()

    def load(self) -> None:
        d = read_json(self.path)
        if d:
            w = SubscriptionGroupWrapper.from_dict(d)
            with self._lock:
                self.table.update(w.subscription_group_table)
                self.data_version = w.data_version

    def wrapper(self) -> SubscriptionGroupWrapper:
        with self._lock:
            return SubscriptionGroupWrapper(DataVersion(self.data_version.timestamp, self.data_version.counter),
                                            dict(self.table))

    def persist(self) -> None:
        write_atomically(self.path, self.wrapper().to_json().decode())

    def _bump(self) -> None:
        self.data_version = DataVersion(int(time.time() * 1000), self.data_version.counter + 1)

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's settings; created with defaults (and persisted) when unknown and
        auto-creation is on, else None."""
        with self._lock:
            sg = self.table.get(group)
            if sg is not None or not self.auto_create:
                return sg
            sg = self.table[group] = SubscriptionGroupConfig(group)
            self._bump()
        log.info("auto-created subscription group %s", group)
        self.persist()
        return sg

    def update(self, sg: SubscriptionGroupConfig) -> None:
        with self._lock:
            self.table[sg.group_name] = sg
            self._bump()
        log.info("subscription group updated: %s", sg)
        self.persist()

    def delete(self, group: str) -> bool:
        with self._lock:
            gone = self.table.pop(group, None) is not None
            if gone:
                self._bump()
        if gone:
            self.persist()
        return gone
