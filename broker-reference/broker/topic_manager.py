"""Topic configs of the broker (RocketMQ ``TopicConfigManager``), persisted in ``config/topics.json``."""

from __future__ import annotations

import logging
import os
import threading
import time

from rocketmq_sdk.protocol.bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from rocketmq_sdk.protocol.codes import (
    DEFAULT_TOPIC,
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    PermName,
)

from .config import BrokerConfig
from .config_file import pretty, read_json, write_atomically

log = logging.getLogger("rocketmq_broker")


class TopicConfigManager:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion(int(time.time() * 1000), 0)
        self._lock = threading.RLock()
        self.path = os.path.join(config.config_dir, "topics.json")
        self._add_system_topics()

    def _add_system_topics(self) -> None:
        c = self.config
        sys_topics = [TopicConfig(SELF_TEST_TOPIC, 1, 1), TopicConfig(c.broker_cluster_name, 16, 16),
                      TopicConfig(c.broker_name, 1, 1), TopicConfig(OFFSET_MOVED_EVENT, 1, 1),
                      TopicConfig(SCHEDULE_TOPIC, 18, 18), TopicConfig(f"{c.broker_cluster_name}_REPLY_TOPIC", 1, 1)]
        if c.auto_create_topic_enable:
            sys_topics.append(TopicConfig(DEFAULT_TOPIC, c.default_topic_queue_nums, c.default_topic_queue_nums,
                                          PermName.READ | PermName.WRITE | PermName.INHERIT))
        for tc in sys_topics:
            self.table.setdefault(tc.topic_name, tc)

    def load(self) -> None:
        d = read_json(self.path)
        if d:
            wrapper = TopicConfigSerializeWrapper.from_dict(d)
            with self._lock:
                self.table.update(wrapper.topic_config_table)
                self.data_version = wrapper.data_version

    def persist(self) -> None:
        with self._lock:
            text = pretty(self.wrapper().to_dict())
        write_atomically(self.path, text)

    def wrapper(self) -> TopicConfigSerializeWrapper:
        with self._lock:
            return TopicConfigSerializeWrapper(dict(self.table), DataVersion(self.data_version.timestamp,
                                                                              self.data_version.counter))

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def _bump(self) -> None:
        self.data_version = DataVersion(int(time.time() * 1000), self.data_version.counter + 1)

    def update(self, tc: TopicConfig) -> None:
        with self._lock:
            self.table[tc.topic_name] = tc
            self._bump()
        self.persist()
        log.info("topic config updated: %s", tc)

    def create_in_send(self, topic: str, default_topic: str, queue_nums: int, sys_flag: int = 0) -> TopicConfig | None:
        """Auto-create ``topic`` from ``default_topic`` (TBW102) when its perm has INHERIT (docs/protocol.md §5.10)."""
        with self._lock:
            existing = self.table.get(topic)
            if existing is not None:
                return existing
            default = self.table.get(default_topic)
            if default is None or not self.config.auto_create_topic_enable:
                return None
            if default_topic == DEFAULT_TOPIC and not PermName.is_inherited(default.perm):
                return None
            n = max(1, min(queue_nums or default.write_queue_nums, default.write_queue_nums))
            tc = TopicConfig(topic, n, n, default.perm & ~PermName.INHERIT, default.topic_filter_type, sys_flag)
            self.table[topic] = tc
            self._bump()
        self.persist()
        log.info("auto-created topic %s from %s with %d queues", topic, default_topic, n)
        return tc

    def create_system(self, topic: str, queue_nums: int, perm: int = PermName.READ | PermName.WRITE) -> tuple[TopicConfig, bool]:
        """Create a retry/DLQ topic if missing; returns (config, created)."""
        with self._lock:
            existing = self.table.get(topic)
            if existing is not None:
                return existing, False
            tc = TopicConfig(topic, queue_nums, queue_nums, perm)
            self.table[topic] = tc
            self._bump()
        self.persist()
        return tc, True

    def delete(self, topic: str) -> bool:
        with self._lock:
            gone = self.table.pop(topic, None) is not None
            if gone:
                self._bump()
        if gone:
            self.persist()
        return gone
