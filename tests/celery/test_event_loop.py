"""The transport in kombu's hub (Celery's worker event loop): nothing it runs on the hub waits for
a slow name server, so the worker keeps taking tasks while an admin call hangs."""

from __future__ import annotations

import threading
import time

import kombu
import pytest
from celery_workers import isolated_options
from holding_proxy import HoldingProxy
from kombu.asynchronous import Hub
from rocketmq_sdk.integrations.celery.offloop import SerialRunner
from rocketmq_sdk.protocol.codes import RequestCode


@pytest.fixture()
def namesrv_proxy(rocketmq_cluster):
    proxy = HoldingProxy(rocketmq_cluster.namesrv_addr)
    yield proxy
    proxy.close()


class HubThread:
    """Runs a kombu hub on a thread of its own until :meth:`stop`."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self._stop = threading.Event()
        self._loop = hub.create_loop()
        self.thread = threading.Thread(target=self._run, name="test-hub", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            next(self._loop)

    def stop(self, timeout: float) -> None:
        self._stop.set()
        self.thread.join(timeout)


def test_the_hub_keeps_delivering_while_the_expiry_check_waits_for_the_name_server(rocketmq_cluster, namesrv_proxy):
    """The queue-expiry timer lists the declared queues from the name servers (KV config): with
    that call held by the name server, messages published meanwhile are still delivered and
    acknowledged on the hub (before: the timer ran the call on the hub, which stopped until
    the name server answered)."""
    opts = isolated_options(queue_nums=1, expiry_check_interval=0.2, connect_timeout_ms=60000)
    consumer_conn = kombu.Connection(f"rocketmq://{namesrv_proxy.addr}", transport_options=opts)
    publisher = kombu.Connection(f"rocketmq://{rocketmq_cluster.namesrv_addr}", transport_options=opts)
    queue = kombu.Queue("hub_work")
    got: list[str] = []
    arrived = threading.Condition()

    def on_message(body, message):
        message.ack()
        with arrived:
            got.append(body)
            arrived.notify_all()

    hub = Hub()
    with consumer_conn, publisher:
        queue(publisher.default_channel).declare()
        consumer = kombu.Consumer(consumer_conn, [queue], callbacks=[on_message])
        consumer.consume()
        consumer_conn.register_with_event_loop(hub)
        runner = HubThread(hub)
        try:
            producer = publisher.Producer()
            producer.publish("before", routing_key="hub_work")
            with arrived:
                assert arrived.wait_for(lambda: "before" in got, timeout=20), "the hub delivered nothing"
            namesrv_proxy.hold(RequestCode.GET_KVLIST_BY_NAMESPACE)
            assert namesrv_proxy.held.wait(20), "no expiry check asked the name server"
            sent = [f"during-{i}" for i in range(5)]
            for body in sent:
                producer.publish(body, routing_key="hub_work")
            deadline = time.monotonic() + 15
            with arrived:
                assert arrived.wait_for(lambda: set(sent) <= set(got), timeout=deadline - time.monotonic()), (
                    f"the hub stopped while the name server held a KV list: got {got}")
        finally:
            namesrv_proxy.release()
            runner.stop(30)
            hub.close()
        assert not runner.thread.is_alive()
        assert got.count("before") == 1 and all(got.count(b) == 1 for b in sent)


def test_the_hub_deletes_an_expired_queue_off_the_loop(rocketmq_cluster):
    """The off-loop expiry check deletes an unused ``x-expires`` queue (declaration and the kombu
    state of its bindings, the latter dropped on the hub) and leaves the consumed one."""
    opts = isolated_options(queue_nums=1, expiry_check_interval=0.2)
    conn = kombu.Connection(f"rocketmq://{rocketmq_cluster.namesrv_addr}", transport_options=opts)
    exchange = kombu.Exchange("hub_ex", type="direct")
    unused = kombu.Queue("hub_unused", exchange, routing_key="u", expires=1.0)
    consumed = kombu.Queue("hub_consumed", exchange, routing_key="c", expires=1.0)
    hub = Hub()
    with conn:
        channel = conn.default_channel
        unused(channel).declare()
        consumer = kombu.Consumer(conn, [consumed], callbacks=[lambda body, msg: msg.ack()])
        consumer.consume()
        assert channel.state.queue_bindings("hub_unused")
        conn.register_with_event_loop(hub)
        runner = HubThread(hub)
        try:
            deadline = time.monotonic() + 20
            while channel._has_queue("hub_unused") or list(channel.state.queue_bindings("hub_unused")):
                assert time.monotonic() < deadline, "the unused queue was not deleted"
                time.sleep(0.05)  # polling a condition another thread makes true, with a deadline
            assert channel._has_queue("hub_consumed")
        finally:
            runner.stop(30)
            hub.close()
        assert not runner.thread.is_alive()


def test_transient_publishes_on_the_hub_do_not_wait_for_the_name_server_and_keep_their_order(
        rocketmq_cluster, namesrv_proxy):
    """A worker publishes transient messages on its hub (Celery's events, remote-control
    replies): with the name server holding the binding-table read of the first one, the hub
    goes on delivering (before: the publish waited on the hub, which delivered nothing
    meanwhile); the connection closing while they wait sends them first, and every reply
    arrives, in publishing order (before the close flushed: lost, the channel closed under them)."""
    opts = isolated_options(queue_nums=1, expiry_check_interval=0, connect_timeout_ms=60000)
    consumer_conn = kombu.Connection(f"rocketmq://{namesrv_proxy.addr}", transport_options=opts)
    publisher = kombu.Connection(f"rocketmq://{rocketmq_cluster.namesrv_addr}", transport_options=opts)
    work = kombu.Queue("hub_tasks")
    replies_ex = kombu.Exchange("hub_replies", type="direct", delivery_mode="transient")
    replies = kombu.Queue("hub_reply_q", replies_ex, routing_key="r")
    handled: list[str] = []
    arrived = threading.Condition()
    hub = Hub()
    with consumer_conn, publisher:
        work(publisher.default_channel).declare()
        replies(publisher.default_channel).declare()
        replies_ex(consumer_conn.default_channel).declare()
        reply_producer = kombu.Producer(consumer_conn.default_channel)

        def on_message(body, message):
            reply_producer.publish(f"reply-{body}", exchange=replies_ex, routing_key="r", delivery_mode=1)
            message.ack()
            with arrived:
                handled.append(body)
                arrived.notify_all()

        consumer = kombu.Consumer(consumer_conn, [work], callbacks=[on_message])
        consumer.consume()
        consumer_conn.register_with_event_loop(hub)
        runner = HubThread(hub)
        try:
            namesrv_proxy.hold(RequestCode.GET_KVLIST_BY_NAMESPACE)
            sent = [f"t{i}" for i in range(5)]
            producer = publisher.Producer()
            for body in sent:
                producer.publish(body, routing_key="hub_tasks")
            with arrived:
                assert arrived.wait_for(lambda: len(handled) == len(sent), timeout=15), (
                    f"the hub stopped while a reply waited for the name server: handled {handled}")
            assert namesrv_proxy.held.wait(15), "no reply asked the name server"
            runner.stop(30)
            # the name server answers while the connection closes: closing sends what is queued
            answer = threading.Timer(0.3, namesrv_proxy.release)
            answer.start()
            consumer_conn.release()
            answer.join(10)
        finally:
            namesrv_proxy.release()
            runner.stop(30)
            hub.close()
        got: list[str] = []
        with kombu.Consumer(publisher, [replies], callbacks=[lambda body, msg: (got.append(body), msg.ack())]):
            deadline = time.monotonic() + 20
            while len(got) < len(sent) and time.monotonic() < deadline:
                try:
                    publisher.drain_events(timeout=1)
                except TimeoutError:
                    pass
        assert got == [f"reply-{b}" for b in sent]


def test_serial_runner_keeps_the_order_logs_a_failure_and_goes_on(caplog):
    runner = SerialRunner("test-runner")
    done: list[int] = []
    gate = threading.Event()

    def fail() -> None:
        raise RuntimeError("broker gone")

    runner.submit("first", lambda: (gate.wait(10), done.append(1)))
    runner.submit("second", fail)
    runner.submit("third", done.append, 3)
    assert not runner.flush(0.05) and runner.pending == 3   # the first still waits for the gate
    gate.set()
    assert runner.flush(10) and runner.pending == 0
    assert done == [1, 3]
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == ["second failed: broker gone"]
    runner.close(1)
    with pytest.raises(RuntimeError):
        runner.submit("late", done.append, 4)


def test_a_requeue_on_the_hub_does_not_wait_for_the_name_server(rocketmq_cluster, namesrv_proxy):
    """``reject(requeue=True)`` on the hub publishes the copy off the loop: with the name server
    holding the queue-table read of that publish, the next messages are still delivered; once it
    answers, the rejected message comes back exactly once (before: the hub waited)."""
    opts = isolated_options(queue_nums=1, expiry_check_interval=0, connect_timeout_ms=60000,
                            binding_cache_ttl=0.001)
    consumer_conn = kombu.Connection(f"rocketmq://{namesrv_proxy.addr}", transport_options=opts)
    publisher = kombu.Connection(f"rocketmq://{rocketmq_cluster.namesrv_addr}", transport_options=opts)
    work = kombu.Queue("hub_requeue")
    seen: list[tuple[str, bool]] = []
    arrived = threading.Condition()
    hub = Hub()
    with consumer_conn, publisher:
        work(publisher.default_channel).declare()

        def on_message(body, message):
            if body == "again" and not message.delivery_info.get("redelivered"):
                message.requeue()
            else:
                message.ack()
            with arrived:
                seen.append((body, bool(message.delivery_info.get("redelivered"))))
                arrived.notify_all()

        consumer = kombu.Consumer(consumer_conn, [work], callbacks=[on_message])
        consumer.consume()
        consumer_conn.register_with_event_loop(hub)
        runner = HubThread(hub)
        try:
            namesrv_proxy.hold(RequestCode.GET_KVLIST_BY_NAMESPACE)
            producer = publisher.Producer()
            others = [f"m{i}" for i in range(4)]
            for body in ["again", *others]:
                producer.publish(body, routing_key="hub_requeue")
            with arrived:
                assert arrived.wait_for(lambda: {b for b, _ in seen} >= set(others), timeout=15), (
                    f"the hub stopped while a requeue waited for the name server: {seen}")
            assert namesrv_proxy.held.wait(15), "the requeue did not ask the name server"
            namesrv_proxy.release()
            with arrived:
                assert arrived.wait_for(lambda: ("again", True) in seen, timeout=20), f"not requeued: {seen}"
        finally:
            namesrv_proxy.release()
            runner.stop(30)
            hub.close()
        assert sorted(seen) == sorted([("again", False), ("again", True)] + [(b, False) for b in others])
