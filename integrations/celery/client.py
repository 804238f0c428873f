"""The RocketMQ side of a kombu connection (:class:`BrokerClient`): producer, admin clients,
the shared registry and the queue consumers, plus topic creation and group offsets."""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
import uuid
import weakref
from typing import Any

from rocketmq_sdk import Message, Producer
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.client.process_local import ProcessLocalCache
from rocketmq_sdk.exceptions import (
    MessageIllegalError,
    MQBrokerError,
    MQClientError,
    MQError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
)
from rocketmq_sdk.protocol.message import MessageQueue

from .consumer import QueueConsumer
from .eta import MAX_TIMER_AHEAD_MS
from .naming import Naming
from .offloop import SerialRunner
from .options import resolve
from .registry import QueueInfo, Registry
from .waker import Waker

__all__ = ["BrokerClient", "RocketMQConnectionError"]

log = logging.getLogger("rocketmq_sdk.integrations.celery")

DEFAULT_PORT = 9876
#: message property holding the absolute expiry time (epoch ms) of a message with a TTL
EXPIRES_PROPERTY = "KOMBU_EXPIRES_AT"
#: priority steps, as kombu's Redis transport (lower number = higher priority)
DEFAULT_PRIORITY_STEPS = (0, 3, 6, 9)


#: the queue consumers of this process, by (name servers, group), each with the connections using
#: it: a consumer made before a fork (a prefork pool process) is never used nor closed in the child
_SHARED: ProcessLocalCache[tuple[str, str], QueueConsumer] = ProcessLocalCache(
    close=QueueConsumer.close, usable=lambda qc: not qc.closed, name="kombu queue consumer")


#: owner tokens of BrokerClients in _SHARED (an id() may be reused before a collected client is closed)
_OWNERS = itertools.count(1)


class RocketMQConnectionError(ConnectionError):
    """The name server of the connection URL cannot be reached."""


def now_ms() -> int:
    return int(time.time() * 1000)


class _Resources:
    """What one :class:`BrokerClient` starts and must stop: its publishing thread, wake-up
    descriptor, queue consumers (shared, released), producer and admin clients. Held by the
    client's finalizer, so it never refers to the client: an unclosed, collected client
    still has them closed (:func:`_close_abandoned`)."""

    def __init__(self, namesrv_addr: str, publisher: SerialRunner, waker: Waker, send_timeout_s: float) -> None:
        self.pid = os.getpid()
        self.owner = next(_OWNERS)
        self.namesrv_addr = namesrv_addr
        self.publisher = publisher
        self.waker = waker
        self.send_timeout_s = send_timeout_s
        self.lock = threading.RLock()
        self.consumers: dict[str, QueueConsumer] = {}
        self.producer: Producer | None = None
        self.admins: list[AdminClient] = []

    def release_consumer(self, queue: str) -> None:
        """Stop using the queue's consumer; it leaves the group when no connection of the
        process uses it any more."""
        with self.lock:
            qc = self.consumers.pop(queue, None)
        if qc is None:
            return
        qc.remove_listener(self.waker.set)
        _SHARED.release((self.namesrv_addr, qc.group), self.owner, qc)

    def close(self) -> None:
        # what the event loop handed off goes out first (bounded by one send timeout)
        self.publisher.close(self.send_timeout_s)
        for queue in list(self.consumers):
            try:
                self.release_consumer(queue)
            except Exception:  # noqa: BLE001 - close everything else too
                log.warning("closing consumer of %s failed", queue, exc_info=True)
        try:
            if self.producer is not None:
                self.producer.shutdown()
        finally:
            for admin in self.admins:
                admin.close()
            self.waker.set()
            self.waker.close()


def _close_abandoned(resources: _Resources) -> None:
    """A :class:`BrokerClient` was collected unclosed (its kombu connection was dropped without
    ``close``/``release``): close what it started on a thread of its own (the collection may
    run on a worker's event loop; the shutdowns wait for brokers). Not in a forked child: the
    clients, threads and sockets are the parent's."""
    if resources.pid != os.getpid():
        return

    def close() -> None:
        try:
            resources.close()
        except Exception:  # noqa: BLE001 - logged; nothing else to close
            log.warning("closing an abandoned kombu connection's clients failed", exc_info=True)

    log.debug("closing the clients of a kombu connection collected unclosed")
    try:
        threading.Thread(target=close, name="kombu-rocketmq-close", daemon=True).start()
    except RuntimeError:    # collected at interpreter shutdown: the daemon threads end with it
        pass


class BrokerClient:
    """The RocketMQ side of one kombu connection: a producer, an admin client, the registry
    and one :class:`QueueConsumer` per consumed queue, all on one client instance.

    Raises:
        RocketMQConnectionError: the first name server does not answer.
    """

    def __init__(self, namesrv_addrs: list[str], options: dict[str, Any]) -> None:
        self.options = options = resolve(options)
        self.namesrv_addrs = namesrv_addrs
        self.namesrv_addr = ";".join(namesrv_addrs)
        self.naming = Naming(options["topic_prefix"], options["group_prefix"],
                             options["namespace"], dict(options["queue_topics"] or {}))
        self.instance_name = f"kombu-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.commit_interval = int(options["commit_interval"])
        self.queue_nums = int(options["queue_nums"])
        self.cluster: str | None = options["cluster"]
        self.sdk_kwargs: dict[str, Any] = {}
        for key in ("access_key", "secret_key", "use_tls", "ssl_context"):
            if options.get(key) is not None:
                self.sdk_kwargs[key] = options[key]
        #: readable when a consumed queue buffered messages or an acknowledgement freed prefetch room
        self.waker = Waker()
        #: publishes handed off a worker's event loop (Channel.basic_publish), in order
        self.publisher = SerialRunner("kombu-rocketmq-publish")
        self._res = _Resources(self.namesrv_addr, self.publisher, self.waker,
                               float(options["send_timeout"]) / 1000)
        self._lock = self._res.lock
        self._consumers = self._res.consumers
        self._topics: set[str] = set()
        #: topics whose broker refused a timer message (MESSAGE_ILLEGAL: a smaller timerMaxDelaySec)
        self._timer_refused: set[str] = set()
        admin_kwargs = {k: v for k, v in self.sdk_kwargs.items() if k != "use_tls" or v}
        timeout_ms = float(options["connect_timeout_ms"])
        # one admin client per name server for the KV config; the first name server decides
        # whether the connection works (kombu then fails over to the next URL)
        self._kv_admins = [AdminClient(addr, timeout_ms=timeout_ms, **admin_kwargs) for addr in namesrv_addrs]
        try:
            self._kv_admins[0].cluster_list(runtime=False)
        except MQError as exc:
            for admin in self._kv_admins:
                admin.close()
            raise RocketMQConnectionError(f"name server {namesrv_addrs[0]} is not reachable: {exc}") from exc
        self.admin = (self._kv_admins[0] if len(namesrv_addrs) == 1
                      else AdminClient(self.namesrv_addr, timeout_ms=timeout_ms, **admin_kwargs))
        self.registry = Registry(self._kv_admins, self._kv_prefix(options),
                                 float(options["binding_cache_ttl"]))
        self.producer = Producer(options["producer_group"], self.namesrv_addr,
                                 instance_name=self.instance_name,
                                 persist_consumer_offset_interval=self.commit_interval,
                                 send_msg_timeout=int(options["send_timeout"]), **self.sdk_kwargs)
        try:
            self.producer.start()
        except MQError as exc:
            self._close_admins()
            raise RocketMQConnectionError(f"producer could not start: {exc}") from exc
        self._res.producer = self.producer
        self._res.admins = self._unique_admins()
        # an unclosed connection's clients are closed when it is collected (as kombu's Redis
        # transport's sockets are); not at interpreter exit (daemon threads end with it)
        self._finalizer = weakref.finalize(self, _close_abandoned, self._res)
        self._finalizer.atexit = False

    def _kv_prefix(self, options: dict[str, Any]) -> str:
        prefix = "kombu"
        if self.naming.topic_prefix:
            prefix += f".{self.naming.topic_prefix}"
        if self.naming.namespace:
            prefix += f".{self.naming.namespace}"
        vhost = options.get("virtual_host")
        if vhost and vhost != "/":
            prefix += f".{vhost.strip('/')}"
        return prefix

    # ------------------------------------------------------------------ topics

    def ensure_topic(self, topic: str, queue_nums: int) -> None:
        """Create ``topic`` on every master of the cluster (``cluster`` option, or all clusters)
        unless its route exists; waits until the name server routes it."""
        if topic in self._topics:
            return
        try:
            self.admin.topic_route(topic)
        except TopicNotExistError:
            for cluster in self._clusters():
                self.admin.create_topic(topic, cluster=cluster, read_queue_nums=queue_nums,
                                        write_queue_nums=queue_nums)
            deadline = time.monotonic() + 10.0
            while True:
                try:
                    self.admin.topic_route(topic)
                    break
                except TopicNotExistError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        self._topics.add(topic)

    def queue_topics(self, queue: str, info: QueueInfo | None) -> dict[str, int]:
        """``{topic: priority step}`` of ``queue``'s own topics."""
        if info is not None and info.max_priority:
            return {self.naming.queue_topic(queue, step): step for step in self.priority_steps}
        return {self.naming.queue_topic(queue): 0}

    @property
    def priority_steps(self) -> tuple[int, ...]:
        return tuple(self.options["priority_steps"] or DEFAULT_PRIORITY_STEPS)

    def priority_step(self, priority: Any) -> int:
        """The step of a kombu priority (the largest step not above it, as kombu's Redis)."""
        try:
            p = int(priority)
        except (TypeError, ValueError):
            p = 0
        steps = self.priority_steps
        return max([s for s in steps if s <= p] or [steps[0]])

    # ------------------------------------------------------------------ consumers

    def notify_arrival(self) -> None:
        """Wake the connection's consumer loop (messages buffered, prefetch room freed)."""
        self.waker.set()

    def consumer(self, queue: str) -> QueueConsumer:
        """The queue's consumer, started on first use. One consumer per queue and process:
        connections of one process share it (a second group member in the same process would
        take message queues away from the first, e.g. Celery's rpc backend reading a reply
        queue from a pooled connection while its result consumer drains another)."""
        with self._lock:
            qc = self._consumers.get(queue)
            if qc is not None and not qc.closed:
                return qc
            qc = _SHARED.acquire((self.namesrv_addr, self.naming.group(queue)), self._res.owner,
                                 lambda: self._start_consumer(queue))
            # the waker's method, not the client's: a shared consumer must not keep it alive
            qc.add_listener(self.waker.set)
            self._consumers[queue] = qc
            return qc

    def _start_consumer(self, queue: str) -> QueueConsumer:
        info = self.registry.queue(queue)
        topics = self.queue_topics(queue, info)
        nums = info.queue_nums if info else self.queue_nums
        for topic in topics:
            self.ensure_topic(topic, nums)
        for exchange in self.registry.fanout_exchanges(queue):
            topic = self.naming.fanout_topic(exchange)
            self.ensure_topic(topic, 1)
            topics[topic] = 0
        opts = self.options
        return QueueConsumer(queue, self.naming.group(queue), topics, self.waker.set,
                             buffer_limit=int(opts["buffer_limit"]),
                             namesrv_addr=self.namesrv_addr, instance_name=self.instance_name,
                             consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                             pull_batch_size=int(opts["pull_batch_size"]),
                             pull_threshold_for_queue=int(opts["pull_threshold_for_queue"]),
                             pull_threshold_for_all=int(opts["pull_threshold_for_all"]),
                             suspend_timeout=int(opts["long_poll_ms"]),
                             **self.sdk_kwargs)

    def running_consumer(self, queue: str) -> QueueConsumer | None:
        qc = self._consumers.get(queue)
        return qc if qc is not None and not qc.closed else None

    def close_consumer(self, queue: str) -> None:
        """Stop using the queue's consumer; it leaves the group when no connection of the
        process uses it any more."""
        self._res.release_consumer(queue)

    # ------------------------------------------------------------------ sending

    def send(self, topic: str, body: bytes, *, keys: str | None = None, expires_at: int | None = None,
             queue_nums: int | None = None, system_properties: dict[str, str] | None = None,
             deliver_at: int | None = None) -> None:
        """Send to ``topic`` (created if needed). ``system_properties``: RocketMQ's own properties
        (``ORIGIN_MESSAGE_ID``...), values made here, set past the user-property checks.
        ``deliver_at`` (epoch ms, an ETA task's due time): sent as a timer message when
        :meth:`use_timer` says so, else at once (see :mod:`.eta`)."""
        self.ensure_topic(topic, queue_nums or self.queue_nums)
        props = {EXPIRES_PROPERTY: str(expires_at)} if expires_at else None
        msg = Message(topic, body, keys=keys or None, properties=props)
        if system_properties:
            msg.properties.update(system_properties)
        if deliver_at is not None and self.use_timer(topic, deliver_at):
            msg.deliver_time_ms = deliver_at
            try:
                self.producer.send(msg)
                return
            except MessageIllegalError as exc:
                # a broker whose timerMaxDelaySec is below 3 days: the worker keeps the task instead
                if topic not in self._timer_refused:
                    self._timer_refused.add(topic)
                    log.warning("broker refused an ETA task of %s as a timer message (%s): sending such "
                                "tasks at once, the worker keeps them until due", topic, exc)
                msg.deliver_time_ms = None
        self.producer.send(msg)

    def use_timer(self, topic: str, deliver_at: int) -> bool:
        """Whether a message due at ``deliver_at`` (epoch ms) goes to ``topic`` as a timer message:
        the ``eta_timers`` option is on, the time is ahead by at most 3 days, no broker of the
        topic refused such a timer before, and every broker of the topic is a 5.x broker
        (``Producer.supports_timer_messages``)."""
        ahead = deliver_at - now_ms()
        if not self.options["eta_timers"] or ahead <= 0 or ahead > MAX_TIMER_AHEAD_MS \
                or topic in self._timer_refused:
            return False
        try:
            return self.producer.supports_timer_messages(topic)
        except MQError as exc:
            log.debug("broker version of %s unknown (%s): no timer message", topic, exc)
            return False

    def group_online(self, group: str) -> bool:
        """Whether any client of ``group`` is connected to a broker (GET_CONSUMER_CONNECTION_LIST;
        unknown group or code 206 CONSUMER_NOT_ONLINE: False)."""
        try:
            return bool(self.admin.consumer_connection(group).connections)
        except (MQBrokerError, MQClientError):
            return False

    # ------------------------------------------------------------------ offsets of whole groups

    def move_group_to_end(self, group: str, topic: str) -> None:
        """Set ``group``'s offsets on every queue of ``topic`` to the queue's max offset. A 5.x
        broker refuses offsets of a group it does not know (SUBSCRIPTION_GROUP_NOT_EXIST, 26; a
        queue bound before its first consumer started): the group is created on the masters
        (``cluster`` option, else every cluster) as its first consumer's heartbeat would, then set."""
        created = False
        for q in self.admin.topic_status(topic):
            mq = MessageQueue(topic, q.broker_name, q.queue_id)
            try:
                self.admin.update_consume_offset(group, mq, q.max_offset)
            except SubscriptionGroupNotExistError:
                if created:
                    raise
                self.create_group(group)
                created = True
                self.admin.update_consume_offset(group, mq, q.max_offset)

    def tell_consumers_to_end(self, group: str, topic: str) -> None:
        """Have the brokers tell the group's running consumers (other processes: a worker) to
        drop what they pulled of ``topic`` and read on from its end: an offset reset to the max
        offset (INVOKE_BROKER_TO_RESET_OFFSET, pushed to the clients as 220; mqadmin
        ``resetOffsetByTime -s -1``). Without a running consumer nothing is to be told; a
        failure is logged, the committed offsets having moved already."""
        try:
            self.admin.reset_offset_by_time(group, topic, -1, force=True)
        except MQError as exc:
            log.debug("offset reset of %s on %s not pushed to its consumers: %s", group, topic, exc)

    def create_group(self, group: str) -> None:
        """Create the subscription group ``group`` on the masters of the ``cluster`` option's
        cluster, else of every cluster (mqadmin ``updateSubGroup`` defaults)."""
        for cluster in self._clusters():
            self.admin.update_subscription_group(group, cluster=cluster)

    def _clusters(self) -> list[str]:
        """The ``cluster`` option, else every cluster of the name server."""
        if self.cluster:
            return [self.cluster]
        return sorted({b.cluster for b in self.admin.cluster_list(runtime=False)})

    def lag(self, group: str, topic: str, local: QueueConsumer | None = None) -> int:
        """Messages of ``topic`` after ``group``'s committed offsets (for message queues owned
        by ``local``, its committable offsets, which may not be persisted yet)."""
        total = 0
        for q in self.admin.topic_status(topic):
            mq = MessageQueue(topic, q.broker_name, q.queue_id)
            committed = self.admin.consume_offset(group, mq)
            if local is not None:
                committed = max(committed, local.tracker.committable(mq))
            total += max(0, q.max_offset - max(committed, q.min_offset))
        return total

    # ------------------------------------------------------------------ close

    def _unique_admins(self) -> list[AdminClient]:
        return list({id(a): a for a in (self.admin, *self._kv_admins)}.values())

    def _close_admins(self) -> None:
        for admin in self._unique_admins():
            admin.close()

    def close(self) -> None:
        """Publish what the event loop handed off (at most ``send_timeout``), release the queue
        consumers, shut the producer and admin clients down (their threads end)."""
        self._finalizer.detach()
        self._res.close()
