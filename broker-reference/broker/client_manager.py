"""Producer and consumer groups known from heartbeats (``ConsumerManager``/``ProducerManager``)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from rocketmq_broker.filter.consumer_filter import ConsumerFilterManager
from rocketmq_sdk.protocol.bodies import ConsumerData, SubscriptionData
from rocketmq_sdk.remoting import Channel

log = logging.getLogger("rocketmq_broker")


@dataclass
class ClientChannelInfo:
    channel: Channel
    client_id: str
    language: int
    version: int
    last_update_ms: float = field(default_factory=lambda: time.monotonic() * 1000)


@dataclass
class ConsumerGroupInfo:
    group: str
    consume_type: object = None
    message_model: object = None
    consume_from_where: object = None
    channels: dict[Channel, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return sorted({c.client_id for c in self.channels.values()})


class ConsumerManager:
    def __init__(self, filters: ConsumerFilterManager | None = None) -> None:
        self.groups: dict[str, ConsumerGroupInfo] = {}
        #: compiled SQL92 subscriptions of the groups (Java ``ConsumerFilterManager``)
        self.filters = filters if filters is not None else ConsumerFilterManager()

    def register(self, data: ConsumerData, info: ClientChannelInfo) -> bool:
        """Record a consumer heartbeat; True when membership or subscriptions changed."""
        g = self.groups.get(data.group_name)
        if g is None:
            g = self.groups[data.group_name] = ConsumerGroupInfo(data.group_name)
        g.consume_type, g.message_model, g.consume_from_where = (data.consume_type, data.message_model,
                                                                 data.consume_from_where)
        changed = info.channel not in g.channels
        old = g.channels.get(info.channel)
        if old is not None and old.client_id != info.client_id:
            changed = True
        g.channels[info.channel] = info
        new_subs = {s.topic: s for s in data.subscriptions}
        old_sig = {t: (s.sub_string, s.expression_type) for t, s in g.subscriptions.items()}
        new_sig = {t: (s.sub_string, s.expression_type) for t, s in new_subs.items()}
        if old_sig != new_sig:
            changed = True
        # keep the newest subVersion per topic (pulls compare against it)
        for t, s in new_subs.items():
            prev = g.subscriptions.get(t)
            if prev is not None and prev.sub_version > s.sub_version and old_sig.get(t) == new_sig.get(t):
                new_subs[t] = prev
        g.subscriptions = new_subs
        self.filters.register(g.group, new_subs.values())
        if changed:
            log.info("consumer group %s now has clients %s", g.group, g.client_ids())
        return changed

    def unregister_channel(self, channel: Channel, group: str | None = None) -> list[str]:
        """Remove a channel from its groups (one group, or all); returns groups that changed."""
        changed = []
        for name, g in list(self.groups.items()):
            if group is not None and name != group:
                continue
            if g.channels.pop(channel, None) is not None:
                changed.append(name)
                if not g.channels:
                    del self.groups[name]
                    self.filters.unregister(name)
                    log.info("consumer group %s has no clients left", name)
        return changed

    def scan_expired(self, timeout_ms: float) -> list[Channel]:
        now = time.monotonic() * 1000
        dead = []
        for g in self.groups.values():
            for ch, info in list(g.channels.items()):
                if now - info.last_update_ms > timeout_ms:
                    dead.append(ch)
        return dead


class ProducerManager:
    def __init__(self) -> None:
        self.groups: dict[str, dict[Channel, ClientChannelInfo]] = {}

    def register(self, group: str, info: ClientChannelInfo) -> None:
        self.groups.setdefault(group, {})[info.channel] = info

    def scan_expired(self, timeout_ms: float) -> list[Channel]:
        """Java ``ProducerManager.scanNotActiveChannel``: remove the channels that have not
        heartbeated for ``timeout_ms`` (ms) from their groups and return them (to be closed)."""
        now = time.monotonic() * 1000
        dead = []
        for name, chans in list(self.groups.items()):
            for ch, info in list(chans.items()):
                if now - info.last_update_ms > timeout_ms:
                    del chans[ch]
                    dead.append(ch)
                    log.warning("SCAN: remove expired channel[%s] from ProducerManager groupChannelTable, "
                                "producer group name: %s", ch.remote_addr, name)
            if not chans:
                del self.groups[name]
        return dead

    def unregister_channel(self, channel: Channel, group: str | None = None) -> None:
        for name, chans in list(self.groups.items()):
            if group is None or name == group:
                chans.pop(channel, None)
                if not chans:
                    del self.groups[name]
