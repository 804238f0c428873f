"""The transport's own semantics against the embedded broker: out-of-order acks never let the
committed offset pass an unacknowledged message, prefetch bounds deliveries, _size / purge /
queue_delete, the rocketmq:// alias of the celery command, names."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
import time
import uuid

import kombu
import pytest
from celery_workers import isolated_options
from rocketmq_sdk import Message, Producer
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.consumer import LitePullConsumer
from rocketmq_sdk.exceptions import IllegalArgumentError, TopicNotExistError
from rocketmq_sdk.integrations.celery.consumer import QueueConsumer
from rocketmq_sdk.integrations.celery.naming import Naming, escape
from rocketmq_sdk.integrations.celery.offsets import OffsetTracker

from tests.conftest import wait_until


@pytest.fixture()
def conn(rocketmq_cluster):
    # one message queue per topic: the offsets of a kombu queue are one sequence
    c = kombu.Connection(f"rocketmq://{rocketmq_cluster.namesrv_addr}",
                         transport_options=isolated_options(queue_nums=1, commit_interval=200))
    yield c
    c.release()


def publish(conn, queue: kombu.Queue, bodies) -> None:
    producer = kombu.Producer(conn.default_channel)
    for body in bodies:
        producer.publish(body, routing_key=queue.name, declare=[queue], serializer="json")


def consume(conn, queue: kombu.Queue, want: int, prefetch: int | None = None) -> list:
    got = []
    with kombu.Consumer(conn, [queue], callbacks=[lambda body, msg: got.append(msg)], prefetch_count=prefetch):
        while len(got) < want:
            conn.drain_events(timeout=5)
    return got


def committed(conn, queue: str) -> int:
    bc = conn.transport.broker_client
    qc = bc.running_consumer(queue)
    qc.commit_now()
    (mq,) = qc.lite.assignment()
    with AdminClient(bc.namesrv_addr) as admin:
        return admin.consume_offset(qc.group, mq)


def test_out_of_order_acks_commit_only_below_the_oldest_unacked(conn):
    q = kombu.Queue("acks")
    publish(conn, q, range(5))
    msgs = consume(conn, q, 5)
    assert [m.payload for m in msgs] == [0, 1, 2, 3, 4]
    msgs[0].ack()
    msgs[2].ack()
    msgs[4].ack()
    assert committed(conn, "acks") == 1          # message 1 is still unacked
    msgs[1].ack()
    assert committed(conn, "acks") == 3          # message 3 is still unacked
    msgs[3].ack()
    assert committed(conn, "acks") == 5


def test_prefetch_bounds_unacked_deliveries(conn):
    q = kombu.Queue("prefetch")
    publish(conn, q, range(5))
    got = []
    with kombu.Consumer(conn, [q], callbacks=[lambda body, msg: got.append(msg)], prefetch_count=2):
        conn.drain_events(timeout=5)
        assert [m.payload for m in got] == [0, 1]
        with pytest.raises(TimeoutError):
            conn.drain_events(timeout=0.5)        # two unacked: nothing more is delivered
        got[0].ack()
        conn.drain_events(timeout=5)
        assert [m.payload for m in got] == [0, 1, 2]
        for m in got:
            if not m.acknowledged:
                m.ack()


def test_fanout_binding_starts_at_the_bind(conn):
    ex = kombu.Exchange("fan", type="fanout")
    q1, q2 = kombu.Queue("fan1", exchange=ex), kombu.Queue("fan2", exchange=ex)
    producer = kombu.Producer(conn.default_channel, exchange=ex)
    producer.publish("before", declare=[q1], serializer="json")
    q2(conn.default_channel).declare()            # bound after "before" was published
    producer.publish("after", serializer="json")
    assert [m.payload for m in consume(conn, q1, 2)] == ["before", "after"]
    assert [m.payload for m in consume(conn, q2, 1)] == ["after"]
    with kombu.Consumer(conn, [q2], callbacks=[lambda body, msg: pytest.fail(f"q2 got {body!r}")]):
        with pytest.raises(TimeoutError):
            conn.drain_events(timeout=0.5)


def test_size_purge_and_delete(conn):
    q = kombu.Queue("sized")
    publish(conn, q, range(3))
    channel = conn.default_channel
    assert channel._size("sized") == 3
    assert q(channel).purge() == 3
    assert channel._size("sized") == 0
    with kombu.Consumer(conn, [q], callbacks=[lambda body, msg: pytest.fail("purged message delivered")]):
        with pytest.raises(TimeoutError):
            conn.drain_events(timeout=1)
    publish(conn, q, ["after"])
    assert [m.payload for m in consume(conn, q, 1)] == ["after"]
    q(channel).delete()
    with pytest.raises(conn.channel_errors):
        q(conn.channel()).queue_declare(passive=True)


def test_reject_requeue_redelivers_and_reject_drops(conn):
    q = kombu.Queue("rejects")
    publish(conn, q, ["a", "b"])
    first = consume(conn, q, 2)
    first[0].reject(requeue=True)
    first[1].reject(requeue=False)
    again = consume(conn, q, 1)
    assert again[0].payload == "a" and again[0].delivery_info.get("redelivered") is True
    again[0].ack()
    assert conn.default_channel._size("rejects") == 0
    # the default drops: nothing was dead-lettered
    bc = conn.transport.broker_client
    with pytest.raises(TopicNotExistError):
        bc.admin.topic_route(bc.naming.dlq_topic("rejects"))


def read_topic(namesrv_addr: str, topic: str, want: int) -> list:
    consumer = LitePullConsumer(f"reader_{uuid.uuid4().hex[:8]}", namesrv_addr,
                                consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic, "*")
    got: list = []
    with consumer:
        deadline = time.monotonic() + 30
        while len(got) < want and time.monotonic() < deadline:
            got.extend(consumer.poll(500))
    return got


def test_reject_without_requeue_dead_letters_when_asked(rocketmq_cluster):
    conn = kombu.Connection(f"rocketmq://{rocketmq_cluster.namesrv_addr}", transport_options=isolated_options(
        queue_nums=1, dead_letter_rejected=True))
    with conn:
        q = kombu.Queue("dead")
        publish(conn, q, ["a", "b"])
        first = consume(conn, q, 2)
        first[0].reject(requeue=False)
        first[1].ack()
        bc = conn.transport.broker_client
        dlq = bc.naming.dlq_topic("dead")
        assert dlq == "%DLQ%" + bc.naming.group("dead")
        (m,) = read_topic(rocketmq_cluster.namesrv_addr, dlq, 1)
        stored = json.loads(m.body)          # the kombu message as stored (body base64, as kombu's)
        assert stored["properties"]["body_encoding"] == "base64" and json.loads(base64.b64decode(stored["body"])) == "a"
        assert m.properties["RETRY_TOPIC"] == bc.naming.queue_topic("dead")
        assert m.properties["ORIGIN_MESSAGE_ID"]
        assert conn.default_channel._size("dead") == 0
        with kombu.Consumer(conn, [q], callbacks=[lambda body, msg: pytest.fail(f"redelivered {body!r}")]):
            with pytest.raises(TimeoutError):
                conn.drain_events(timeout=0.5)
        assert committed(conn, "dead") == 2


def test_queue_expires_deletes_an_unused_queue_only(rocketmq_cluster):
    opts = isolated_options(queue_nums=1, expiry_check_interval=0.2)
    conn = kombu.Connection(f"rocketmq://{rocketmq_cluster.namesrv_addr}", transport_options=opts)
    other = kombu.Connection(f"rocketmq://{rocketmq_cluster.namesrv_addr}", transport_options=opts)
    with conn, other:
        channel = conn.default_channel
        unused = kombu.Queue("expiring", expires=1.0)
        busy = kombu.Queue("busy", expires=1.0)
        plain = kombu.Queue("plain")
        declared = time.monotonic()  # before the publish that declares it: the queue's clock starts there
        publish(conn, unused, ["x"])
        publish(conn, plain, ["y"])
        assert channel.client.registry.queue("expiring").expires == 1000
        # "busy" is consumed by another connection (its group is online), not by conn
        with kombu.Consumer(other, [busy], callbacks=[lambda body, msg: msg.ack()]):
            busy_since = time.monotonic()
            deadline = time.monotonic() + 20
            while channel._has_queue("expiring"):
                assert time.monotonic() < deadline, "the unused queue was not deleted"
                try:
                    conn.drain_events(timeout=0.2)
                except TimeoutError:
                    pass
            assert time.monotonic() - declared >= 1.0
            # "busy" and "plain" stay well past the expiry while conn keeps checking
            bc = channel.client
            assert bc.group_online(bc.naming.group("busy"))
            while time.monotonic() - busy_since < 2.5:
                try:
                    conn.drain_events(timeout=0.2)
                except TimeoutError:
                    pass
                assert channel._has_queue("busy") and channel._has_queue("plain")
            assert channel.expire_queues() == []
    # declared again, it starts empty (its messages went with it)
    with kombu.Connection(f"rocketmq://{rocketmq_cluster.namesrv_addr}", transport_options=opts) as again:
        unused(again.default_channel).declare()
        assert again.default_channel._size("expiring") == 0


def test_celery_command_registers_the_alias():
    # the celery command loads its plugins (entry point group celery.commands) at start
    code = ("import sys; from celery.bin.celery import celery; from kombu.transport import TRANSPORT_ALIASES; "
            "sys.exit(0 if TRANSPORT_ALIASES.get('rocketmq') == 'rocketmq_sdk.integrations.celery:Transport' else 1)")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_names_are_legal_and_distinct():
    n = Naming()
    assert n.queue_topic("celery") == "celery"
    assert n.queue_topic("celery.pidbox") == "celery-2Epidbox"
    assert escape("a-b") == "a-2Db" and escape("a.b") != escape("a_b")
    assert n.queue_topic("q", 3) == "q-P3" and n.fanout_topic("q") == "q-F"
    assert len({n.queue_topic("x"), n.queue_topic("x", 3), n.fanout_topic("x"), n.queue_topic("x-F")}) == 4
    long = n.queue_topic("é" * 200)
    assert len(long) <= 127 and long != n.queue_topic("é" * 201)
    assert Naming(namespace="ns1").group("q") == "ns1%kombu_q"
    with pytest.raises(IllegalArgumentError):
        Naming(topic_prefix="bad.prefix")


def test_offset_tracker_never_passes_a_pending_offset():
    t = OffsetTracker()
    for off in range(10, 15):
        t.taken("mq", off)
    assert t.committable("mq") == 10
    for off in (14, 12, 11):
        t.settled("mq", off)
    assert t.committable("mq") == 10
    t.settled("mq", 10)
    assert t.committable("mq") == 13
    t.settled("mq", 13)
    assert t.committable("mq") == 15 and t.pending_count() == 0
    assert t.committable("other") == -1


def test_offset_tracker_skip_to_drops_only_what_lies_before_the_new_offset():
    t = OffsetTracker()
    for off in (3, 4, 7, 8):
        t.taken("mq", off)
    t.skip_to("mq", 6)           # a reset to 6 (a purge): 3 and 4 need no redelivery, 7 and 8 do
    assert t.committable("mq") == 7 and t.pending_count("mq") == 2
    t.settled("mq", 7)
    t.settled("mq", 8)
    assert t.committable("mq") == 9
    t.skip_to("fresh", 5)        # nothing taken yet: the committable offset is the reset one
    assert t.committable("fresh") == 5 and t.high("fresh") == 5


def test_an_offset_reset_drops_the_buffered_messages_before_it_and_keeps_the_later_ones(rocketmq_cluster):
    """A purge's reset reaches a consumer that already pulled messages stored after it (sent
    after the purge): those stay; the earlier ones go (Celery's errbacks published while
    ``Manager.wait_until_idle`` purged were lost when every buffered message was dropped)."""
    tag = uuid.uuid4().hex[:8]
    topic, group = f"reset_{tag}", f"reset_g_{tag}"
    with Producer(f"reset_p_{tag}", rocketmq_cluster.namesrv_addr) as producer:
        for i in range(4):
            producer.send(Message(topic, f"m{i}".encode()), lambda mqs, msg, arg: mqs[0])
    qc = QueueConsumer("q", group, {topic: 0}, lambda: None, namesrv_addr=rocketmq_cluster.namesrv_addr,
                       consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    try:
        wait_until(lambda: qc.buffered == 4, 30, "four messages buffered")
        (mq,) = qc.tracker.queues()
        qc._on_offset_reset(topic, {mq: 2})
        taken = [qc.take() for _ in range(3)]
        assert [m.body for _, m in taken[:2]] == [b"m2", b"m3"] and taken[2] is None
        assert qc.tracker.committable(mq) == 2
    finally:
        qc.close()


CLASS_PATH_FORMS = {
    # kombu.Connection(url, transport=...): a "module:Class" or dotted path, or the class itself
    "colon": 'kombu.Connection(URL, transport="rocketmq_sdk.integrations.celery:Transport", **KW)',
    "dotted": 'kombu.Connection(URL, transport="rocketmq_sdk.integrations.celery.transport.Transport", **KW)',
    "class": 'kombu.Connection(URL, transport=__import__("rocketmq_sdk.integrations.celery.transport",'
             ' fromlist=["Transport"]).Transport, **KW)',
    # no URL at all: host and port as keywords
    "keywords": 'kombu.Connection(hostname=URL.split("://")[1].split(":")[0], port=int(URL.rsplit(":", 1)[1]),'
                ' transport="rocketmq_sdk.integrations.celery:Transport", **KW)',
    # Celery: broker_transport names the class, the URL keeps its rocketmq:// scheme
    "celery": '__import__("celery").Celery("p", broker=URL, broker_transport="rocketmq_sdk.integrations.celery:Transport",'
              ' broker_transport_options=KW["transport_options"]).connection_for_write()',
}


@pytest.mark.parametrize("form", sorted(CLASS_PATH_FORMS))
def test_class_path_forms_without_the_alias(rocketmq_cluster, form):
    # each in a process that never imported the integration (no rocketmq:// alias)
    code = f"""
import sys, kombu
from kombu.transport import TRANSPORT_ALIASES
assert "rocketmq" not in TRANSPORT_ALIASES
URL = "rocketmq://{rocketmq_cluster.namesrv_addr}"
KW = {{"transport_options": {{"topic_prefix": "classpath_{form}_", "group_prefix": "classpath_{form}_"}}}}
conn = {CLASS_PATH_FORMS[form]}
assert type(conn.transport).__module__ == "rocketmq_sdk.integrations.celery.transport", type(conn.transport)
with conn:
    q = conn.SimpleQueue("classpath")
    q.put({{"n": 1}})
    msg = q.get(timeout=10)
    msg.ack()
    q.close()
sys.exit(0 if msg.payload == {{"n": 1}} else 1)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]


@pytest.mark.parametrize("url", ["rocketmq_sdk.integrations.celery:Transport://127.0.0.1:9876",
                                 "rocketmq_sdk.integrations.celery.transport.Transport://127.0.0.1:9876"])
def test_class_path_url_schemes_are_not_schemes(url):
    # "_" is not a URL scheme character (RFC 3986): urlparse finds no scheme, kombu no transport
    with pytest.raises(KeyError, match="No such transport"):
        kombu.Connection(url).transport_cls  # noqa: B018


@pytest.mark.skipif(tuple(int(x) for x in kombu.__version__.split(".")[:2]) < (5, 7),
                    reason="kombu < 5.7 does not check URL-derived transport names")
def test_class_path_before_plus_is_refused_by_kombu():
    # kombu >= 5.7 never imports a module named by a URL (kombu issue #2641)
    with pytest.raises(ValueError, match="Invalid transport scheme"):
        kombu.Connection("rocketmq_sdk.integrations.celery:Transport+rocketmq://127.0.0.1:9876")


def test_tls_transport_option(tmp_path):
    trustme = pytest.importorskip("trustme")
    from rocketmq_broker.embedded import start_dev_cluster
    from rocketmq_sdk.remoting.client import client_ssl_context
    from rocketmq_sdk.remoting.server import server_ssl_context

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    ca_path, cert_path, key_path = tmp_path / "ca.pem", tmp_path / "server.pem", tmp_path / "server.key"
    ca.cert_pem.write_to_path(str(ca_path))
    for blob in cert.cert_chain_pems:
        blob.write_to_path(str(cert_path), append=True)
    cert.private_key_pem.write_to_path(str(key_path))
    with start_dev_cluster(in_process=True, ssl_context=server_ssl_context(str(cert_path), str(key_path))) as cluster:
        conn = kombu.Connection(f"rocketmq://{cluster.namesrv_addr}", transport_options=isolated_options(
            ssl_context=client_ssl_context(str(ca_path))))
        with conn:
            q = conn.SimpleQueue("tls")
            q.put({"over": "tls"})
            msg = q.get(timeout=10)
            msg.ack()
            q.close()
        assert msg.payload == {"over": "tls"}
        plain = kombu.Connection(f"rocketmq://{cluster.namesrv_addr}", connect_timeout=2)
        with pytest.raises(plain.connection_errors):
            plain.connect()


def test_acl_keys_from_the_url(tmp_path):
    from rocketmq_broker.embedded import start_dev_cluster

    acl = tmp_path / "plain_acl.yml"
    acl.write_text("globalWhiteRemoteAddresses:\naccounts:\n  - accessKey: KombuUser\n    secretKey: kombu-secret-1\n"
                   "    admin: true\n    defaultTopicPerm: PUB|SUB\n    defaultGroupPerm: PUB|SUB\n")
    with start_dev_cluster(in_process=True, broker_config={"acl_enable": True, "acl_config_file": str(acl)}) as cluster:
        conn = kombu.Connection(f"rocketmq://KombuUser:kombu-secret-1@{cluster.namesrv_addr}",
                                transport_options=isolated_options())
        with conn:
            q = conn.SimpleQueue("acl")
            q.put({"signed": True})
            msg = q.get(timeout=10)
            msg.ack()
            q.close()
        assert msg.payload == {"signed": True}
        wrong = kombu.Connection(f"rocketmq://KombuUser:wrong-secret@{cluster.namesrv_addr}",
                                 transport_options=isolated_options())
        with wrong, pytest.raises(wrong.channel_errors + wrong.connection_errors):
            kombu.Producer(wrong.default_channel).publish({"signed": False}, routing_key="acl2",
                                                         declare=[kombu.Queue("acl2")])


def test_expiry_is_the_smallest_of_message_and_queue_ttl():
    from rocketmq_sdk.integrations.celery.registry import QueueInfo
    from rocketmq_sdk.integrations.celery.transport import Channel

    before = int(time.time() * 1000)
    assert Channel._expires_at({}, None) is None
    assert Channel._expires_at({}, QueueInfo(message_ttl=None)) is None
    at = Channel._expires_at({"expiration": "2000"}, QueueInfo(message_ttl=500))
    assert before + 500 <= at <= int(time.time() * 1000) + 500
    at = Channel._expires_at({"expiration": "100"}, QueueInfo(message_ttl=500))
    assert before + 100 <= at <= int(time.time() * 1000) + 100


def test_a_message_that_is_not_a_kombu_message_goes_to_the_dlq_with_one_warning(conn, rocketmq_cluster, caplog):
    q = kombu.Queue("foreign")
    publish(conn, q, ["before"])
    bc = conn.transport.broker_client
    from rocketmq_sdk import Message
    bc.producer.send(Message(bc.naming.queue_topic("foreign"), b"not json {", keys="k1"))
    publish(conn, q, ["after"])
    with caplog.at_level("WARNING", logger="rocketmq_sdk.integrations.celery"):
        got = consume(conn, q, 2)
    assert [m.payload for m in got] == ["before", "after"]
    for m in got:
        m.ack()
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "not a kombu message" in warnings[0].getMessage()
    (dead,) = read_topic(rocketmq_cluster.namesrv_addr, bc.naming.dlq_topic("foreign"), 1)
    assert dead.body == b"not json {" and dead.keys == ["k1"]
    assert dead.properties["RETRY_TOPIC"] == bc.naming.queue_topic("foreign")
    assert committed(conn, "foreign") == 3


@pytest.mark.parametrize("name", ["TBW102", "SCHEDULE_TOPIC_XXXX", "rmq_sys_trace"])
def test_a_queue_mapping_to_a_system_topic_is_refused_at_declaration(rocketmq_cluster, name):
    conn = kombu.Connection(f"rocketmq://{rocketmq_cluster.namesrv_addr}")     # no topic prefix
    with conn:
        with pytest.raises(IllegalArgumentError, match="system topic"):
            kombu.Queue(name)(conn.default_channel).declare()
        with pytest.raises(IllegalArgumentError, match="system topic"):
            kombu.Producer(conn.default_channel).publish("x", routing_key=name)
    assert Naming(topic_prefix="app_").queue_topic(name) == "app_" + name


def test_ack_freeing_prefetch_room_wakes_a_waiting_drain(rocketmq_cluster):
    """An acknowledgement that frees prefetch room wakes a waiting ``drain_events`` at once: a
    polling slice far longer than the drain timeout, so only the wake-up delivers in time."""
    with kombu.Connection(f"rocketmq://{rocketmq_cluster.namesrv_addr}",
                          transport_options=isolated_options(queue_nums=1, polling_interval=60.0)) as conn:
        _ack_wakes_drain(conn)


def _ack_wakes_drain(conn) -> None:
    q = kombu.Queue("wake")
    producer = kombu.Producer(conn.default_channel)
    for body in (1, 2):
        producer.publish(body, routing_key=q.name, declare=[q], serializer="json")
    got = []
    with kombu.Consumer(conn, [q], callbacks=[lambda body, msg: got.append(msg)], prefetch_count=1):
        conn.drain_events(timeout=10)
        assert [m.payload for m in got] == [1]
        transport = conn.transport
        waiting = threading.Event()
        real_wait = transport.broker_client.waker.wait

        def wait(timeout_s):
            waiting.set()           # the drain below is blocked with message 2 buffered
            return real_wait(timeout_s)

        transport.broker_client.waker.wait = wait
        acker = threading.Thread(target=lambda: waiting.wait(10) and got[0].ack())
        acker.start()
        began = time.monotonic()
        conn.drain_events(timeout=10)
        acker.join(10)
        assert [m.payload for m in got] == [1, 2]
        assert time.monotonic() - began < 5, "the ack did not wake drain_events"


def test_celery_task_past_its_expires_reaches_the_worker_plain_ttl_message_does_not(conn):
    """A task sent with ``expires`` also gets that TTL (Celery sets ``expiration``); dropping it
    here would leave its result PENDING forever (issue 26's hanging ``test_expired``): the
    worker must see it to record REVOKED. A kombu message without Celery's header is dropped."""
    q = kombu.Queue("expired")
    producer = kombu.Producer(conn.default_channel)
    producer.publish("plain", routing_key=q.name, declare=[q], serializer="json", expiration=0.001)
    producer.publish("task", routing_key=q.name, declare=[q], serializer="json", expiration=0.001,
                     headers={"task": "t.add", "id": "1", "expires": "2000-01-01T00:00:00+00:00"})
    producer.publish("live", routing_key=q.name, declare=[q], serializer="json")
    got = []
    with kombu.Consumer(conn, [q], callbacks=[lambda body, msg: (got.append(body), msg.ack())]):
        while len(got) < 2:
            conn.drain_events(timeout=10)
    assert got == ["task", "live"]


def test_a_binding_lost_on_the_name_servers_is_bound_again_by_its_declaring_process(conn):
    """A restarted reference name server keeps no KV config: the exchange's shared binding
    table is empty, and a publish routed through it would be dropped (kombu: "no queues bound").
    The process that declared the binding binds it again and the message is delivered."""
    q = kombu.Queue("healed", kombu.Exchange("healx", "direct"), routing_key="rk")
    publish_to = kombu.Producer(conn.default_channel, exchange=q.exchange)
    publish_to.publish("before", routing_key="rk", declare=[q], serializer="json")
    registry = conn.transport.broker_client.registry
    (binding,) = registry.table("healx", refresh=True)
    registry.unbind("healx", *binding)                       # what a name server restart loses
    assert registry.table("healx", refresh=True) == []
    publish_to.publish("after", routing_key="rk", serializer="json")
    got = consume(conn, q, 2)
    assert [m.payload for m in got] == ["before", "after"]
    assert registry.table("healx", refresh=True) == [binding]
