"""The tables the brokers store, read back as rocketmq-dashboard reads them: subscription groups
(each broker's ``subscriptionGroup.json``: every group created by ``updateSubGroup`` or by a
client's first heartbeat, used or not, with its settings — retry max times, broadcast, consume
enable...) and topic configs (``topics.json``: queue numbers, perm, order)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..exceptions import MQClientError
from ..protocol.admin_bodies import SubscriptionGroupConfig, SubscriptionGroupWrapper
from ..protocol.bodies import TopicConfig, TopicConfigSerializeWrapper
from ..protocol.codes import RequestCode
from .core import REQUEST_FAILED, AdminCore, log

__all__ = ["SYSTEM_CONSUMER_GROUPS", "BrokerTableAdmin", "GroupConfig", "is_system_consumer_group"]

#: groups every 4.9.8 broker creates itself (``SubscriptionGroupManager.init``) or uses internally
SYSTEM_CONSUMER_GROUPS = frozenset({
    "TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "__MONITOR_CONSUMER", "CID_SYS_RMQ_TRANS",
})
SYSTEM_CONSUMER_GROUP_PREFIX = "CID_RMQ_SYS_"


def is_system_consumer_group(group: str) -> bool:
    """A broker's own group (Java ``MixAll.isSysConsumerGroup`` plus the groups of
    ``SubscriptionGroupManager.init``)."""
    return group in SYSTEM_CONSUMER_GROUPS or group.startswith(SYSTEM_CONSUMER_GROUP_PREFIX)


@dataclass(slots=True)
class GroupConfig:
    """One group's settings on each broker that stores it (broker name → config)."""

    group: str
    brokers: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)

    @property
    def system(self) -> bool:
        return is_system_consumer_group(self.group)

    @property
    def config(self) -> SubscriptionGroupConfig:
        """The config of the first broker by name (they agree when created cluster-wide)."""
        return self.brokers[min(self.brokers)]

    @property
    def consistent(self) -> bool:
        """Every broker stores the same settings."""
        return len({c.to_json() for c in self.brokers.values()}) <= 1


class BrokerTableAdmin(AdminCore):
    """The brokers' subscription-group tables (GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201) and topic
    configs (GET_ALL_TOPIC_CONFIG 21)."""

    async def subscription_groups(self, cluster: str | None = None, *,
                                  include_system: bool = False) -> list[GroupConfig]:
        """Every group in the subscription-group table of a broker of ``cluster`` (default:
        every cluster), sorted by name, as rocketmq-dashboard's group list: groups created with
        ``update_subscription_group`` and never used by a client are there too. Each broker is
        asked once (its master, a slave while the master is down); one that does not answer is
        left out (logged).

        Args:
            cluster: only brokers of this cluster.
            include_system: also the brokers' own groups (``TOOLS_CONSUMER``...).

        Raises:
            MQClientError: unknown cluster. MQBrokerError, RemotingError (name server).
        """
        info = await self._cluster()
        if cluster and cluster not in info.cluster_addr_table:
            raise MQClientError(f"cluster {cluster!r} not found on the name server")
        groups: dict[str, GroupConfig] = {}
        for name, addr in self._cluster_readers(info, cluster).items():
            try:
                resp = await self._broker(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            except REQUEST_FAILED as exc:
                log.warning("subscription groups of %s (%s): %s", name, addr, exc)
                continue
            for group, cfg in SubscriptionGroupWrapper.from_json(resp.body).subscription_group_table.items():
                if include_system or not is_system_consumer_group(group):
                    groups.setdefault(group, GroupConfig(group)).brokers[name] = cfg
        return [groups[g] for g in sorted(groups)]

    async def subscription_group_config(self, group: str, cluster: str | None = None) -> GroupConfig:
        """The group's settings on each broker that stores it (see :meth:`subscription_groups`).

        Raises:
            MQClientError: no broker stores the group.
        """
        for found in await self.subscription_groups(cluster, include_system=True):
            if found.group == group:
                return found
        raise MQClientError(f"consumer group {group!r} is not in any broker's subscription-group table")

    async def topic_configs(self, topic: str) -> dict[str, TopicConfig]:
        """The topic's config on each broker of its route (GET_ALL_TOPIC_CONFIG 21 to the master,
        a slave while the master is down), as the dashboard's topic config: broker name →
        ``TopicConfig`` (read/write queue numbers, perm, ``order``). A broker that does not answer
        is left out (logged).

        Raises:
            TopicNotExistError: no route. MQBrokerError, RemotingError (name server).
        """
        out = {}
        for name, addr in sorted(self._route_readers(await self._route(topic)).items()):
            try:
                resp = await self._broker(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
            except REQUEST_FAILED as exc:
                log.warning("topic configs of %s (%s): %s", name, addr, exc)
                continue
            found = TopicConfigSerializeWrapper.from_json(resp.body).topic_config_table.get(topic)
            if found is not None:
                out[name] = found
        return out
