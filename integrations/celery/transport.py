"""kombu transport for RocketMQ 4.x and 5.x (``rocketmq://namesrv:9876``), a kombu *virtual* transport.

Mapping (details in docs/celery.md):

- kombu queue ``q`` -> topic ``naming.queue_topic(q)`` (plus one topic per priority step when
  declared with ``x-max-priority``), consumed by the consumer group ``naming.group(q)``: every
  consumer of ``q`` in every process shares the group, so each message goes to one of them.
- direct and topic exchanges route at publish time through the binding tables kept on the name
  servers (:mod:`.registry`); a fanout exchange ``e`` has a topic of its own that the group of
  every bound queue reads from the offset it had when the queue was bound.
- ack = settle the message's offset; the group's committed offset is the lowest unsettled one
  (:mod:`.offsets`), persisted every ``commit_interval`` ms. reject(requeue=True) / requeue
  publish the message again to its queue, then settle the original; reject(requeue=False)
  settles (dropped, or first published to ``%DLQ%<group>`` with ``dead_letter_rejected``).
- ``x-expires``: queues unused that long are deleted by the draining connections
  (:meth:`Channel.expire_queues`).
"""

from __future__ import annotations

import itertools
import json
import logging
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from multiprocessing.util import Finalize
from queue import Empty
from typing import Any

from kombu.transport import virtual
from kombu.transport.base import to_rabbitmq_queue_arguments
from kombu.utils.objects import cached_property
from rocketmq_sdk.exceptions import (
    ClientStateError,
    IllegalArgumentError,
    MQBrokerError,
    MQClientError,
    MQError,
    RemotingError,
    RequestTimeoutError,
    TopicNotExistError,
)
from rocketmq_sdk.protocol.message import MessageQueue

from .client import DEFAULT_PORT, EXPIRES_PROPERTY, BrokerClient, RocketMQConnectionError, now_ms
from .consumer import QueueConsumer
from .envelope import dumps
from .eta import task_eta_ms
from .offloop import hub_thread_joined, on_hub_thread
from .options import OPTIONS
from .registry import QueueInfo

__all__ = ["Channel", "QoS", "Transport"]

log = logging.getLogger("rocketmq_sdk.integrations.celery")


def _worker_expires(payload: dict) -> bool:
    """Whether the message is a Celery task carrying its own ``expires`` (task protocol 2
    header): the worker must see it past its expiry to record the task REVOKED in the result
    backend, so its TTL does not drop it here."""
    headers = payload.get("headers")
    return isinstance(headers, dict) and bool(headers.get("expires")) and "task" in headers


def _restore_at_exit(qos_ref: weakref.ref[QoS]) -> None:
    qos = qos_ref()
    if qos is not None:
        qos.restore_unacked_once()


class QoS(virtual.QoS):
    """kombu's prefetch bookkeeping plus RocketMQ settlement: ack, reject and requeue settle
    the message's offset (see :class:`~.offsets.OffsetTracker`).

    kombu registers ``restore_unacked_once`` (a bound method) to run at interpreter exit, which
    keeps every channel that ever consumed, its connection and here the connection's SDK
    clients and threads alive until then, closed or not. The exit hook here holds the QoS
    weakly (and is dropped with it), so an unclosed connection is collected and its clients
    closed; its unacknowledged messages are not lost: their offsets were never committed, so
    the queue's consumer group reads them again."""

    def __init__(self, channel: Any, prefetch_count: int = 0) -> None:
        super().__init__(channel, prefetch_count)
        self._on_collect.cancel()
        self._on_collect = Finalize(None, _restore_at_exit, args=(weakref.ref(self),), exitpriority=1)
        weakref.finalize(self, self._on_collect.cancel).atexit = False

    def ack(self, delivery_tag: str) -> None:
        self.channel._settle(delivery_tag)
        super().ack(delivery_tag)
        # prefetch room: buffered messages may be delivered now, not at the next arrival (none
        # buffered: nothing waits for the room, and the next arrival wakes the loop anyway)
        self.channel.wake_if_buffered()

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        """Reject: with ``requeue`` (or ``dead_letter_rejected``) a copy is published first, then
        the message settled; on a worker's event loop both run on the connection's publishing
        thread (the hub goes on; if the publish fails the message stays unsettled and comes back
        from the committed offset). The prefetch slot is freed at once."""
        channel = self.channel
        if requeue or channel.dead_letter_rejected:
            if on_hub_thread():
                channel.client.publisher.submit(f"reject of delivery {delivery_tag}",
                                                channel._copy_then_settle, delivery_tag, requeue)
            else:
                channel._copy_then_settle(delivery_tag, requeue)
        else:
            channel._settle(delivery_tag)
        self._quick_ack(delivery_tag)
        channel.wake()


class Channel(virtual.Channel):
    """A kombu channel over RocketMQ (see the module docstring for the mapping)."""

    QoS = QoS
    supports_fanout = True
    do_restore = True
    #: kombu's priorities 0..9; step 0 is served first (as kombu's Redis transport)
    min_priority = 0
    max_priority = 9

    #: every option of options.OPTIONS (kombu sets the given ones on the channel)
    from_transport_options = virtual.Channel.from_transport_options + tuple(OPTIONS)
    catch_up_timeout = 1.0
    #: reject(requeue=False) publishes the message to ``%DLQ%<group>`` before settling it
    dead_letter_rejected = False

    def __init__(self, connection: Any, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        # delivery tag -> (consumer, message queue, offset, kombu queue, payload, message id)
        self._deliveries: dict[str, tuple[QueueConsumer, MessageQueue, int, str, dict, str]] = {}
        self._touched: dict[str, float] = {}
        self._deliveries_lock = threading.Lock()
        self._no_ack_queues: set[str] = set()
        self._fairness = 0
        # delivery tags: unique per channel (as AMQP's), without a random draw per message
        self._tag_prefix = f"{uuid.uuid4().hex}."
        self._tags = itertools.count(1)

    @property
    def client(self) -> BrokerClient:
        return self.connection.broker_client

    def close(self) -> None:
        """Close (kombu: cancel the consumers, restore unacknowledged messages) after what the
        event loop handed to the publishing thread went out (at most ``send_timeout``)."""
        bc = self.connection.broker_client if self.connection is not None else None
        if not self.closed and bc is not None and bc.publisher.pending:
            bc.publisher.flush(float(bc.options["send_timeout"]) / 1000)
        super().close()

    def wake(self) -> None:
        """Wake the connection's consumer loop (an acknowledgement freed prefetch room)."""
        bc = self.connection.broker_client
        if bc is not None:
            bc.notify_arrival()

    def wake_if_buffered(self) -> None:
        """:meth:`wake` when a consumed queue has buffered messages: only they can wait for the
        prefetch room an acknowledgement frees (a message buffered later wakes the loop itself)."""
        bc = self.connection.broker_client
        if bc is not None and any(qc is not None and qc.buffered
                                  for qc in map(bc.running_consumer, self._active_queues)):
            bc.notify_arrival()

    # ------------------------------------------------------------------ declarations

    def prepare_queue_arguments(self, arguments: dict, **kwargs: Any) -> dict:
        """Queue options as RabbitMQ arguments (``x-max-priority``, ``x-message-ttl`` in ms...)."""
        return to_rabbitmq_queue_arguments(arguments, **kwargs)

    def _new_queue(self, queue: str, **kwargs: Any) -> None:
        args = kwargs.get("arguments") or {}
        max_priority = args.get("x-max-priority")
        ttl = args.get("x-message-ttl")
        expires = args.get("x-expires")
        transient = kwargs.get("auto_delete") or kwargs.get("exclusive")
        info = QueueInfo(int(max_priority) if max_priority else None, int(ttl) if ttl else None,
                         1 if transient else self.client.queue_nums, int(expires) if expires else None)
        client = self.client
        for topic in client.queue_topics(queue, info):
            client.ensure_topic(topic, info.queue_nums)
        client.registry.declare_queue(queue, info)
        if info.expires:
            self._touch(queue, force=True)
        if kwargs.get("auto_delete"):
            self.connection.auto_delete_queues.add(queue)

    def _has_queue(self, queue: str, **kwargs: Any) -> bool:
        return self.client.registry.queue(queue) is not None

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        client = self.client
        if self.typeof(exchange).type == "fanout":
            topic = client.naming.fanout_topic(exchange)
            client.ensure_topic(topic, 1)
            if exchange not in client.registry.fanout_exchanges(queue, refresh=True):
                # a new binding receives what is published from now on, not the exchange's
                # history (a binding declared again keeps its offsets)
                client.move_group_to_end(client.naming.group(queue), topic)
                client.registry.bind_fanout(queue, exchange)
            qc = client.running_consumer(queue)
            if qc is not None:
                qc.add_topic(topic)
        client.registry.bind(exchange, routing_key, pattern, queue)

    def queue_unbind(self, queue: str, exchange: str | None = None, routing_key: str = "",
                     arguments: dict | None = None, **kwargs: Any) -> None:
        exchange = exchange or "amq.direct"
        meta = self.typeof(exchange).prepare_bind(queue, exchange, routing_key, arguments)
        super().queue_unbind(queue, exchange, routing_key, arguments, **kwargs)
        self.client.registry.unbind(exchange, *meta)
        if self.typeof(exchange).type == "fanout":
            self.client.registry.unbind_fanout(queue, exchange)

    def get_table(self, exchange: str) -> list[tuple[str, str, str]]:
        return self.client.registry.table(exchange)

    def _lookup(self, exchange: str, routing_key: str, default: str | None = None) -> list[str]:
        """The queues ``exchange`` routes ``routing_key`` to, from the shared binding table (read
        again at once when the cached one routes nowhere: a binding made by another process)."""
        if not exchange:
            return super()._lookup(exchange, routing_key, default)
        kind = self.typeof(exchange)
        registry = self.client.registry
        found = kind.lookup(registry.table(exchange), exchange, routing_key, None)
        if not found:
            found = kind.lookup(registry.table(exchange, refresh=True), exchange, routing_key, None)
        if not found:
            found = self._bind_again(exchange, routing_key)
        if not found and (default or self.deadletter_queue):
            return super()._lookup(exchange, routing_key, default)
        return sorted(found)

    def _bind_again(self, exchange: str, routing_key: str) -> list[str]:
        """The queues this process bound to ``exchange`` that take ``routing_key`` when the
        shared table has none of them (a restarted reference name server keeps no KV config):
        they are bound again on the name servers, so the message is routed instead of dropped."""
        kind = self.typeof(exchange)
        table = [kind.prepare_bind(queue, ex, rk, args)
                 for (queue, ex, rk), args in list(self.state.bindings.items()) if ex == exchange]
        found = kind.lookup(table, exchange, routing_key, None)
        if found:
            log.warning("bindings of exchange %s missing on the name servers (restarted?): binding %s again",
                        exchange, ", ".join(sorted(found)))
            for rk, pattern, queue in table:
                if queue in found:
                    self.client.registry.bind(exchange, rk, pattern, queue)
        return found

    def _delete(self, queue: str, *args: Any, **kwargs: Any) -> None:
        """Delete ``queue``: its bindings (every exchange), its messages (the group moves to the
        end of its topics), its consumer here and its declaration."""
        client = self.client
        exchanges = client.registry.fanout_exchanges(queue, refresh=True)
        self._purge(queue)
        for exchange in exchanges:
            client.registry.unbind_fanout(queue, exchange)
        bound = {ex for ex, _, _ in self.state.queue_bindings(queue)} | set(exchanges)
        client.registry.unbind_queue(queue, sorted(bound))
        client.close_consumer(queue)
        client.registry.delete_queue(queue)

    def queue_delete(self, queue: str, if_unused: bool = False, if_empty: bool = False, **kwargs: Any) -> None:
        if if_empty and self._size(queue):
            return
        self._delete(queue)
        self.state.queue_bindings_delete(queue)

    # ------------------------------------------------------------------ publishing

    def _next_delivery_tag(self) -> str:
        """The ``delivery_tag`` a published envelope carries: the channel's random prefix and a
        counter (unique across channels and processes, as kombu's ``uuid()`` default, without
        its ``os.urandom`` draw and UUID object per publish). A delivery (:meth:`_take`) replaces
        it with a new one from the same counter (consumers only require that one is there)."""
        return f"{self._tag_prefix}{next(self._tags)}"

    def basic_publish(self, message: dict, exchange: str, routing_key: str, **kwargs: Any) -> Any:
        """Publish (kombu's routing, then :meth:`_put` / :meth:`_put_fanout`). On the thread of
        a worker's event loop (kombu hub) a *transient* message (``delivery_mode`` 1: Celery's
        events, remote-control broadcasts and replies) is published by the connection's
        publishing thread instead, in the order given, so that the hub never waits for a name
        server or broker; a failure is logged (WARNING), as AMQP drops transient messages. A
        persistent message published there first waits for the transient ones before it (the
        channel's publishing order stays) and is sent on the calling thread, its errors raised."""
        publisher = self.client.publisher
        if on_hub_thread():
            props = message.get("properties") or {}
            if props.get("delivery_mode") in (1, "transient"):
                publisher.submit(f"publish of a transient message to {exchange or routing_key!r}",
                                 super().basic_publish, message, exchange, routing_key, **kwargs)
                return None
            if publisher.pending:
                publisher.flush(self.client.options["send_timeout"] / 1000)
        return super().basic_publish(message, exchange, routing_key, **kwargs)

    def _put(self, queue: str, message: dict, **kwargs: Any) -> None:
        client = self.client
        info = client.registry.queue(queue)
        props = message.get("properties") or {}
        step = client.priority_step(props.get("priority")) if info and info.max_priority else 0
        topic = client.naming.queue_topic(queue, step)
        client.send(topic, dumps(message), keys=props.get("correlation_id"),
                    expires_at=self._expires_at(props, info), queue_nums=info.queue_nums if info else None,
                    deliver_at=task_eta_ms(message))

    def _put_fanout(self, exchange: str, message: dict, routing_key: str, **kwargs: Any) -> None:
        props = message.get("properties") or {}
        self.client.send(self.client.naming.fanout_topic(exchange), dumps(message),
                         keys=props.get("correlation_id"), expires_at=self._expires_at(props, None), queue_nums=1)

    @staticmethod
    def _expires_at(props: dict, info: QueueInfo | None) -> int | None:
        ttls = []
        if props.get("expiration") not in (None, ""):
            try:
                ttls.append(int(float(props["expiration"])))
            except (TypeError, ValueError):
                pass
        if info is not None and info.message_ttl:
            ttls.append(info.message_ttl)
        return now_ms() + min(ttls) if ttls else None

    # ------------------------------------------------------------------ consuming

    def basic_consume(self, queue: str, no_ack: bool, callback: Any, consumer_tag: str, **kwargs: Any) -> Any:
        self._touch(queue)
        if no_ack:
            self._no_ack_queues.add(queue)
        else:
            self._no_ack_queues.discard(queue)
        qc = self.client.consumer(queue)
        qc.wait_caught_up(self.catch_up_timeout)
        return super().basic_consume(queue, no_ack, callback, consumer_tag, **kwargs)

    def basic_cancel(self, consumer_tag: str) -> None:
        """Cancel; an auto-delete queue without other consumers in this connection is deleted
        as AMQP does (its consumer leaves the group, its bindings and declaration go; messages
        published meanwhile stay behind its committed offset)."""
        queue = self._tag_to_queue.get(consumer_tag)
        super().basic_cancel(consumer_tag)
        transport = self.connection
        if queue and queue not in transport._callbacks and self._touch(queue, force=True):
            # an expiring queue without consumers here: leave its group so that the expiry
            # sees it unused
            self.client.close_consumer(queue)
        if queue and queue in transport.auto_delete_queues and queue not in transport._callbacks:
            transport.auto_delete_queues.discard(queue)
            client = self.client
            client.close_consumer(queue)
            try:
                bound = {ex for ex, _, _ in self.state.queue_bindings(queue)}
                for exchange in client.registry.fanout_exchanges(queue, refresh=True):
                    client.registry.unbind_fanout(queue, exchange)
                    bound.add(exchange)
                client.registry.unbind_queue(queue, sorted(bound))
                client.registry.delete_queue(queue)
            except MQError as exc:
                log.warning("auto-delete of %s incomplete: %s", queue, exc)
            self.state.queue_bindings_delete(queue)

    def basic_get(self, queue: str, no_ack: bool = False, **kwargs: Any) -> Any:
        self._touch(queue)
        qc = self.client.consumer(queue)
        if not qc.buffered:
            qc.wait_caught_up(self.catch_up_timeout)
        try:
            message = self.Message(self._take(queue, no_ack), channel=self)
        except Empty:
            return None
        if not no_ack:
            self.qos.append(message, message.delivery_tag)
        return message

    def _get(self, queue: str, timeout: float | None = None) -> dict:
        return self._take(queue, queue in self._no_ack_queues)

    def _take(self, queue: str, no_ack: bool) -> dict:
        qc = self.client.consumer(queue)
        while True:
            item = qc.take()
            if item is None:
                raise Empty()
            mq, m = item
            try:
                payload = json.loads(m.body)
                payload["properties"]["delivery_tag"]
            except (ValueError, TypeError, KeyError):
                self._reject_foreign(queue, qc, mq, m)
                continue
            expires = m.properties.get(EXPIRES_PROPERTY)
            if expires and int(expires) <= now_ms() and not _worker_expires(payload):
                qc.settle(mq, m.queue_offset)
                continue
            tag = self._next_delivery_tag()
            payload["properties"]["delivery_tag"] = tag
            if m.reconsume_times or payload.get("redelivered"):
                payload["redelivered"] = True
                payload["properties"].setdefault("delivery_info", {})["redelivered"] = True
            if no_ack:
                qc.settle(mq, m.queue_offset)
            else:
                with self._deliveries_lock:
                    self._deliveries[tag] = (qc, mq, m.queue_offset, queue, payload, m.msg_id)
            return payload

    def _reject_foreign(self, queue: str, qc: QueueConsumer, mq: MessageQueue, m: Any) -> None:
        """A message that is not a kombu message (another producer wrote it to the queue's
        topic): published as stored to ``%DLQ%<group>`` (as RocketMQ dead-letters), then
        settled, with one WARNING; if the publish fails it stays unsettled (redelivered). On a
        worker's event loop the publishing thread does both (the hub delivers on meanwhile)."""
        if on_hub_thread():
            self.client.publisher.submit(f"dead-lettering of message {m.msg_id}", self._dead_letter_foreign,
                                         queue, qc, mq, m)
        else:
            self._dead_letter_foreign(queue, qc, mq, m)

    def _dead_letter_foreign(self, queue: str, qc: QueueConsumer, mq: MessageQueue, m: Any) -> None:
        log.warning("message %s of queue %s (%s offset %d) is not a kombu message: moved to %s",
                    m.msg_id, queue, mq, m.queue_offset, self.client.naming.dlq_topic(queue))
        try:
            self.client.send(self.client.naming.dlq_topic(queue), m.body, keys=m.keys or None, queue_nums=1,
                             system_properties={"ORIGIN_MESSAGE_ID": m.msg_id or "", "RETRY_TOPIC": mq.topic})
        except MQError as exc:
            log.warning("dead-lettering message %s of queue %s failed: %s", m.msg_id, queue, exc)
            return
        qc.settle(mq, m.queue_offset)

    def deliver_ready(self, deliver: Any) -> int:
        """Deliver every buffered message of the consumed queues that prefetch allows; the
        number delivered."""
        count = 0
        queues = list(self._active_queues)
        if not queues or not self._consumers:
            return 0
        client = self.client
        self._fairness = (self._fairness + 1) % len(queues)
        queues = queues[self._fairness:] + queues[:self._fairness]
        progress = True
        while progress and not self.closed:
            progress = False
            for queue in queues:
                if not self.qos.can_consume() or self.closed or queue not in self._active_queues:
                    return count
                qc = client.running_consumer(queue)
                if qc is not None and not qc.buffered:
                    continue        # nothing to take (and no Empty raised per queue and pass)
                try:
                    payload = self._get(queue)
                except Empty:
                    continue
                deliver(payload, queue)
                count += 1
                progress = True
        return count

    # ------------------------------------------------------------------ settlement

    def _settle(self, delivery_tag: str) -> None:
        with self._deliveries_lock:
            entry = self._deliveries.pop(delivery_tag, None)
        if entry is not None:
            qc, mq, offset = entry[:3]
            qc.settle(mq, offset)

    def _copy_then_settle(self, delivery_tag: str, requeue: bool) -> None:
        """Publish the rejected message again to its queue (``requeue``) or to its dead-letter
        topic (``dead_letter_rejected``), then settle it."""
        if requeue:
            self._requeue(delivery_tag)
        elif self.dead_letter_rejected:
            self._dead_letter(delivery_tag)
        self._settle(delivery_tag)

    def _requeue(self, delivery_tag: str) -> None:
        with self._deliveries_lock:
            entry = self._deliveries.get(delivery_tag)
        if entry is None:
            return
        queue, payload = entry[3:5]
        payload = dict(payload, redelivered=True)
        self._put(queue, payload)

    def _dead_letter(self, delivery_tag: str) -> None:
        """Publish a rejected message to RocketMQ's dead-letter topic of its queue's group,
        ``%DLQ%<group>`` (created with one message queue, readable and writable), with the
        properties RocketMQ's broker sets when it dead-letters: ``ORIGIN_MESSAGE_ID`` and
        ``RETRY_TOPIC`` (the topic it came from). The body is the kombu message as stored."""
        with self._deliveries_lock:
            entry = self._deliveries.get(delivery_tag)
        if entry is None:
            return
        _, mq, _, queue, payload, msg_id = entry
        props = payload.get("properties") or {}
        self.client.send(self.client.naming.dlq_topic(queue), dumps(payload),
                         keys=props.get("correlation_id"), queue_nums=1,
                         system_properties={"ORIGIN_MESSAGE_ID": msg_id or "", "RETRY_TOPIC": mq.topic})

    def _restore(self, message: Any) -> None:
        """Put an unacknowledged message back into its queue (channel close, ``recover``),
        then settle it; if the publish fails it stays unsettled and is redelivered from the
        committed offset."""
        tag = message.delivery_tag
        self._requeue(tag)
        self._settle(tag)

    def _restore_at_beginning(self, message: Any) -> None:
        self._restore(message)

    # ------------------------------------------------------------------ queue expiry

    def _touch(self, queue: str, force: bool = False) -> bool:
        """Record a use of ``queue`` when it was declared with ``x-expires`` (at most every
        quarter of its expiry unless ``force``); whether it expires."""
        info = self.client.registry.queue(queue)
        if info is None or not info.expires:
            return False
        now = time.monotonic()
        if force or now - self._touched.get(queue, 0.0) >= info.expires / 4000:
            self._touched[queue] = now
            self.client.registry.touch(queue, now_ms())
        return True

    def expire_queues(self, forget: Callable[[str], Any] | None = None,
                      consumed: frozenset[str] | None = None) -> list[str]:
        """Delete every queue declared with ``x-expires`` (kombu ``Queue(expires=s)``) that was
        unused for that long, as RabbitMQ does: no consumer in this connection nor online in
        its group (any process), not declared, consumed or read with ``basic_get`` since.
        Deleting is :meth:`queue_delete` (messages, bindings, declaration; the topics stay).
        Called by :meth:`Transport.drain_events` every ``expiry_check_interval`` seconds, and
        off the worker's event loop on a thread of its own (:meth:`Transport.register_with_event_loop`).

        Args:
            forget: called with each deleted queue to drop its bindings from this channel's
                kombu state (default: at once; off the loop the transport hands it to the loop).
            consumed: the queues consumed in this connection (default: read now).

        Returns:
            the queues deleted.
        """
        client = self.client
        if consumed is None:
            consumed = frozenset(self.connection._callbacks)
        gone = []
        for queue, info in sorted(client.registry.queues(refresh=True).items()):
            if not info.expires or queue in consumed:
                continue
            used = client.registry.last_used(queue)
            now = now_ms()
            if used is None or now - used < info.expires:
                if used is None:
                    client.registry.touch(queue, now)
                continue
            if client.group_online(client.naming.group(queue)):
                # in use elsewhere: the clock restarts from now
                client.registry.touch(queue, now)
                continue
            if queue in self.connection._callbacks:
                continue    # consumed here since the check started (it runs off the event loop)
            log.info("queue %s unused for %d ms (x-expires %d ms): deleting it", queue, now - used, info.expires)
            self._delete(queue)
            (forget or self.state.queue_bindings_delete)(queue)
            gone.append(queue)
        return gone

    # ------------------------------------------------------------------ size / purge

    def _size(self, queue: str) -> int:
        client = self.client
        info = client.registry.queue(queue)
        group = client.naming.group(queue)
        total = 0
        qc = client.running_consumer(queue)
        for topic in list(client.queue_topics(queue, info)) + [client.naming.fanout_topic(e) for e in
                                                                client.registry.fanout_exchanges(queue)]:
            try:
                total += client.lag(group, topic, qc)
            except TopicNotExistError:
                continue
        if qc is not None:
            # delivered and not yet acknowledged messages are not waiting any more
            with self._deliveries_lock:
                total -= sum(1 for e in self._deliveries.values() if e[3] == queue)
        return max(total, 0)

    def _purge(self, queue: str) -> int:
        client = self.client
        size = self._size(queue)
        info = client.registry.queue(queue)
        group = client.naming.group(queue)
        qc = client.running_consumer(queue)
        if qc is not None:
            qc.purge_local()
            qc.commit_now()
        topics = list(client.queue_topics(queue, info)) + [client.naming.fanout_topic(e) for e in
                                                           client.registry.fanout_exchanges(queue)]
        for topic in topics:
            try:
                client.move_group_to_end(group, topic)
            except TopicNotExistError:
                continue
            client.tell_consumers_to_end(group, topic)
        return size


class Transport(virtual.Transport):
    """kombu transport ``rocketmq://[access_key:secret_key@]namesrv[:9876][;rocketmq://other:9876]``.

    Transport options (``broker_transport_options`` in Celery), all optional:

    - ``topic_prefix`` (""), ``group_prefix`` ("kombu_"), ``namespace``, ``queue_topics``
      ({queue: topic}): names, see :mod:`.naming`.
    - ``access_key`` / ``secret_key`` (ACL; also the URL's user and password), ``use_tls``
      (also ``ssl=True`` on the connection), ``ssl_context``.
    - ``cluster``: create topics on this cluster's masters (default: every cluster).
    - ``queue_nums`` (4): message queues of a durable kombu queue's topic (1 for auto-delete /
      exclusive queues and fanout exchanges).
    - ``commit_interval`` (1000 ms): how often committed offsets are persisted.
    - ``buffer_limit`` (64), ``pull_batch_size`` (32), ``pull_threshold_for_queue`` (256),
      ``pull_threshold_for_all`` (1024), ``long_poll_ms`` (15000): pulling.
    - ``priority_steps`` ((0, 3, 6, 9)), ``binding_cache_ttl`` (1.0 s),
      ``catch_up_timeout`` (1.0 s), ``polling_interval`` (max wait slice, 1.0 s).
    - ``dead_letter_rejected`` (False): ``reject(requeue=False)`` publishes the message to
      ``%DLQ%<group>`` first (default: dropped).
    - ``expiry_check_interval`` (5.0 s): how often ``drain_events`` deletes queues unused past
      their ``x-expires`` (0: never).
    - ``eta_timers`` (True): Celery ETA / countdown tasks go to RocketMQ 5.x brokers as timer
      messages and wait there until due (:mod:`.eta`); False, or a 4.x broker: the worker keeps
      them until due.

    Consume threads are Celery's pool (``worker_concurrency``), not a transport option.
    """

    Channel = Channel
    default_port = DEFAULT_PORT
    driver_type = "rocketmq"
    driver_name = "rocketmq"
    polling_interval = 1.0

    implements = virtual.Transport.implements.extend(
        asynchronous=True,
        exchange_type=frozenset(["direct", "topic", "fanout"]),
        heartbeats=False,
    )

    connection_errors = virtual.Transport.connection_errors + (
        RocketMQConnectionError, RemotingError, RequestTimeoutError, ClientStateError, ConnectionError, socket.error)
    channel_errors = virtual.Transport.channel_errors + (MQBrokerError, MQClientError, IllegalArgumentError)

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self.broker_client: BrokerClient | None = None
        self.auto_delete_queues: set[str] = set()
        self._next_expiry_check = 0.0
        #: the running off-loop queue-expiry check (see _expire_off_loop)
        self._expiry_thread: threading.Thread | None = None
        # the kombu hub this transport is registered with: (hub, watched fd, expiry timer), its thread
        self._hub: tuple[Any, int, Any] | None = None
        self._hub_thread: int | None = None

    def driver_version(self) -> str:
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version("rocketmq-python-sdk")
        except PackageNotFoundError:
            return "unknown"

    def _namesrv_addrs(self) -> list[str]:
        conninfo = self.client
        host = conninfo.hostname or "127.0.0.1"
        port = conninfo.port or DEFAULT_PORT
        first = host if ":" in host else f"{host}:{port}"
        addrs = [first]
        for alt in conninfo.alt or ():
            if not isinstance(alt, str):
                continue
            netloc = alt.split("://", 1)[-1].rsplit("@", 1)[-1].split("/", 1)[0]
            if netloc and ":" not in netloc:
                netloc = f"{netloc}:{DEFAULT_PORT}"
            if netloc and netloc not in addrs:
                addrs.append(netloc)
        return addrs

    def _options(self) -> dict[str, Any]:
        conninfo = self.client
        opts = dict(conninfo.transport_options or {})
        if conninfo.userid and "access_key" not in opts:
            opts["access_key"] = conninfo.userid
            opts["secret_key"] = conninfo.password or ""
        if conninfo.ssl and "use_tls" not in opts:
            opts["use_tls"] = True
        if conninfo.connect_timeout and "connect_timeout_ms" not in opts:
            opts["connect_timeout_ms"] = float(conninfo.connect_timeout) * 1000
        opts.setdefault("virtual_host", conninfo.virtual_host)
        return opts

    def establish_connection(self) -> Any:
        if self.broker_client is None:
            self.broker_client = BrokerClient(self._namesrv_addrs(), self._options())
        return super().establish_connection()

    def register_with_event_loop(self, connection: Any, loop: Any) -> None:
        """Join a kombu hub (Celery's worker event loop, ``implements.asynchronous``): the hub
        watches the connection's wake-up descriptor (:class:`~.waker.Waker`, made readable by
        the SDK's pull threads when messages are buffered and by acknowledgements that free
        prefetch room) and delivers on readability, as kombu's Redis transport watches its
        sockets; no polling while idle. Nothing the hub runs waits for the network but the
        publishes of the worker itself: the queue-expiry check (name-server and broker admin
        calls) is started by a hub timer on a thread of its own (:meth:`_expire_off_loop`)."""
        bc = self.broker_client
        if bc is None:
            raise RocketMQConnectionError("connection is closed")
        self._unregister_from_event_loop()
        fd = bc.waker.fileno()
        loop.add_reader(fd, self.on_readable, connection)
        interval = self._expiry_check_interval()
        timer = loop.call_repeatedly(interval, self._expire_off_loop, loop) if interval > 0 else None
        self._hub = (loop, fd, timer)
        # the hub's thread (usually this one; a hub run by another thread is seen on its first call)
        self._hub_thread = hub_thread_joined(None, threading.get_ident())
        # messages buffered before the registration
        bc.waker.set()

    def on_readable(self, connection: Any) -> None:
        """The hub's callback: deliver every buffered message that prefetch allows."""
        bc = self.broker_client
        if bc is None:
            return
        if self._hub_thread != threading.get_ident() and self._hub is not None:
            self._hub_thread = hub_thread_joined(self._hub_thread, threading.get_ident())
        bc.waker.clear()
        self._deliver_ready()

    def _unregister_from_event_loop(self) -> None:
        if self._hub is None:
            return
        loop, fd, timer = self._hub
        self._hub = None
        self._hub_thread = hub_thread_joined(self._hub_thread, None)
        loop.remove_reader(fd)
        if timer is not None:
            timer.cancel()

    def close_connection(self, connection: Any) -> None:
        self._unregister_from_event_loop()
        try:
            super().close_connection(connection)
        finally:
            bc, self.broker_client = self.broker_client, None
            if bc is not None:
                bc.close()

    def drain_events(self, connection: Any, timeout: float | None = None) -> None:
        """Deliver every message ready on the consumed queues (within prefetch); wait for one
        up to ``timeout`` seconds.

        Raises:
            socket.timeout: nothing arrived in time.
        """
        bc = self.broker_client
        if bc is None:
            raise RocketMQConnectionError("connection is closed")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._maybe_expire_queues()
            # clear first, then look: a wake-up after the clear is never lost
            bc.waker.clear()
            if self._deliver_ready():
                return
            if self.broker_client is None:
                raise RocketMQConnectionError("connection is closed")
            wait = self.polling_interval or 1.0
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError()
                wait = min(wait, remaining)
            bc.waker.wait(wait)

    def _deliver_ready(self) -> int:
        """Deliver every buffered message that prefetch allows, on every open channel."""
        delivered = 0
        for channel in list(self.channels):
            if not channel.closed:
                delivered += channel.deliver_ready(self._deliver)
        return delivered

    def _expiry_check_interval(self) -> float:
        bc = self.broker_client
        return float(bc.options["expiry_check_interval"] if bc is not None else OPTIONS["expiry_check_interval"])

    def _expire_off_loop(self, loop: Any) -> None:
        """The hub's expiry timer: run :meth:`Channel.expire_queues` on a daemon thread (its
        admin calls may wait for a slow name server or broker; the hub goes on delivering),
        one check at a time (a tick while the last check runs is skipped). The kombu state of
        a deleted queue (its bindings) is dropped on the hub, through ``loop.call_soon``."""
        if self._expiry_thread is not None and self._expiry_thread.is_alive():
            return
        channel = next((c for c in self.channels if not c.closed), None)
        if channel is None or self.broker_client is None:
            return
        consumed = frozenset(self._callbacks)

        def forget(queue: str) -> None:
            loop.call_soon(channel.state.queue_bindings_delete, queue)

        def check() -> None:
            try:
                channel.expire_queues(forget, consumed)
            except MQError as exc:
                log.warning("queue expiry check failed: %s", exc)
            except Exception:  # noqa: BLE001 - a closing connection; the next tick tries again
                log.debug("queue expiry check stopped", exc_info=True)

        self._expiry_thread = threading.Thread(target=check, name="kombu-rocketmq-expiry", daemon=True)
        self._expiry_thread.start()

    def _maybe_expire_queues(self) -> None:
        interval = self._expiry_check_interval()
        now = time.monotonic()
        if interval <= 0 or now < self._next_expiry_check:
            return
        self._next_expiry_check = now + interval
        channel = next((c for c in self.channels if not c.closed), None)
        if channel is None:
            return
        try:
            channel.expire_queues()
        except MQError as exc:
            log.warning("queue expiry check failed: %s", exc)

    @cached_property
    def default_connection_params(self) -> dict[str, Any]:
        return {"port": DEFAULT_PORT, "hostname": "127.0.0.1"}

    def verify_connection(self, connection: Any) -> bool:
        return self.broker_client is not None

