"""``BrokerController``: builds a broker's store, managers and :class:`~.context.BrokerContext`,
registers the request processors of the request table on its remoting servers (the main port and
the VIP port), installs the request hooks, and keeps the broker registered with its name
servers."""

from __future__ import annotations

import asyncio
import logging
import os
import zlib
from typing import TYPE_CHECKING

from rocketmq_broker import request_guard
from rocketmq_broker.aio import wait_event
from rocketmq_broker.filter.consumer_filter import ConsumerFilterManager
from rocketmq_broker.store.ha_client import HAClient
from rocketmq_broker.store.ha_service import HAService
from rocketmq_broker.store.inner_message import InnerMessage
from rocketmq_broker.store.message_store import MessageStore
from rocketmq_broker.store.results import PutMessageResult
from rocketmq_sdk.exceptions import MQError
from rocketmq_sdk.protocol.bodies import DataVersion, RegisterBrokerBody
from rocketmq_sdk.protocol.codes import V5_3_3, RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import BrokerIdentityHeader, RegisterBrokerRequestHeader
from rocketmq_sdk.remoting import Channel, RemotingClient, RemotingCommand, RemotingServer

from .acl import PlainAccessValidator
from .acl_admin import AclAdminProcessor
from .admin_processor import AdminProcessor
from .broker_config_processor import BrokerConfigProcessor, update_broker_config
from .client_manager import ConsumerManager, ProducerManager
from .client_processor import ClientProcessor
from .config import BrokerConfig
from .context import BrokerContext
from .controller_util import MaybeAwaitable
from .group_processor import GroupProcessor
from .lock_manager import LockProcessor
from .metadata_processor import MetadataProcessor
from .offset_manager import ConsumerOffsetManager
from .pop import PopProcessor, install_pop
from .pull_processor import PullProcessor
from .replication import SlaveSynchronize, slave_refusal
from .reply_processor import ReplyProcessor
from .request_table import BROKER_REQUESTS
from .requests import register_requests
from .schedule import ScheduleService
from .send_processor import SendProcessor
from .stats_processor import StatsProcessor
from .subscription_group import SubscriptionGroupManager
from .timer import TIMER_TOPIC, TimerService
from .timer.recall import RecallProcessor
from .topic_manager import TopicConfigManager
from .transaction import BrokerTransactions
from .v5_topic_config import TopicConfigProcessor

if TYPE_CHECKING:
    from rocketmq_broker.dledger.broker_role import DLedgerBroker

log = logging.getLogger("rocketmq_broker")


def _dledger_store(config: BrokerConfig) -> MessageStore:
    from rocketmq_broker.dledger.store import DLedgerMessageStore  # DLedger mode only
    return DLedgerMessageStore(config.store)


def _dledger_broker(broker: BrokerController) -> DLedgerBroker:
    from rocketmq_broker.dledger.broker_role import DLedgerBroker as _DLedgerBroker
    return _DLedgerBroker(broker)


class BrokerController:
    """A broker: ``await start()`` binds, recovers the store and registers with the name servers.

    It builds the store, the managers and the :class:`~.context.BrokerContext` the request
    processors get (never the controller), registers every processor's handlers from the
    request table (:mod:`.request_table`), installs the request hooks that read that table (name
    check, ACL, a slave's refusal of writes) and runs the periodic tasks: name-server
    registration, offset persistence, idle-channel scan.
    """

    def __init__(self, config: BrokerConfig) -> None:
        config.check_role()
        self.config = config
        os.makedirs(config.config_dir, exist_ok=True)
        self.store = MessageStore(config.store) if not config.store.enable_d_leger_commit_log else _dledger_store(config)
        self.topics = TopicConfigManager(config)
        self.offsets = ConsumerOffsetManager(config.config_dir)
        self.groups = SubscriptionGroupManager(config.config_dir, config.auto_create_subscription_group)
        self.consumers = ConsumerManager(ConsumerFilterManager(os.path.join(config.config_dir, "consumerFilter.json"),
                                                               config.filter_data_clean_time_span))
        self.producers = ProducerManager()
        ctx = self.ctx = BrokerContext(config, self.store, self.topics, self.offsets, self.groups, self.consumers,
                                       self.producers)
        self.schedule = ctx.schedule = ScheduleService(config, self.store,
                                                       lambda inner: ctx.put_message(inner, schedule=False))
        self.server = RemotingServer(ssl_context=config.tls_server_context(),  # tlsEnable
                                     busy_poll_us=config.busy_poll_us)
        self.namesrv_client = RemotingClient(ssl_context=config.tls_client_context())
        self.transactions = ctx.transactions = BrokerTransactions(ctx)
        if config.is_v5:
            self.server.response_version = V5_3_3
        self.timer: TimerService | None = TimerService(
            self.store, lambda inner: ctx.put_message(inner, schedule=False), config.config_dir,
            config.timer_precision_ms, config.timer_max_delay_sec) if config.is_v5 else None
        ctx.timer = self.timer
        self.acl = (PlainAccessValidator(config.acl_file_path, denied_code=config.acl_denied_response_code)
                    if config.acl_enable else None)  # aclEnable
        self.pull = PullProcessor(ctx)
        self.send = SendProcessor(ctx)
        self.lock = LockProcessor(ctx)
        admin = AdminProcessor(ctx)
        acl_admin = AclAdminProcessor(ctx, self.acl)
        v5, slave = config.is_v5, self.is_slave
        for p in (self.send, self.pull, ClientProcessor(ctx), admin, self.lock, GroupProcessor(ctx),
                  BrokerConfigProcessor(ctx), StatsProcessor(ctx), self.transactions.end_transaction,
                  ReplyProcessor(ctx), acl_admin, TopicConfigProcessor(self.topics), MetadataProcessor(ctx),
                  RecallProcessor(ctx)):
            register_requests(self.server, p, v5=v5, slave=slave)
        if self.server.default_processor is None:  # codes nobody serves: Java's AdminBrokerProcessor answer
            self.server.default_processor = acl_admin.not_supported
        # the "VIP" port (listenPort - 2), where a Java slave asks GET_ALL_TOPIC_CONFIG
        self.vip_server = RemotingServer(ssl_context=config.tls_server_context(), name="vip-server")
        register_requests(self.vip_server, admin, only=frozenset({RequestCode.GET_ALL_TOPIC_CONFIG}))
        self.server.on_channel_close(self._channel_closed)
        if self.acl is not None:
            self.server.add_request_hook(self.acl.before_request)
            self.vip_server.add_request_hook(self.acl.before_request)
        request_guard.install(self.server, BROKER_REQUESTS)  # every topic/group a request names
        request_guard.install(self.vip_server, BROKER_REQUESTS)
        # RocketMQ 5.x POP: only a master configured as 5.x answers the POP codes (a pop commits
        # offsets and writes revive copies: not on a slave)
        self.pop: PopProcessor | None = install_pop(ctx, self.server) if v5 and not slave else None
        # master/slave replication: HA listener on every broker, client + copies on slaves
        self.ha = ctx.ha = HAService(self.store, config.ha_settings())
        self.ha_client: HAClient | None = None
        self.slave_sync: SlaveSynchronize | None = None
        if slave:
            self.ha_client = ctx.ha_client = HAClient(self.store, config.ha_send_heartbeat_interval)
            self.slave_sync = SlaveSynchronize(ctx)
            self.server.add_request_hook(slave_refusal)
        self.store.register_arrival_listener(self._on_arrival)
        self.dledger = _dledger_broker(self) if config.store.enable_d_leger_commit_log else None
        ctx.dledger = self.dledger
        self._tasks: list[asyncio.Task] = []

    @property
    def is_master(self) -> bool:
        """``brokerId=0``."""
        return self.ctx.is_master

    @property
    def is_slave(self) -> bool:
        """``brokerRole=SLAVE``: replicates its master, refuses writes (docs/protocol.md §8.8)."""
        return self.ctx.is_slave

    # the counters and version live in the context the processors share
    @property
    def config_version(self) -> DataVersion:
        return self.ctx.config_version

    @property
    def stats_put(self) -> int:
        return self.ctx.stats_put

    @property
    def stats_get(self) -> int:
        return self.ctx.stats_get

    @property
    def ha_server_addr(self) -> str:
        """``brokerIP2:haPort``, the HA address registered with the name servers."""
        return f"{self.config.ha_server_host}:{self.ha.port}"

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        self.topics.load()
        self.offsets.load()
        self.groups.load()
        self.consumers.filters.load()
        self.schedule.load()
        if self.pop is not None:
            self.pop.service.load()
        if self.timer is not None:
            self.timer.load()
        await loop.run_in_executor(None, self.store.start)
        self.pull.start(loop)
        fixed_port = self.config.listen_port != 0
        port = await self.server.start(self.config.bind_address, self.config.listen_port)
        ha_port = self.config.ha_listen_port
        if ha_port is None:
            ha_port = port + 1 if fixed_port else 0
        self.config.listen_port = port
        await self.ha.start(self.config.bind_address, ha_port)
        if fixed_port and port > 2:  # not next to a free port: its neighbours may be anyone's
            try:
                await self.vip_server.start(self.config.bind_address, self.config.listen_port - 2)
            except OSError as exc:
                log.warning("VIP port %d not available (%s): Java slaves will not get the topic config",
                            self.config.listen_port - 2, exc)
        self.ctx.register_soon = asyncio.Event()
        if self.is_slave:  # Java: no schedule service nor transaction checks on a slave
            assert self.ha_client is not None and self.slave_sync is not None
            fixed = self.config.ha_master_address
            if fixed and len(fixed) >= 6:
                self.ha_client.update_master_address(fixed)
            self.ha_client.start()
            self.slave_sync.start()
        elif self.dledger is None:  # a DLedger member starts them when it becomes master
            self.schedule.start(loop)
            self.transactions.start(loop)
            if self.pop is not None:
                self.pop.start(loop)
            if self.timer is not None:
                self.timer.start(loop)
        if self.dledger is not None:  # after the role set-up above: elections change the role
            await self.dledger.start()
        self._tasks = [loop.create_task(self._register_loop()), loop.create_task(self._persist_loop()),
                       loop.create_task(self._scan_channels_loop())]
        log.info("broker %s listening on %s (store %s)", self.config.broker_name, self.config.broker_addr,
                 self.config.store.store_path_root_dir)
        await self.register_all(oneway=False)
        return port

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await self.schedule.stop()
        await self.transactions.stop()
        if self.pop is not None:
            await self.pop.stop()
        if self.timer is not None:
            await self.timer.stop()
        if self.ha_client is not None:
            await self.ha_client.stop()
        if self.slave_sync is not None:
            await self.slave_sync.stop()
        self.pull.stop()
        await self._unregister_all()
        await self.ha.stop()
        if self.vip_server.port:
            await self.vip_server.stop()
        await self.server.stop()
        await self.namesrv_client.close()
        self.offsets.persist(force=True)
        self.consumers.filters.persist()
        if self.dledger is not None:
            await self.dledger.stop()
        await asyncio.get_running_loop().run_in_executor(None, self.store.shutdown)
        log.info("broker %s stopped", self.config.broker_name)

    # -- storing --------------------------------------------------------------------------------
    def put_message(self, inner: InnerMessage, schedule: bool = True) -> MaybeAwaitable[PutMessageResult | None]:
        """:meth:`BrokerContext.put_message <.context.BrokerContext.put_message>`."""
        return self.ctx.put_message(inner, schedule)

    def put_messages(self, batch: list[InnerMessage]) -> MaybeAwaitable[PutMessageResult | None]:
        """:meth:`BrokerContext.put_messages <.context.BrokerContext.put_messages>`."""
        return self.ctx.put_messages(batch)

    def _on_arrival(self, topic: str, queue_id: int, max_offset: int, tags_code: int, props) -> None:
        self.pull.on_arrival(topic, queue_id, max_offset, tags_code, props)
        if self.pop is not None:
            self.pop.on_arrival(topic)
        if self.ha.connections:  # data for the slaves now rather than at their 100 ms poll
            loop = self.pull.loop
            if loop is not None:
                try:
                    on_loop = asyncio.get_running_loop() is loop
                except RuntimeError:
                    on_loop = False
                if on_loop:
                    self.ha.wake_writers()
                else:
                    loop.call_soon_threadsafe(self.ha.wake_writers)
        if topic == "SCHEDULE_TOPIC_XXXX" and self.pull.loop is not None:
            self.pull.loop.call_soon_threadsafe(self.schedule.notify, queue_id)
        if topic == TIMER_TOPIC and self.timer is not None and self.pull.loop is not None:
            self.pull.loop.call_soon_threadsafe(self.timer.notify)

    # -- statistics and settings ----------------------------------------------------------------
    def record_get(self, group: str, count: int) -> None:
        """Count ``count`` messages pulled by ``group`` (runtime info and consume TPS)."""
        self.ctx.record_get(group, count)

    def consume_tps(self, group: str) -> float:
        """Messages/s pulled by ``group`` over the last minute (ConsumeStats.consumeTps)."""
        return self.ctx.consume_tps(group)

    def update_config(self, props: dict[str, str]) -> dict[str, object]:
        """UPDATE_BROKER_CONFIG on the running broker: :func:`.broker_config_processor.update_broker_config`.

        Raises:
            RestartRequiredError: ``props`` holds store keys read only at start (nothing changes).
            ValueError: a value does not parse as its setting's type (nothing changes).
        """
        return update_broker_config(self.ctx, props)

    # -- clients ----------------------------------------------------------------------------------
    def notify_consumer_ids_changed(self, group: str) -> None:
        """Send NOTIFY_CONSUMER_IDS_CHANGED to every connection of ``group``."""
        self.ctx.notify_consumer_ids_changed(group)

    def _channel_closed(self, ch: Channel) -> None:
        self.producers.unregister_channel(ch)
        for g in self.consumers.unregister_channel(ch):
            self.notify_consumer_ids_changed(g)

    async def _scan_channels_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.client_channel_scan_interval / 1000.0)
            for ch in self.producers.scan_expired(self.config.channel_expired_timeout):
                ch.close()
            for ch in self.consumers.scan_expired(self.config.channel_expired_timeout):
                log.info("closing idle consumer channel %s", ch.remote_addr)
                ch.close()

    # -- name server registration -------------------------------------------------------------------
    def register_to_namesrv_soon(self) -> None:
        """Register with the name servers now rather than at the next period."""
        self.ctx.register_to_namesrv_soon()

    async def _register_loop(self) -> None:
        period = self.config.register_name_server_period / 1000.0
        while True:
            try:
                soon = self.ctx.register_soon
                assert soon is not None
                if not await wait_event(soon, period):
                    await self.register_all(oneway=False)
                    continue
                soon.clear()
                waiters, self.ctx.registration_waiters = self.ctx.registration_waiters, []
                try:
                    await self.register_all(oneway=True)
                finally:
                    for fut in waiters:
                        if not fut.done():
                            fut.set_result(None)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - registration retries next period
                log.exception("name server registration failed")

    def _namesrvs(self) -> list[str]:
        return [a.strip() for a in (self.config.namesrv_addr or "").split(";") if a.strip()]

    async def register_all(self, oneway: bool) -> None:
        c = self.config
        body = RegisterBrokerBody(self.topics.wrapper()).to_json()
        ext = RegisterBrokerRequestHeader(broker_name=c.broker_name, broker_addr=c.broker_addr,
                                          cluster_name=c.broker_cluster_name, ha_server_addr=self.ha_server_addr,
                                          broker_id=c.broker_id, compressed=False,
                                          body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
                                          enable_acting_master=False if c.is_v5 else None).to_ext_fields()
        for addr in self._namesrvs():
            cmd = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(ext), body, oneway=oneway)
            try:
                if oneway:
                    await self.namesrv_client.invoke_oneway(addr, cmd)
                else:
                    resp = await self.namesrv_client.invoke(addr, cmd, 3000)
                    if resp.code != ResponseCode.SUCCESS:
                        log.warning("register to %s failed: %s %s", addr, resp.code, resp.remark)
                    else:
                        self._learn_master(resp.ext_fields or {})
            except MQError as exc:
                log.warning("register to name server %s failed: %s", addr, exc)

    def _learn_master(self, ext: dict[str, str]) -> None:
        """A REGISTER_BROKER answer: a slave takes its master's HA address (unless
        ``haMasterAddress`` is fixed) and SlaveSynchronize its master address (None stops it),
        as Java's ``BrokerController.doRegisterBrokerAll``."""
        if self.ha_client is None or self.slave_sync is None:
            return
        ha_addr = ext.get("haServerAddr")
        fixed = self.config.ha_master_address
        if ha_addr and not (fixed and len(fixed) >= 6):
            self.ha_client.update_master_address(ha_addr)
        self.slave_sync.master_addr = ext.get("masterAddr") or None

    async def _unregister_all(self) -> None:
        c = self.config
        ext = BrokerIdentityHeader(broker_name=c.broker_name, broker_addr=c.broker_addr,
                                   cluster_name=c.broker_cluster_name, broker_id=c.broker_id).to_ext_fields()
        for addr in self._namesrvs():
            try:
                await self.namesrv_client.invoke(addr, RemotingCommand.request(RequestCode.UNREGISTER_BROKER,
                                                                               dict(ext)), 1000)
            except MQError:
                pass

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.flush_consumer_offset_interval / 1000.0)
            try:
                if self.pop is not None:  # POP checkpoints before the offsets they cover
                    self.pop.service.persist()
                self.offsets.persist()
                self.schedule.persist()
                self.consumers.filters.persist()  # Java: every 10 s
            except OSError:
                log.exception("persisting offsets failed")
