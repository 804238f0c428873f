"""Every thread a rocketmq:// kombu connection starts (the SDK client's I/O thread, the admin
client's, the publishing thread) ends when the connection closes, however kombu closes it
(``with`` block, ``release``, a pool), and when an unclosed connection is garbage collected:
a long-running publisher (a web app, Flower, ``celery inspect`` loops) opens many."""

from __future__ import annotations

import gc
import threading

import kombu
import pytest
from celery_workers import isolated_options

from tests.conftest import wait_until

#: the threads of the SDK's clients and of the transport
PREFIXES = ("rocketmq-", "kombu-rocketmq-")
ROUNDS = 3


def transport_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith(PREFIXES)}


def assert_no_thread_left(before: set[threading.Thread]) -> None:
    def left() -> list[str]:
        gc.collect()
        return sorted(t.name for t in transport_threads() - before if t.is_alive())

    try:
        wait_until(lambda: not left(), timeout_s=20, what="the connections' threads to end")
    except AssertionError:
        pytest.fail(f"threads left by {ROUNDS} connections: {left()}")


def publish_and_consume(conn: kombu.Connection, name: str) -> None:
    queue = kombu.Queue(name)
    with conn.Producer() as producer:
        producer.publish({"n": 1}, routing_key=name, declare=[queue])
    got = []
    with conn.Consumer([queue], callbacks=[lambda body, message: (got.append(body), message.ack())]):
        conn.drain_events(timeout=10)
    assert got == [{"n": 1}]


@pytest.mark.parametrize("how", ["with", "release", "pool", "simple_queue", "broadcast"])
def test_closed_connections_leave_no_thread(rocketmq_cluster, how):
    url = f"rocketmq://{rocketmq_cluster.namesrv_addr}"
    before = transport_threads()
    for _ in range(ROUNDS):
        opts = isolated_options()
        if how == "with":
            with kombu.Connection(url, transport_options=opts) as conn:
                publish_and_consume(conn, "lifecycle")
        elif how == "release":
            conn = kombu.Connection(url, transport_options=opts)
            publish_and_consume(conn, "lifecycle")
            conn.release()
        elif how == "pool":
            pool = kombu.Connection(url, transport_options=opts).Pool(2)
            with pool.acquire() as conn:
                publish_and_consume(conn, "lifecycle")
            pool.force_close_all()
        elif how == "simple_queue":
            with kombu.Connection(url, transport_options=opts) as conn:
                q = conn.SimpleQueue("lifecycle")
                q.put({"n": 1})
                q.get(timeout=10).ack()
                q.close()
        else:  # a fanout publish from the hub-less caller, as celery inspect/control broadcast
            with kombu.Connection(url, transport_options=opts) as conn:
                exchange = kombu.Exchange("lifecycle.pidbox", type="fanout", durable=False)
                with conn.Producer() as producer:
                    producer.publish({"method": "ping"}, exchange=exchange, declare=[exchange],
                                     delivery_mode=1)
    assert_no_thread_left(before)


@pytest.mark.parametrize("used", ["publish", "consume"])
def test_unclosed_connections_leave_no_thread_once_collected(rocketmq_cluster, used):
    """kombu's Redis transport frees an unclosed connection's sockets when it is collected; the
    SDK clients of a rocketmq:// connection are shut down then (and kombu's at-exit restore of
    a consuming channel's unacknowledged messages does not keep it alive)."""
    url = f"rocketmq://{rocketmq_cluster.namesrv_addr}"
    before = transport_threads()

    def forget_a_connection() -> None:
        conn = kombu.Connection(url, transport_options=isolated_options())
        if used == "publish":
            with conn.Producer() as producer:
                producer.publish({"n": 1}, routing_key="lifecycle", declare=[kombu.Queue("lifecycle")])
        else:
            publish_and_consume(conn, "lifecycle")
        assert transport_threads() - before

    for _ in range(ROUNDS):
        forget_a_connection()
    assert_no_thread_left(before)



def test_celery_apps_reuse_the_pooled_connections(rocketmq_cluster):
    """Celery apps of one process with one broker configuration share kombu's process-wide
    connection pool (``kombu.pools``, as on every broker; ``app.close()`` forgets the app's
    reference to it): sending tasks and broadcasting (``control.ping``, as ``celery inspect``)
    from app after app opens no connection beyond the pool's, and closing the pool ends their
    threads."""
    import kombu.pools
    from celery import Celery

    url = f"rocketmq://{rocketmq_cluster.namesrv_addr}"
    opts = isolated_options()
    before = transport_threads()

    def use_an_app() -> set[threading.Thread]:
        app = Celery("lifecycle", broker=url, set_as_current=False)
        app.conf.broker_transport_options = opts
        app.send_task("lifecycle.noop", args=(1,))
        assert app.control.ping(timeout=0.2) == []
        app.close()
        return transport_threads()

    first = use_an_app()
    assert first - before
    for _ in range(ROUNDS):
        assert not (use_an_app() - first), "an app opened connections beyond the pool's"
    kombu.pools.connections[kombu.Connection(url, transport_options=opts)].force_close_all()
    assert_no_thread_left(before)
