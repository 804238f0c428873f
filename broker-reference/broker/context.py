"""``BrokerContext``: the services a request processor of the broker uses, and nothing else.

The controller builds one per broker and hands it to every processor (never itself): the store,
the topic / subscription-group / offset managers, the client tables, the config, the counters,
and the few broker-wide actions a request may trigger (store a message through the delay-level
transform, re-register with the name servers soon, tell a group its members changed).
Services created after the processors (the HA client, the DLedger role) are set on it by the
controller and may be None.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from rocketmq_broker.store.ha_client import HAClient
from rocketmq_broker.store.ha_service import HAService
from rocketmq_broker.store.inner_message import InnerMessage
from rocketmq_broker.store.message_store import MessageStore
from rocketmq_broker.store.results import PutMessageResult
from rocketmq_sdk.exceptions import MQError
from rocketmq_sdk.protocol.bodies import DataVersion
from rocketmq_sdk.protocol.codes import RequestCode
from rocketmq_sdk.protocol.headers import ConsumerGroupRequestHeader
from rocketmq_sdk.remoting import RemotingCommand

from .client_manager import ConsumerManager, ProducerManager
from .config import BrokerConfig
from .controller_util import MaybeAwaitable
from .offset_manager import ConsumerOffsetManager
from .schedule import ScheduleService
from .subscription_group import SubscriptionGroupManager
from .timer import TimerService
from .topic_manager import TopicConfigManager
from .tps_meter import ConsumeTpsMeter

__all__ = ["BrokerContext", "HalfMessages", "RuntimeInfoSource"]


class RuntimeInfoSource(Protocol):
    """A part of the broker adding rows to GET_BROKER_RUNTIME_INFO (the DLedger role)."""

    def runtime_info(self) -> dict[str, str]: ...


class HalfMessages(Protocol):
    """The transaction support a send uses (``BrokerTransactions``)."""

    def refusal(self, props: dict[str, str]) -> str | None: ...

    def prepare(self, inner: InnerMessage) -> InnerMessage: ...


class BrokerContext:
    """The services of one broker, shared by its request processors.

    Args:
        config: the broker's settings (changed in place by UPDATE_BROKER_CONFIG and by a
            DLedger role change).
        store / topics / offsets / groups / consumers / producers: the broker's store,
            managers and client tables.
    """

    def __init__(self, config: BrokerConfig, store: MessageStore, topics: TopicConfigManager,
                 offsets: ConsumerOffsetManager, groups: SubscriptionGroupManager, consumers: ConsumerManager,
                 producers: ProducerManager) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.groups = groups
        self.consumers = consumers
        self.producers = producers
        #: the data version GET_BROKER_CONFIG answers (bumped by UPDATE_BROKER_CONFIG)
        self.config_version = DataVersion(int(time.time() * 1000), 0)
        #: messages stored / pulled since start (GET_BROKER_RUNTIME_INFO)
        self.stats_put = 0
        self.stats_get = 0
        self.get_meter = ConsumeTpsMeter()
        #: delay levels (set by the controller; :meth:`put_message` goes through its transform)
        self.schedule: ScheduleService | None = None
        #: the 5.x timer wheel (None on a 4.x broker)
        self.timer: TimerService | None = None
        #: half messages of transactions (set by the controller)
        self.transactions: HalfMessages | None = None
        self.ha: HAService | None = None
        self.ha_client: HAClient | None = None  # a slave's
        self.dledger: RuntimeInfoSource | None = None  # DLedger mode
        #: set by the controller while it runs: wakes its name-server registration loop
        self.register_soon: asyncio.Event | None = None
        #: futures resolved when the registration round started after they were added has been sent
        self.registration_waiters: list[asyncio.Future] = []

    @property
    def is_master(self) -> bool:
        """``brokerId=0``."""
        return self.config.broker_id == 0

    @property
    def is_slave(self) -> bool:
        """``brokerRole=SLAVE``: replicates its master, refuses writes (docs/protocol.md §8.8)."""
        return self.config.broker_role == "SLAVE"

    # -- storing --------------------------------------------------------------------------------
    def put_message(self, inner: InnerMessage, schedule: bool = True) -> MaybeAwaitable[PutMessageResult | None]:
        """Store a message on the loop thread (one writer, as the store recommends); with
        ``schedule`` a message with a delay level goes to ``SCHEDULE_TOPIC_XXXX`` first. Returns
        the result, or under SYNC_FLUSH with ``WAIT=true`` an ``asyncio.Future`` of it that the
        store's group commit completes after the fsync covering the record (no thread hop)."""
        if schedule and self.schedule is not None:
            inner = self.schedule.transform(inner)
        return self.store.put_message_async(inner)

    def put_messages(self, batch: list[InnerMessage]) -> MaybeAwaitable[PutMessageResult | None]:
        """Store a batch; same contract as :meth:`put_message`."""
        return self.store.put_messages_async(batch)

    # -- statistics -----------------------------------------------------------------------------
    def record_get(self, group: str, count: int) -> None:
        """Count ``count`` messages pulled by ``group`` (runtime info and consume TPS)."""
        self.stats_get += count
        self.get_meter.add(group, count)

    def consume_tps(self, group: str) -> float:
        """Messages/s pulled by ``group`` over the last minute (ConsumeStats.consumeTps)."""
        return self.get_meter.tps(group)

    # -- broker-wide actions --------------------------------------------------------------------
    def register_to_namesrv_soon(self) -> None:
        """Register with the name servers now rather than at the next period (a topic changed)."""
        if self.register_soon is not None:
            self.register_soon.set()

    def register_to_namesrv_before_answering(self) -> asyncio.Future | None:
        """Register now, and a future resolved once the registration has been written to every
        name server (None when no registration loop runs): a send that auto-created its topic is
        answered after it, as Java's ``createTopicInSendMessageMethod`` calls ``registerBrokerAll``
        before the send is answered — a client that routes the topic right after SEND_OK finds it."""
        if self.register_soon is None:
            return None
        fut = asyncio.get_running_loop().create_future()
        self.registration_waiters.append(fut)
        self.register_soon.set()
        return fut

    def notify_consumer_ids_changed(self, group: str) -> None:
        """Send NOTIFY_CONSUMER_IDS_CHANGED (oneway) to every connection of ``group``."""
        g = self.consumers.groups.get(group)
        if g is None:
            return
        for ch in list(g.channels):
            cmd = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                                          ConsumerGroupRequestHeader(consumer_group=group).to_ext_fields(),
                                          oneway=True)
            try:
                ch.send(cmd)
            except MQError:
                pass
