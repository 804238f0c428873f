"""Committed consumer offsets (RocketMQ ``ConsumerOffsetManager``), in ``config/consumerOffset.json``.

Keys are ``topic@group``; values map queue id → the next offset to consume.
"""

from __future__ import annotations

import os
import threading

from rocketmq_sdk.protocol import fastjson

from .config_file import read_json, write_atomically


class ConsumerOffsetManager:
    def __init__(self, config_dir: str) -> None:
        self.path = os.path.join(config_dir, "consumerOffset.json")
        self.table: dict[str, dict[int, int]] = {}
        self._lock = threading.Lock()
        self._dirty = False

    def load(self) -> None:
        d = read_json(self.path)
        if d:
            with self._lock:
                self.table = {k: {int(q): int(o) for q, o in v.items()} for k, v in (d.get("offsetTable") or {}).items()}

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self._lock:
            self.table.setdefault(f"{topic}@{group}", {})[queue_id] = offset
            self._dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed on this queue."""
        return self.table.get(f"{topic}@{group}", {}).get(queue_id, -1)

    def groups_of_topic(self, topic: str) -> list[str]:
        return [k.split("@", 1)[1] for k in list(self.table) if k.split("@", 1)[0] == topic]

    def topics_of_group(self, group: str) -> list[str]:
        """Topics on which ``group`` committed offsets (Java ``whichTopicByConsumer``)."""
        return sorted(k.split("@", 1)[0] for k in list(self.table) if k.split("@", 1)[1] == group)

    def remove_group(self, group: str) -> None:
        """Forget every offset of ``group`` (DELETE_SUBSCRIPTIONGROUP with removeOffset)."""
        with self._lock:
            for k in [k for k in self.table if k.split("@", 1)[1] == group]:
                del self.table[k]
            self._dirty = True

    def persist(self, force: bool = False) -> None:
        with self._lock:
            if not (self._dirty or force):
                return
            snapshot = {k: dict(v) for k, v in self.table.items()}
            self._dirty = False
        # fastjson's form: bare int queue ids, as the Java broker writes them
        write_atomically(self.path, fastjson.dumps({"offsetTable": snapshot}, standard=False))
