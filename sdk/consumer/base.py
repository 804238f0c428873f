"""What every consumer holds and how it starts and stops: the group, its settings, the
:class:`~rocketmq_sdk.lifecycle.Lifecycle` (Java ``ServiceState``), the shared client instance
and the group's offset store (Java ``DefaultMQPushConsumerImpl.start`` / ``shutdown`` and their
pull and lite-pull twins).

``start()``: CREATE_JUST → RUNNING. The subclass checks what it needs (:meth:`_check_startable`),
gets the client instance of its client id and the offset store of its message model
(:meth:`_connect`), prepares its own parts (:meth:`_prepare_start`), registers in the instance
and runs :meth:`_start_async` on the instance's loop; if anything raises, every step is undone
and the consumer is CREATE_JUST again (it may be started again).

``shutdown()`` (idempotent): RUNNING → SHUTTING_DOWN → SHUTDOWN_ALREADY. The subclass stops its
background work (:meth:`_stop_background`), the offsets are persisted and the group
unregistered from the brokers, the client instance released.
"""

from __future__ import annotations

import logging

from ..aio import AsyncLifecycle
from ..client.instance import MQClientInstance, get_client_instance, release_client_instance
from ..config import ConsumerConfig
from ..exceptions import ClientStateError, MQError
from ..lifecycle import Lifecycle, ServiceState
from ..protocol.bodies import ConsumeMessageDirectlyResult, ConsumerData, ConsumerRunningInfo, MessageModel
from ..protocol.codes import GROUP_MAX_LENGTH, check_name
from ..protocol.message import MessageExt, MessageQueue
from .offset_store import LocalFileOffsetStore, OffsetStore, RemoteBrokerOffsetStore
from .pull_node import PullFromWhichNode

__all__ = ["ConsumerBase"]

log = logging.getLogger("rocketmq_sdk.consumer")


class ConsumerBase(AsyncLifecycle):
    """Group, settings, lifecycle, client instance and offset store of one consumer.

    Args:
        group: consumer group (``^[%|a-zA-Z0-9_-]+$``, ≤ 255 characters).
        config: the consumer's settings.

    Raises:
        IllegalArgumentError: illegal group name.
    """

    def __init__(self, group: str, config: ConsumerConfig) -> None:
        self.group = check_name(group, "consumer group", GROUP_MAX_LENGTH)
        self.config = config
        self._lifecycle = Lifecycle(f"consumer {self.group}")
        self._client: MQClientInstance | None = None
        self._offset_store: OffsetStore | None = None
        #: the broker id each queue is pulled from next (the answers' ``suggestWhichBrokerId``)
        self._pull_nodes = PullFromWhichNode()

    # -------------------------------------------------------------- state

    @property
    def state(self) -> ServiceState:
        """CREATE_JUST, RUNNING, SHUTTING_DOWN or SHUTDOWN_ALREADY (Java ``ServiceState``)."""
        return self._lifecycle.state

    @property
    def running(self) -> bool:
        """True between a successful :meth:`start` and :meth:`shutdown`."""
        return self._lifecycle.running

    @property
    def clustering(self) -> bool:
        """CLUSTERING (True: offsets on the broker, queues shared by the group) or BROADCASTING
        (False: every consumer reads every queue, offsets in a local file)."""
        return self.config.message_model is MessageModel.CLUSTERING

    @property
    def instance(self) -> MQClientInstance:
        """The client instance this consumer shares with the producers and consumers of its
        client id (routes, broker connections, the I/O loop): for tools and tests that need the
        connection layer.

        Raises:
            ClientStateError: not started (or shut down).
        """
        inst = self._client
        if inst is None:
            raise ClientStateError(f"consumer {self.group} is not started")
        return inst

    @property
    def offset_store(self) -> OffsetStore:
        """The group's offsets: ``RemoteBrokerOffsetStore`` (CLUSTERING) or
        ``LocalFileOffsetStore`` (BROADCASTING); memory updates are thread-safe, reads and
        persists run on the client's loop (``instance.run(...)``).

        Raises:
            ClientStateError: never started.
        """
        store = self._offset_store
        if store is None:
            raise ClientStateError(f"consumer {self.group} is not started")
        return store

    def _timeout_s(self) -> float:
        """How long a caller thread waits for one round of requests on the loop (s)."""
        return self.config.mq_client_api_timeout / 1000.0 + 1.0

    # -------------------------------------------------------------- start / shutdown

    def start(self) -> None:
        """Connect, register the group with the brokers and start consuming.

        Raises:
            ClientStateError: already started or shut down, no name server (neither
                ``namesrv_addr``/``$NAMESRV_ADDR`` nor ``namesrv_domain``), or the group already
                has a consumer in this client instance (use another ``instance_name``).
        """
        with self._lifecycle.starting():
            self._check_startable()
            self.config.check_name_server()
            inst = get_client_instance(self.config)
            try:
                self._client = inst
                if self.clustering:
                    self._offset_store = RemoteBrokerOffsetStore(inst, self.group)
                else:
                    local = LocalFileOffsetStore(self.config.local_offset_store_dir, inst.client_id, self.group)
                    local.load()
                    self._offset_store = local
                self._prepare_start(inst)
                inst.register_consumer(self)
                self._lifecycle.set_running()  # the start-up requests below check ``running``
                try:
                    inst.run(self._start_async(), self._timeout_s() * 3)
                except BaseException:
                    inst.unregister_consumer(self.group)
                    raise
            except BaseException:
                self._undo_start()
                self._client = self._offset_store = None
                release_client_instance(inst)
                raise
        log.info("%s %s started (client %s)", type(self).__name__, self.group, inst.client_id)

    def _announce_subscription(self, topic: str, *, wait_rebalance: bool) -> None:
        """After a subscription change while running: ``topic``'s route, a heartbeat to every
        broker (the group's new subscription), then a rebalance (awaited, or only woken up)."""
        if not self.running:
            return

        async def announce() -> None:
            inst = self.instance
            await inst.update_topic_route(topic)
            await inst.send_heartbeat_to_all()
            if wait_rebalance:
                await self.do_rebalance()
            else:
                inst.wakeup_rebalance()
        self.instance.run(announce(), self._timeout_s())

    def _check_startable(self) -> None:
        """Raise ClientStateError when something the consumer needs is missing (hook)."""

    def _prepare_start(self, inst: MQClientInstance) -> None:
        """Build the parts that need the client instance, before registering (hook)."""

    def _undo_start(self) -> None:
        """Undo :meth:`_prepare_start` after a failed start (hook)."""

    async def _start_async(self) -> None:
        """On the loop: the client instance, routes, heartbeat (subclasses add rebalancing)."""
        inst = self.instance
        await inst.start()
        for topic in self.subscribed_topics():
            try:
                await inst.update_topic_route(topic)
            except MQError as exc:
                log.warning("route of %s not available yet: %s", topic, exc)

    def shutdown(self) -> None:
        """Stop consuming, persist the offsets, unregister from the brokers, release the client
        instance. Idempotent; a consumer never started has nothing to release."""
        if not self._lifecycle.begin_shutdown():
            return
        try:
            inst = self.instance
            self._stop_background()
            try:
                inst.run(self._persist_and_unregister(), self._timeout_s() * 2)
            except MQError:
                log.warning("consumer %s: final offset persist or unregister failed", self.group, exc_info=True)
                inst.unregister_consumer(self.group)
            self._client = None
            release_client_instance(inst)
            self._after_shutdown()
        finally:
            self._lifecycle.shutdown_done()
        log.info("%s %s shut down", type(self).__name__, self.group)

    def _stop_background(self) -> None:
        """Stop pulling and consuming before the final offset persist (hook)."""

    def _after_shutdown(self) -> None:
        """Release what remains once the client instance is released (hook)."""

    def _offset_queues(self) -> set[MessageQueue]:
        """The queues whose offsets are persisted (the others are forgotten)."""
        return set(self.offset_store.snapshot())

    async def _persist_and_unregister(self) -> None:
        await self.offset_store.persist_all(self._offset_queues(), oneway=False)
        await self.instance.unregister(consumer_group=self.group)

    # -------------------------------------------------------------- ConsumerInner (the client instance calls these)

    def consumer_data(self) -> ConsumerData:
        raise NotImplementedError

    def subscribed_topics(self) -> list[str]:
        return []

    def update_topic_subscribe_info(self, topic: str, mqs: list[MessageQueue]) -> None:
        """A subscribed topic's read queues changed (route update)."""

    async def do_rebalance(self) -> None:
        """Rebalance now (the instance's timer and NOTIFY_CONSUMER_IDS_CHANGED)."""

    async def persist_consumer_offset(self) -> None:
        if self.running and self._offset_store is not None:
            await self._offset_store.persist_all(self._offset_queues())

    def consumer_running_info(self) -> ConsumerRunningInfo | None:
        """GET_CONSUMER_RUNNING_INFO (307): None here (the broker is told the group does not
        exist in this client); push consumers report theirs."""
        return None

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (220): ignored with a warning here (Java resets push
        consumers only; a pull consumer chooses its offsets itself)."""
        log.warning("%s %s ignores the broker's offset reset of %s", type(self).__name__, self.group, topic)

    def consume_message_directly(self, msg: MessageExt, broker_name: str | None) -> ConsumeMessageDirectlyResult | None:
        """CONSUME_MESSAGE_DIRECTLY (309): None here (no listener to run); push consumers run
        theirs."""
        return None
