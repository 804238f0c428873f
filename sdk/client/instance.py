"""``MQClientInstance``: the machinery shared by the producers and consumers of one client id
(Java ``MQClientInstance``).

One instance owns one I/O event loop thread, one ``RemotingClient`` (one connection per broker
and name server, many requests in flight on each), the route cache, the broker address table,
the periodic tasks (route refresh, heartbeat, offset persist, rebalance) and the processors of
broker → client requests. Its core is async; producers and consumers call it from the loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

from ..config import ClientConfig, ConsumerConfig
from ..exceptions import ClientStateError, MQError, TopicNotExistError
from ..protocol.bodies import (
    ConsumeMessageDirectlyResult,
    ConsumerData,
    ConsumerRunningInfo,
    HeartbeatData,
    ResetOffsetBody,
    TopicRouteData,
)
from ..protocol.codes import MASTER_ID, RETRY_GROUP_TOPIC_PREFIX, MessageConst, RequestCode, ResponseCode
from ..protocol.headers import (
    CheckTransactionStateRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    ResetOffsetRequestHeader,
)
from ..protocol.message import MessageExt, MessageQueue
from ..protocol.message_codec import decode_message, decode_messages
from ..remoting.channel import Processor
from ..remoting.client import RemotingClient
from ..remoting.command import RemotingCommand
from ..remoting.hooks import HookChain
from ..remoting.loop import EventLoopThread
from ..retry import ExponentialBackoff
from .blocking import BlockingConnections
from .broker_heartbeat import BrokerHeartbeats
from .mq_client_api import MQClientAPI
from .namesrv_lookup import fetch_namesrv_addr
from .route import TopicPublishInfo, publish_info_from_route, subscribe_queues_from_route, tbw102_route_for

__all__ = ["ConsumerInner", "MQClientInstance", "ProducerInner", "get_client_instance"]

log = logging.getLogger("rocketmq_sdk.client")

T = TypeVar("T")

#: Java ``fetchNameServerAddr`` period (2 minutes), ms.
NAMESRV_FETCH_INTERVAL_MS = 120_000
#: first retry of a consumer topic without a route, ms (then doubling up to the route poll period)
MISSING_ROUTE_FIRST_RETRY_MS = 1_000


class ProducerInner(Protocol):
    """What the instance needs from a producer (Java's ``MQProducerInner``).

    Called by the client instance only (route refresh and broker requests, on its loop);
    applications never need them, and the API reference leaves them out."""

    group: str

    def publish_topic_list(self) -> list[str]: ...

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None: ...

    def check_transaction_state(self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader) -> None:
        """CHECK_TRANSACTION_STATE (39) from broker ``addr`` for the half message ``msg``: queue
        the check (on the loop; must not block). A producer without a transaction listener logs
        and ignores it (Java ``checkTransactionState``)."""
        ...


class ConsumerInner(Protocol):
    """What the instance needs from a consumer (Java's ``MQConsumerInner``: ``doRebalance``,
    ``persistConsumerOffset``, ``updateTopicSubscribeInfo``, ``consumerRunningInfo``..., and the
    push consumer's ``resetOffset`` / ``consumeMessageDirectly``).

    Called by the client instance only (heartbeats, route refresh, the rebalance and offset-persist
    timers, broker requests), on its I/O loop unless said otherwise; applications never need
    them, and the API reference leaves them out."""

    group: str

    @property
    def config(self) -> ConsumerConfig: ...  # rebalance_interval

    def consumer_data(self) -> ConsumerData: ...

    def subscribed_topics(self) -> list[str]: ...

    def update_topic_subscribe_info(self, topic: str, mqs: list[MessageQueue]) -> None: ...

    async def do_rebalance(self) -> None: ...

    async def persist_consumer_offset(self) -> None: ...

    def consumer_running_info(self) -> ConsumerRunningInfo | None:
        """GET_CONSUMER_RUNNING_INFO (307): settings, subscriptions, owned queues; None when the
        consumer does not report (answered SYSTEM_ERROR, "not exist in this consumer")."""
        ...

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (220): consume ``topic``'s queues from ``offsets``."""
        ...

    def consume_message_directly(self, msg: MessageExt, broker_name: str | None) -> ConsumeMessageDirectlyResult | None:
        """CONSUME_MESSAGE_DIRECTLY (309), in a worker thread (it may block): the listener's
        outcome on ``msg``; None when the consumer has no listener to run it (answered
        SYSTEM_ERROR)."""
        ...


class MQClientInstance:
    """Shared client machinery for one client id. Get one with :func:`get_client_instance`.

    Args:
        config: the settings of the first client that created it (intervals, name servers).
        client_id: ``ip@instance``.
    """

    def __init__(self, config: ClientConfig, client_id: str) -> None:
        self.config = config
        #: per broker: version answered, heartbeat v2 state (RocketMQ 5.x)
        self.broker_heartbeats = BrokerHeartbeats(getattr(config, "use_heartbeat_v2", False))
        self.client_id = client_id
        self.loop_thread = EventLoopThread(name=f"rocketmq-{client_id}", event_loop=config.event_loop)
        #: one chain of RPC hooks for every transport (asyncio, caller-thread sockets, callbacks)
        hooks = HookChain(config.effective_rpc_hooks)
        tls = config.effective_ssl_context  # use_tls / ssl_context (Java useTLS)
        self.remoting = RemotingClient(config.connect_timeout, rpc_hooks=hooks, ssl_context=tls)
        #: per-thread blocking connections for sync sends from caller threads (no I/O-thread hop)
        self.blocking = BlockingConnections(config.connect_timeout, hooks, ssl_context=tls)
        self.api = MQClientAPI(self.remoting, config.namesrv_addr_list, config.mq_client_api_timeout)
        self.producers: dict[str, ProducerInner] = {}
        self.consumers: dict[str, ConsumerInner] = {}
        self.routes: dict[str, TopicRouteData] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self._route_locks: dict[str, asyncio.Lock] = {}
        #: consumer topics without a route yet -> the retry task (backoff 1 s .. route poll period)
        self._missing_routes: dict[str, asyncio.Task] = {}
        self._tasks: list[asyncio.Task] = []
        self._rebalance_event: asyncio.Event | None = None
        self._heartbeat_lock: asyncio.Lock | None = None
        self._heartbeat_task: asyncio.Task | None = None
        self._heartbeat_again = False
        self._started = False
        self._closed = False
        self.remoting.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_consumer_ids_changed)
        self.remoting.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_get_running_info)
        self.remoting.register_processor(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset_offset)
        self.remoting.register_processor(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction_state)
        self.remoting.register_processor(RequestCode.CONSUME_MESSAGE_DIRECTLY, self._on_consume_message_directly)

    # -------------------------------------------------------------- sync helpers

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None) -> T:
        """Run ``coro`` on the I/O loop and wait for its result (see ``EventLoopThread.run``)."""
        return self.loop_thread.run(coro, timeout_s)

    # -------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Start the periodic tasks (idempotent). Must run on the instance's loop."""
        if self._started:
            return
        if self._closed:
            raise ClientStateError(f"client instance {self.client_id} is shut down")
        self._started = True
        self._rebalance_event = asyncio.Event()
        self._heartbeat_lock = asyncio.Lock()
        cfg = self.config
        if cfg.address_server and not cfg.namesrv_addr_list:
            await self.fetch_namesrv_addrs()
            self._tasks.append(self._spawn(self._periodic("name server address fetch", NAMESRV_FETCH_INTERVAL_MS,
                                                          self.fetch_namesrv_addrs)))
        self._tasks += [
            self._spawn(self._periodic("route refresh", cfg.poll_name_server_interval, self.update_all_routes)),
            self._spawn(self._periodic("heartbeat", cfg.heartbeat_broker_interval, self.send_heartbeat_to_all)),
            self._spawn(self._periodic("offset persist", cfg.persist_consumer_offset_interval,
                                       self.persist_all_offsets)),
            self._spawn(self._rebalance_loop()),
        ]

    async def fetch_namesrv_addrs(self) -> None:
        """Ask the address server (``namesrv_domain``) for the name server list; a failed fetch
        keeps the current list."""
        url = self.config.address_server
        if not url:
            return
        addrs = await asyncio.get_running_loop().run_in_executor(
            None, fetch_namesrv_addr, url, self.config.mq_client_api_timeout / 1000.0)
        if addrs and self.api.namesrv.update(addrs):
            log.info("client %s: name servers from %s: %s", self.client_id, url, ";".join(addrs))

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        return asyncio.get_running_loop().create_task(coro)

    def spawn_background(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task | None:
        """Run ``coro`` as a task cancelled by :meth:`shutdown` (call on the loop thread); None
        (``coro`` closed) once the instance is shut down."""
        if self._closed:
            coro.close()
            return None
        task = self._spawn(coro)
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)
        return task

    async def shutdown(self) -> None:
        """Cancel the periodic tasks and close every connection."""
        self._closed = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        self.blocking.close()
        await self.remoting.close()

    async def _periodic(self, name: str, interval_ms: int, fn: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000.0)
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("%s of client %s failed", name, self.client_id, exc_info=True)

    async def _rebalance_loop(self) -> None:
        assert self._rebalance_event is not None
        while True:
            intervals = [c.config.rebalance_interval for c in self.consumers.values()]
            try:
                await asyncio.wait_for(self._rebalance_event.wait(), min(intervals or [20_000]) / 1000.0)
            except TimeoutError:
                pass
            self._rebalance_event.clear()
            try:
                await self.rebalance_all()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("rebalance of client %s failed", self.client_id, exc_info=True)

    # -------------------------------------------------------------- registration

    def set_reply_processor(self, processor: Processor) -> None:
        """Handle PUSH_REPLY_MESSAGE_TO_CLIENT (326, a broker pushing the reply of a request) with
        ``processor(channel, request)``. Producers install theirs at start
        (``rocketmq_sdk.producer.request``); until then such a push is answered
        REQUEST_CODE_NOT_SUPPORTED (no request of this client can be waiting for it)."""
        self.remoting.register_processor(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, processor)

    def register_producer(self, producer: ProducerInner) -> None:
        """Raises ClientStateError: the group already has a producer in this instance."""
        if producer.group in self.producers:
            raise ClientStateError(f"producer group {producer.group!r} is already registered in client "
                                   f"{self.client_id}; use another instance_name")
        self.producers[producer.group] = producer

    def register_consumer(self, consumer: ConsumerInner) -> None:
        """Raises ClientStateError: the group already has a consumer in this instance."""
        if consumer.group in self.consumers:
            raise ClientStateError(f"consumer group {consumer.group!r} is already registered in client "
                                   f"{self.client_id}; use another instance_name")
        self.consumers[consumer.group] = consumer

    def unregister_producer(self, group: str) -> None:
        """Forget the producer of ``group`` (no request: see :meth:`unregister`); no error when
        there is none."""
        self.producers.pop(group, None)

    def unregister_consumer(self, group: str) -> None:
        """Forget the consumer of ``group`` (no request: see :meth:`unregister`); no error when
        there is none."""
        self.consumers.pop(group, None)

    async def unregister(self, *, producer_group: str | None = None, consumer_group: str | None = None) -> None:
        """Forget a group and tell every broker (UNREGISTER_CLIENT, Java ``unregisterClient``);
        failures are logged."""
        if producer_group:
            self.unregister_producer(producer_group)
        if consumer_group:
            self.unregister_consumer(consumer_group)
        addrs = {addr for addrs in self.broker_addrs.values() for addr in addrs.values()}
        for addr in sorted(addrs):
            try:
                await self.api.unregister_client(addr, self.client_id, producer_group=producer_group,
                                                 consumer_group=consumer_group)
            except MQError as exc:
                log.warning("unregister of client %s from %s failed: %s", self.client_id, addr, exc)

    @property
    def in_use(self) -> bool:
        return bool(self.producers or self.consumers)

    # -------------------------------------------------------------- routes

    async def update_topic_route(self, topic: str, *, default_topic: str | None = None,
                                 default_queue_nums: int = 4) -> TopicRouteData | None:
        """Fetch ``topic``'s route from a name server and hand it to producers and consumers.

        With ``default_topic`` (producers, after the topic's own lookup failed), the topic gets
        the default topic's route (TBW102, docs/protocol.md §6.2) so the first send can auto-create it.

        Returns:
            the route, or None when there is none (a warning is logged).
        """
        lock = self._route_locks.setdefault(topic, asyncio.Lock())
        async with lock:
            try:
                if default_topic:
                    route = tbw102_route_for(await self.api.get_topic_route(default_topic), default_queue_nums)
                else:
                    route = await self.api.get_topic_route(topic)
            except TopicNotExistError:
                # without the default topic (TBW102) the broker does not auto-create topics: the
                # send's TopicNotExistError says what to do; a log line about TBW102 would not help
                log.debug("no route for topic %s", default_topic or topic)
                if not default_topic:
                    self._retry_missing_route(topic)
                return None
            self._apply_route(topic, route)
            return route

    def _retry_missing_route(self, topic: str) -> None:
        """A topic a consumer subscribes to has no route yet (the consumer started before the
        topic's first message or creation): look again after 1 s, 2 s, 4 s... up to
        ``poll_name_server_interval``, and rebalance as soon as it appears, instead of waiting
        for the next periodic route refresh (30 s). One INFO line per topic."""
        if topic in self._missing_routes or self._closed or not self._started:
            return
        if not any(topic in c.subscribed_topics() for c in self.consumers.values()):
            return
        if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # created by the broker on the first heartbeat
            log.info("topic %s has no route yet; looking again soon", topic)
        task = self.spawn_background(self._await_route(topic))
        if task is not None:
            self._missing_routes[topic] = task

    async def _await_route(self, topic: str) -> None:
        first_s = MISSING_ROUTE_FIRST_RETRY_MS / 1000.0
        backoff = ExponentialBackoff(first_s, max(first_s, self.config.poll_name_server_interval / 1000.0))
        failures = 0
        try:
            while not self._closed:
                await asyncio.sleep(backoff.compute(failures + 1))
                if not any(topic in c.subscribed_topics() for c in self.consumers.values()):
                    return
                try:
                    route = await self.api.get_topic_route(topic)
                except MQError as exc:  # TopicNotExistError (still none) or a network error
                    log.debug("route lookup of %s: %s", topic, exc)
                    failures += 1
                    continue
                self._apply_route(topic, route)
                log.debug("topic %s has a route now", topic)
                self.wakeup_rebalance()
                return
        finally:
            self._missing_routes.pop(topic, None)

    def _apply_route(self, topic: str, route: TopicRouteData) -> None:
        learned = False
        for bd in route.broker_datas:
            known = self.broker_addrs.get(bd.broker_name)
            if known is None or not set(bd.broker_addrs.values()) <= set(known.values()):
                learned = True
            self.broker_addrs[bd.broker_name] = dict(bd.broker_addrs)
        if learned and self.consumers and self._started:
            self._heartbeat_soon()
        self.routes[topic] = route
        info: TopicPublishInfo | None = None
        for producer in self.producers.values():
            if topic in producer.publish_topic_list():
                info = info or publish_info_from_route(topic, route)
                producer.update_topic_publish_info(topic, info)
        mqs: list[MessageQueue] | None = None
        for consumer in self.consumers.values():
            if topic in consumer.subscribed_topics():
                mqs = mqs if mqs is not None else subscribe_queues_from_route(topic, route)
                consumer.update_topic_subscribe_info(topic, mqs)

    async def announce_producer(self, default_topic: str) -> None:
        """Learn the brokers serving ``default_topic`` (TBW102) and heartbeat them, as a Java
        producer does right after start (route fetch at 10 ms, first heartbeat at 1 s), so the
        brokers know the producer group (transaction checks, producerConnection) before its
        first send. Failures are logged at DEBUG: a cluster without TBW102 is normal."""
        try:
            route = await self.api.get_topic_route(default_topic)
        except MQError as exc:
            log.debug("client %s: no route for %s at start: %s", self.client_id, default_topic, exc)
        else:
            for bd in route.broker_datas:
                self.broker_addrs[bd.broker_name] = dict(bd.broker_addrs)
        try:
            await self.send_heartbeat_to_all()
        except MQError as exc:
            log.debug("client %s: first heartbeat failed: %s", self.client_id, exc)

    async def update_all_routes(self) -> None:
        """Refresh the route of every topic used by a producer or consumer of this instance."""
        topics = {t for p in self.producers.values() for t in p.publish_topic_list()}
        topics.update(t for c in self.consumers.values() for t in c.subscribed_topics())
        for topic in sorted(topics):
            try:
                await self.update_topic_route(topic)
            except MQError as exc:
                log.warning("route refresh of %s failed: %s", topic, exc)

    def find_broker_master(self, broker_name: str) -> str | None:
        """Master address of ``broker_name`` from the routes seen so far."""
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)

    def find_broker_any(self, broker_name: str) -> str | None:
        """Master address, else any known address of ``broker_name``."""
        addrs = self.broker_addrs.get(broker_name) or {}
        return addrs.get(MASTER_ID) or next(iter(addrs.values()), None)

    def find_broker_in_subscribe(self, broker_name: str, broker_id: int) -> tuple[str | None, bool]:
        """``(address, is_slave)`` to pull ``broker_name`` from when the broker suggested
        ``broker_id`` (Java ``MQClientInstance.findBrokerAddressInSubscribe`` with
        ``onlyThisBroker=false``): that id; if missing and not the master's, ``id + 1``; else any
        address of the name (a slave while the master is away); ``(None, False)`` if unknown."""
        addrs = self.broker_addrs.get(broker_name) or {}
        bid = broker_id
        addr = addrs.get(bid)
        if addr is None and bid != MASTER_ID:
            bid += 1
            addr = addrs.get(bid)
        if addr is None:
            bid, addr = next(iter(sorted(addrs.items())), (MASTER_ID, None))
        return addr, addr is not None and bid != MASTER_ID

    async def find_broker_master_or_refresh(self, broker_name: str, topic: str) -> str | None:
        """Like :meth:`find_broker_master`, refreshing ``topic``'s route once if unknown."""
        addr = self.find_broker_master(broker_name)
        if addr is None:
            await self.update_topic_route(topic)
            addr = self.find_broker_master(broker_name)
        return addr

    # -------------------------------------------------------------- heartbeat

    def heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(self.client_id, sorted(self.producers),
                             [c.consumer_data() for c in self.consumers.values()])

    def _heartbeat_soon(self) -> None:
        """Heartbeat now (in a task) because a broker was first learned: a consumer that only
        pulls (``PullConsumer``, lite-pull ``assign``) would otherwise stay unknown to it until
        the next periodic heartbeat (30 s), so ``consumerProgress`` could not find the group."""
        self._heartbeat_again = True
        if self._heartbeat_task is not None and not self._heartbeat_task.done():
            return  # the running one sends another after it (it may have listed the brokers already)

        async def beat() -> None:
            while self._heartbeat_again:
                self._heartbeat_again = False
                try:
                    await self.send_heartbeat_to_all()
                except MQError as exc:
                    log.debug("heartbeat of client %s failed: %s", self.client_id, exc)

        self._heartbeat_task = self.spawn_background(beat())

    async def send_heartbeat_to_all(self) -> None:
        """HEART_BEAT to every known broker (masters only when there is no consumer)."""
        if not self.in_use:
            return
        assert self._heartbeat_lock is not None
        async with self._heartbeat_lock:
            data = self.heartbeat_data()
            with_slaves = bool(data.consumers)
            targets = sorted({addr for addrs in self.broker_addrs.values() for bid, addr in addrs.items()
                              if with_slaves or bid == MASTER_ID})
            bodies = [self.broker_heartbeats.body_for(a, data) for a in targets]
            results = await asyncio.gather(*(self.api.heartbeat(a, body) for a, (body, _full) in zip(
                targets, bodies, strict=True)), return_exceptions=True)
            for addr, (body, full), result in zip(targets, bodies, results, strict=True):
                if isinstance(result, BaseException):
                    self.broker_heartbeats.forget(addr)
                    if isinstance(result, Exception):
                        log.warning("heartbeat of client %s to %s failed: %s", self.client_id, addr, result)
                else:
                    self.broker_heartbeats.on_answer(addr, body, full, result)

    # -------------------------------------------------------------- consumers

    async def rebalance_all(self) -> None:
        for consumer in list(self.consumers.values()):
            try:
                await consumer.do_rebalance()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("rebalance of group %s failed", consumer.group, exc_info=True)

    def wakeup_rebalance(self) -> None:
        """Ask for a rebalance now (call from the loop)."""
        if self._rebalance_event is not None:
            self._rebalance_event.set()

    async def persist_all_offsets(self) -> None:
        for consumer in list(self.consumers.values()):
            await consumer.persist_consumer_offset()

    async def _on_get_running_info(self, channel: Any, cmd: RemotingCommand) -> RemotingCommand:
        group = cmd.ext_fields.get("consumerGroup", "")
        consumer = self.consumers.get(group)
        info = consumer.consumer_running_info() if consumer is not None else None
        if info is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer")
        return cmd.response(ResponseCode.SUCCESS, body=info.to_json())

    async def _on_reset_offset(self, channel: Any, cmd: RemotingCommand) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (220, oneway): hand the offsets to the group's consumer
        (``ConsumerInner.reset_offset(topic, {mq: offset})``)."""
        h = ResetOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        consumer = self.consumers.get(h.group or "")
        if consumer is None or not cmd.body:
            log.warning("reset offset request for unknown group %s or without a body; ignored", h.group)
            return None
        log.info("broker %s resets the offsets of group %s, topic %s", getattr(channel, "remote_addr", "?"),
                 h.group, h.topic)
        await consumer.reset_offset(h.topic or "", ResetOffsetBody.from_json(cmd.body).offset_table)
        return None

    async def _on_consume_message_directly(self, channel: Any, cmd: RemotingCommand) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY (309): the group's listener consumes the message in the body
        (off the loop); the answer is its ConsumeMessageDirectlyResult."""
        h = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(cmd.ext_fields)
        consumer = self.consumers.get(h.consumer_group or "")
        result = None
        if consumer is not None:
            msg, _ = decode_message(cmd.body)
            result = await asyncio.to_thread(consumer.consume_message_directly, msg, h.broker_name)
        if result is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"The Consumer Group <{h.consumer_group}> not exist in this consumer")
        return cmd.response(ResponseCode.SUCCESS, body=result.to_json())

    async def _on_check_transaction_state(self, channel: Any, cmd: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE (39, oneway): hand the message to the producer of its
        ``PGROUP`` (``ProducerInner.check_transaction_state``)."""
        header = CheckTransactionStateRequestHeader.from_ext_fields(cmd.ext_fields)
        msgs = decode_messages(cmd.body) if cmd.body else []
        if not msgs:
            log.warning("transaction check without a message from %s; ignored", getattr(channel, "remote_addr", "?"))
            return None
        msg = msgs[0]
        msg.transaction_id = header.transaction_id or msg.get_property(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        group = msg.get_property(MessageConst.PRODUCER_GROUP) or ""
        producer = self.producers.get(group)
        if producer is None:
            log.warning("transaction check for group %r, which has no producer here; ignored", group)
            return None
        producer.check_transaction_state(channel.remote_addr, msg, header)
        return None

    async def _on_consumer_ids_changed(self, channel: Any, cmd: RemotingCommand) -> None:
        log.info("broker %s says the consumers of group %s changed; rebalancing",
                 channel.remote_addr, cmd.ext_fields.get("consumerGroup"))
        self.wakeup_rebalance()
        return None


# ------------------------------------------------------------------ instance table

_instances: dict[str, MQClientInstance] = {}
_instances_lock = threading.Lock()


def get_client_instance(config: ClientConfig) -> MQClientInstance:
    """The instance of ``config``'s client id, created if needed (Java ``MQClientManager``)."""
    client_id = config.build_client_id()
    with _instances_lock:
        inst = _instances.get(client_id)
        if inst is None or inst._closed or not inst.loop_thread.is_running:
            inst = _instances[client_id] = MQClientInstance(config, client_id)
        return inst


def release_client_instance(inst: MQClientInstance, timeout_s: float = 5.0) -> None:
    """Shut ``inst`` down if no producer or consumer uses it any more (call from outside its loop)."""
    with _instances_lock:
        if inst.in_use or inst._closed:
            return
        if _instances.get(inst.client_id) is inst:
            del _instances[inst.client_id]
        inst._closed = True
    try:
        inst.run(inst.shutdown(), timeout_s)
    except (MQError, TimeoutError):
        log.warning("client instance %s did not shut down cleanly", inst.client_id, exc_info=True)
    finally:
        inst.loop_thread.stop(timeout_s)
