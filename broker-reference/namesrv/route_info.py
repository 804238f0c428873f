"""The name server's route table (RocketMQ ``RouteInfoManager``).

Brokers register their topic configs every 30 s; clients ask for a topic's route. A broker that
has not registered for ``broker_channel_expired_time`` ms is dropped with its queues.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketmq_sdk.protocol.bodies import BrokerData, QueueData, TopicConfig, TopicRouteData
from rocketmq_sdk.protocol.codes import PermName

log = logging.getLogger("rocketmq_broker.namesrv")


@dataclass
class BrokerLiveInfo:
    last_update_ms: float
    data_version: dict
    ha_server_addr: str = ""
    channel: object | None = None


@dataclass
class RouteInfoManager:
    """Thread-safe route tables keyed like Java's (topic → broker → QueueData, ...)."""

    topic_queue_table: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)
    broker_live_table: dict[str, BrokerLiveInfo] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def register_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                        ha_server_addr: str, topic_configs: dict[str, TopicConfig] | None,
                        data_version: dict | None, channel: object | None = None,
                        enable_acting_master: bool | None = None) -> tuple[str, str] | None:
        """Record a broker and its topics. ``enable_acting_master`` comes from a 5.x broker's
        registration (None from 4.x: the field then stays out of route data, as on 4.9.8). For a slave (``broker_id`` != 0) whose master is
        registered and live, returns the master's ``(broker address, HA address)``; else None."""
        with self._lock:
            self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
            bd = self.broker_addr_table.get(broker_name)
            if bd is None:
                bd = self.broker_addr_table[broker_name] = BrokerData(broker_name, cluster, {})
            if enable_acting_master is not None:
                bd.enable_acting_master = enable_acting_master
            # an address that moved to another id is replaced (Java does the same)
            for bid, addr in list(bd.broker_addrs.items()):
                if addr == broker_addr and bid != broker_id:
                    del bd.broker_addrs[bid]
            first = bd.broker_addrs.get(broker_id) != broker_addr
            bd.broker_addrs[broker_id] = broker_addr
            # Java ``isBrokerTopicConfigChanged``: the queue data is only rewritten on the first
            # registration or when the broker's data version moved, so a wiped write permission
            # survives the periodic registrations of an unchanged broker
            prev = self.broker_live_table.get(broker_addr)
            changed = first or prev is None or not data_version or prev.data_version != data_version
            if topic_configs is not None and broker_id == 0 and changed:
                for tc in topic_configs.values():
                    self._create_or_update_queue_data(broker_name, tc)
            if first:
                log.info("broker registered: %s %s id=%s cluster=%s", broker_name, broker_addr, broker_id, cluster)
            self.broker_live_table[broker_addr] = BrokerLiveInfo(time.monotonic() * 1000, data_version or {},
                                                                 ha_server_addr, channel)
            if broker_id == 0:
                return None
            master = bd.broker_addrs.get(0)
            live = self.broker_live_table.get(master) if master else None
            return (master, live.ha_server_addr) if live is not None else None

    def on_channel_destroy(self, channel: object) -> None:
        """The connection of a registered broker closed: unregister every broker that
        registered over it (Java ``RouteInfoManager.onChannelDestroy``)."""
        with self._lock:
            gone = [addr for addr, info in self.broker_live_table.items() if info.channel is channel]
            for addr in gone:
                for bd in list(self.broker_addr_table.values()):
                    for bid, a in list(bd.broker_addrs.items()):
                        if a == addr:
                            log.info("broker %s (%s) channel closed", bd.broker_name, addr)
                            self.unregister_broker(bd.cluster, addr, bd.broker_name, bid)
                self.broker_live_table.pop(addr, None)

    def _create_or_update_queue_data(self, broker_name: str, tc: TopicConfig) -> None:
        qd = QueueData(broker_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag)
        self.topic_queue_table.setdefault(tc.topic_name, {})[broker_name] = qd

    def unregister_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        with self._lock:
            self.broker_live_table.pop(broker_addr, None)
            bd = self.broker_addr_table.get(broker_name)
            if bd is not None:
                bd.broker_addrs.pop(broker_id, None)
                if not bd.broker_addrs:
                    del self.broker_addr_table[broker_name]
                    names = self.cluster_addr_table.get(cluster)
                    if names is not None:
                        names.discard(broker_name)
                        if not names:
                            del self.cluster_addr_table[cluster]
                    self._remove_broker_topics(broker_name)
            log.info("broker unregistered: %s %s", broker_name, broker_addr)

    def _remove_broker_topics(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            qmap = self.topic_queue_table[topic]
            qmap.pop(broker_name, None)
            if not qmap:
                del self.topic_queue_table[topic]

    def pick_route(self, topic: str) -> TopicRouteData | None:
        """The topic's route, or None when no live broker serves it."""
        with self._lock:
            qmap = self.topic_queue_table.get(topic)
            if not qmap:
                return None
            queue_datas = [qmap[name] for name in sorted(qmap)]
            broker_datas = []
            for name in sorted(qmap):
                bd = self.broker_addr_table.get(name)
                if bd is not None:
                    broker_datas.append(BrokerData(bd.broker_name, bd.cluster, dict(bd.broker_addrs),
                                                   bd.enable_acting_master, bd.zone_name))
            if not broker_datas:
                return None
            return TopicRouteData(queue_datas, broker_datas)

    def delete_topic(self, topic: str) -> None:
        with self._lock:
            self.topic_queue_table.pop(topic, None)

    def scan_not_active_broker(self, expired_ms: float) -> list[str]:
        """Drop brokers silent for longer than ``expired_ms``; returns their addresses."""
        now = time.monotonic() * 1000
        dead = []
        with self._lock:
            for addr, info in list(self.broker_live_table.items()):
                if now - info.last_update_ms > expired_ms:
                    dead.append(addr)
            for addr in dead:
                self.broker_live_table.pop(addr, None)
                for bd in list(self.broker_addr_table.values()):
                    for bid, a in list(bd.broker_addrs.items()):
                        if a == addr:
                            log.warning("broker %s (%s) expired after %.0f ms without registration",
                                        bd.broker_name, addr, expired_ms)
                            self.unregister_broker(bd.cluster, addr, bd.broker_name, bid)
        return dead

    def all_topics(self) -> list[str]:
        with self._lock:
            return sorted(self.topic_queue_table)

    def operate_write_perm(self, broker_name: str, wipe: bool) -> int:
        """WIPE_WRITE_PERM_OF_BROKER (clear the write bit) / ADD_WRITE_PERM_OF_BROKER (perm
        becomes READ|WRITE) on every queue data of ``broker_name``; returns how many topics."""
        count = 0
        with self._lock:
            for qmap in self.topic_queue_table.values():
                qd = qmap.get(broker_name)
                if qd is None:
                    continue
                qd.perm = qd.perm & ~PermName.WRITE if wipe else PermName.READ | PermName.WRITE
                count += 1
        log.info("%s write perm of broker %s on %d topic(s)", "wiped" if wipe else "added", broker_name, count)
        return count

    def topics_by_cluster(self, cluster: str) -> list[str]:
        """Topics with queues on a broker of ``cluster`` (GET_TOPICS_BY_CLUSTER), sorted; [] for an
        unknown cluster."""
        with self._lock:
            names = self.cluster_addr_table.get(cluster, set())
            return sorted(t for t, qmap in self.topic_queue_table.items() if names.intersection(qmap))

    def system_topics(self) -> tuple[list[str], str | None]:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS: every cluster name and broker name (the topics brokers
        create for themselves), and the address of one broker."""
        with self._lock:
            topics = set(self.cluster_addr_table)
            for names in self.cluster_addr_table.values():
                topics.update(names)
            addr = next((next(iter(bd.broker_addrs.values())) for bd in self.broker_addr_table.values()
                         if bd.broker_addrs), None)
            return sorted(topics), addr

    def topics_with_sys_flag(self, want: Callable[[int], bool]) -> list[str]:
        """Topics whose (first) queue data's ``topicSysFlag`` satisfies ``want`` (unit topics)."""
        with self._lock:
            return sorted(t for t, qmap in self.topic_queue_table.items()
                          if qmap and want(next(iter(qmap.values())).topic_sys_flag))

    def cluster_info(self) -> dict:
        with self._lock:
            return {"brokerAddrTable": {n: b.to_dict() for n, b in self.broker_addr_table.items()},
                    "clusterAddrTable": {c: sorted(n) for c, n in self.cluster_addr_table.items()}}
