"""POP checkpoints (5.x ``PopCheckPoint``) and their durable table.

A checkpoint records one pop of one queue: which offsets were handed out, when, for how long
they are invisible and which of them were acknowledged since. The revive service copies every
offset still un-acknowledged at ``pop_time + invisible_time`` into the group's POP retry topic.

Apache RocketMQ keeps checkpoints and acks as timer messages in ``rmq_sys_REVIVE_LOG_<cluster>``;
the reference broker keeps the table in memory and writes it to ``config/popCheckpoint.json``
*before* the consumer offsets are persisted, so an offset that survives a crash always has the
checkpoint of the messages it moved past: a crash can only cause redelivery, never loss.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from rocketmq_sdk.protocol import fastjson

from ..config_file import read_json, write_atomically

CheckPointKey = tuple[str, str, int, int, int]  # (read topic, group, queue id, start offset, pop time)


@dataclass(slots=True)
class CheckPoint:
    """One pop of one queue. ``topic`` is the topic read (normal or POP retry topic);
    ``origin_topic`` the topic the consumer asked for; times in epoch ms / ms."""

    topic: str
    origin_topic: str
    group: str
    queue_id: int
    start_offset: int
    offsets: list[int]
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry_flag: int
    acked: set[int] = field(default_factory=set)

    @property
    def key(self) -> CheckPointKey:
        return (self.topic, self.group, self.queue_id, self.start_offset, self.pop_time)

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    def unacked(self) -> list[int]:
        return [o for o in self.offsets if o not in self.acked]

    def to_json(self) -> dict:
        # field names of 5.x's PopCheckPoint where it has them
        return {"t": self.topic, "ot": self.origin_topic, "c": self.group, "q": self.queue_id,
                "so": self.start_offset, "d": [o - self.start_offset for o in self.offsets], "pt": self.pop_time,
                "it": self.invisible_time, "rq": self.revive_qid, "r": self.retry_flag,
                "a": sorted(o - self.start_offset for o in self.acked)}

    @classmethod
    def from_json(cls, d: dict) -> CheckPoint:
        so = int(d["so"])
        return cls(str(d["t"]), str(d["ot"]), str(d["c"]), int(d["q"]), so, [so + int(x) for x in d["d"]],
                   int(d["pt"]), int(d["it"]), int(d["rq"]), int(d["r"]), {so + int(x) for x in d.get("a", ())})


class CheckPointTable:
    """The pending checkpoints, by key; persisted as a whole (small: only un-revived pops)."""

    def __init__(self, config_dir: str) -> None:
        self.path = os.path.join(config_dir, "popCheckpoint.json")
        self.table: dict[CheckPointKey, CheckPoint] = {}
        self._dirty = False

    def load(self) -> None:
        d = read_json(self.path)
        for item in (d or {}).get("checkpoints", ()):
            ck = CheckPoint.from_json(item)
            self.table[ck.key] = ck

    def add(self, ck: CheckPoint) -> None:
        if ck.key in self.table:
            raise ValueError(f"checkpoint {ck.key} exists already")
        self.table[ck.key] = ck
        self._dirty = True

    def get(self, key: CheckPointKey) -> CheckPoint | None:
        return self.table.get(key)

    def remove(self, key: CheckPointKey) -> None:
        if self.table.pop(key, None) is not None:
            self._dirty = True

    def mark_acked(self, ck: CheckPoint, offset: int) -> bool:
        """Acknowledge ``offset`` of ``ck``; True when it was popped by ``ck`` and not acked yet.
        A checkpoint whose offsets are all acknowledged is dropped."""
        if offset not in ck.offsets or offset in ck.acked:
            return False
        ck.acked.add(offset)
        self._dirty = True
        if len(ck.acked) >= len(ck.offsets) and self.table.get(ck.key) is ck:
            del self.table[ck.key]
        return True

    def due(self, now_ms: int) -> list[CheckPoint]:
        return [ck for ck in self.table.values() if ck.revive_time <= now_ms]

    def persist(self, force: bool = False) -> None:
        if not (self._dirty or force):
            return
        self._dirty = False
        write_atomically(self.path, fastjson.dumps({"checkpoints": [ck.to_json() for ck in self.table.values()]}))
