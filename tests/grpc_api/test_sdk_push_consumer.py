"""This SDK's PushConsumer with protocol="grpc" against the reference broker's gRPC proxy:
assignments, receive loops, the listener's results (ack, ChangeInvisibleDuration with the 5.x
backoff, the DLQ after the last attempt), the proxy's settings, namespaces, a proxy restart."""

from __future__ import annotations

import threading
import time

import pytest
from rocketmq_broker.proxy import GrpcProxy
from rocketmq_sdk import LitePullConsumer, Message, Producer, PushConsumer
from rocketmq_sdk.consumer.grpc_consume import DEFAULT_CONSUMER_BACKOFF_MS, ConsumeBackoff
from rocketmq_sdk.consumer.grpc_push_consumer import GrpcPushConsumer
from rocketmq_sdk.consumer.listener import ConsumeConcurrentlyStatus
from rocketmq_sdk.exceptions import ClientStateError, IllegalArgumentError
from rocketmq_sdk.grpc import v2

from tests.conftest import wait_until

from .conftest import finish, unique

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER


class Deliveries:
    """A listener keeping (time, message) of every delivery; ``fail(msg)`` decides RECONSUME_LATER."""

    def __init__(self, fail=lambda m: False) -> None:
        self.fail = fail
        self.seen: list[tuple[float, object]] = []
        self.lock = threading.Lock()

    def __call__(self, msgs, ctx):
        with self.lock:
            self.seen.extend((time.monotonic(), m) for m in msgs)
        return LATER if any(self.fail(m) for m in msgs) else OK

    def bodies(self) -> list[bytes]:
        with self.lock:
            return [m.body for _, m in self.seen]


def dlq_messages(namesrv: str, group: str, want: int, timeout_s: float = 20.0) -> list:
    dlq = LitePullConsumer(unique("cg"), namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    dlq.subscribe(f"%DLQ%{group}", "*")
    dlq.start()
    try:
        dead: list = []
        deadline = time.monotonic() + timeout_s
        while len(dead) < want and time.monotonic() < deadline:
            dead.extend(dlq.poll(500))
        return dead
    finally:
        dlq.shutdown()


def push_consumer(proxy, group, listener, *topics, **kw) -> GrpcPushConsumer:
    c = PushConsumer(group, endpoints=proxy.addr, protocol="grpc", await_duration=1, **kw)
    assert isinstance(c, GrpcPushConsumer)
    for t in topics:
        c.subscribe(t)
    c.register_message_listener(listener)
    return c


def test_listener_gets_each_message_once_with_properties_and_acks_them(grpc_cluster):
    cluster, proxy = grpc_cluster
    topic, group = unique("pu"), unique("gpu")
    listener = Deliveries()
    with Producer(unique("pg"), cluster.namesrv_addr) as p:  # remoting in, gRPC out
        m = Message(topic, b"m-0", tags="TagP", keys=["k0"])
        m.put_user_property("color", "blue")
        first = p.send(m).msg_id
        for i in range(1, 20):
            p.send(Message(topic, f"m-{i}".encode(), tags="TagP"))
    with push_consumer(proxy, group, listener, topic, consume_from_where="CONSUME_FROM_FIRST_OFFSET"):
        wait_until(lambda: len(listener.seen) >= 20, 30, "20 deliveries")
        m0 = next(m for _, m in listener.seen if m.body == b"m-0")
        assert m0.msg_id == first and m0.tags == "TagP" and m0.keys == ["k0"] and m0.get_property("color") == "blue"
        assert m0.topic == topic and m0.reconsume_times == 0
        # acked: nothing comes again (invisible 60 s would hide it; ask with a fresh simple consumer too)
    assert sorted(listener.bodies()) == sorted(f"m-{i}".encode() for i in range(20))
    from rocketmq_sdk.consumer.simple_consumer import SimpleConsumer
    check = SimpleConsumer(group, endpoints=proxy.addr, protocol="grpc", await_duration=1)
    check.subscribe(topic)
    with check:
        assert check.receive(32, 2) == []


def test_proxy_settings_give_the_5x_retry_policy_and_the_consumer_applies_it(grpc_cluster):
    _, proxy = grpc_cluster
    c = push_consumer(proxy, unique("gst"), Deliveries(), unique("st"))
    with c:
        wait_until(lambda: c._settings_seen.is_set(), 10, "the proxy's settings")
        assert c._backoff == ConsumeBackoff(17, DEFAULT_CONSUMER_BACKOFF_MS)
        assert c.fifo is False and c._polling_ms == 1_000  # the proxy keeps the long polling the client announced
        session = next(s for s in proxy.service.sessions._by_id.values() if s.group == c.group)
        assert session.client_type == v2.PUSH_CONSUMER


def test_reconsume_later_changes_invisibility_by_the_backoff_then_forwards_to_the_dlq(grpc_cluster):
    cluster, proxy = grpc_cluster
    topic, group = unique("rl"), unique("grl")
    listener = Deliveries(fail=lambda m: m.body == b"poison")
    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc") as p:
        bad = p.send(Message(topic, b"poison", tags="T")).msg_id
        p.send(Message(topic, b"fine", tags="T"))
    # 3 delivery attempts: 1st fails -> invisible 1 s (the policy's first step), 2nd fails -> 5 s,
    # 3rd fails -> ForwardMessageToDeadLetterQueue
    with push_consumer(proxy, group, listener, topic, max_reconsume_times=2,
                       consume_from_where="CONSUME_FROM_FIRST_OFFSET"):
        wait_until(lambda: listener.bodies().count(b"poison") >= 3, 40, "three deliveries of the poison message")
        dead = dlq_messages(cluster.namesrv_addr, group, 1)
    attempts = [(t, m) for t, m in listener.seen if m.body == b"poison"]
    assert [m.reconsume_times for _, m in attempts] == [0, 1, 2]
    gaps = [b[0] - a[0] for a, b in zip(attempts, attempts[1:], strict=False)]
    assert gaps[0] >= 0.9 and gaps[1] >= 4.9, gaps  # 1 s, then 5 s: never earlier
    assert listener.bodies().count(b"fine") == 1
    assert [m.msg_id for m in dead] == [bad] and dead[0].body == b"poison"


def test_namespace_wraps_topic_and_group_on_the_brokers(grpc_cluster):
    cluster, proxy = grpc_cluster
    topic, group, ns = unique("nt"), unique("gns"), unique("ns")
    listener = Deliveries(fail=lambda m: True)
    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc", namespace=ns) as p:
        sent = p.send(Message(topic, b"namespaced")).msg_id
    # the broker stores it under <ns>%<topic>
    raw = LitePullConsumer(unique("cg"), cluster.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    raw.subscribe(f"{ns}%{topic}", "*")
    with raw:
        stored: list = []
        wait_until(lambda: stored.extend(raw.poll(300)) or stored, 20, "the message under the namespaced topic")
    assert stored[0].msg_id == sent
    with push_consumer(proxy, group, listener, topic, namespace=ns, max_reconsume_times=0,
                       consume_from_where="CONSUME_FROM_FIRST_OFFSET") as c:
        wait_until(lambda: listener.seen, 20, "the namespaced message")
        assert listener.seen[0][1].topic == topic  # the application's name, not ns%topic
        session = next(s for s in proxy.service.sessions._by_id.values() if s.group == f"{ns}%{group}")
        assert session.topics == {f"{ns}%{topic}"}
        # its only attempt failed: the DLQ of the namespaced group
        dead = dlq_messages(cluster.namesrv_addr, f"{ns}%{group}", 1)
        assert [m.msg_id for m in dead] == [sent]
        assert c.namespace == ns


def test_official_client_messages_reach_the_grpc_push_consumer_intact(grpc_cluster, official):
    _, proxy = grpc_cluster
    topic, group = unique("op"), unique("gop")
    listener = Deliveries()
    with push_consumer(proxy, group, listener, topic):
        sent = finish(official("produce.py", proxy.addr, topic))
        wait_until(lambda: len(listener.seen) >= 5, 40, "the official client's 5 messages")
    got = {m.msg_id: m for _, m in listener.seen}
    assert set(got) == {s["id"] for s in sent} and len(listener.seen) == 5
    normal = got[sent[0]["id"]]
    assert normal.tags == "TagN" and sorted(normal.keys) == ["k1", "k2"] and normal.get_property("color") == "red"
    assert [got[s["id"]].get_property("__SHARDINGKEY") for s in sent[1:4]] == ["order-42"] * 3
    assert [got[s["id"]].tags for s in sent[1:4]] == ["TagF"] * 3


def test_a_proxy_restart_is_survived_with_nothing_lost(grpc_cluster):
    cluster, _ = grpc_cluster
    proxy = GrpcProxy(cluster.namesrv_addr)
    proxy.start()
    port = proxy.port
    topic, group = unique("rs"), unique("grs")
    listener = Deliveries()
    try:
        with Producer(unique("pg"), cluster.namesrv_addr) as p, \
                push_consumer(proxy, group, listener, topic, invisible_duration=3, mq_client_api_timeout=2000,
                              consume_from_where="CONSUME_FROM_FIRST_OFFSET"):
            for i in range(10):
                p.send(Message(topic, f"before-{i}".encode()))
            wait_until(lambda: len(set(listener.bodies())) >= 10, 30, "the messages sent before the restart")
            proxy.stop()
            for i in range(10):  # sent while the proxy is away
                p.send(Message(topic, f"during-{i}".encode()))
            proxy = GrpcProxy(cluster.namesrv_addr, port=port)
            proxy.start()
            for i in range(10):
                p.send(Message(topic, f"after-{i}".encode()))
            want = {f"{w}-{i}".encode() for w in ("before", "during", "after") for i in range(10)}
            wait_until(lambda: want <= set(listener.bodies()), 60, "every message after the restart")
            # the Telemetry stream came back: the new proxy knows the consumer's subscription
            wait_until(lambda: any(s.group == group and s.outbox is not None
                                   for s in proxy.service.sessions._by_id.values()), 15, "the settings again")
    finally:
        proxy.stop()


def test_bad_use_is_refused_before_anything_is_sent():
    with pytest.raises(IllegalArgumentError, match="remoting only"):
        type("Mine", (PushConsumer,), {})("g", endpoints="127.0.0.1:8081", protocol="grpc")
    with pytest.raises(IllegalArgumentError, match="namespace"):
        PushConsumer("g", endpoints="127.0.0.1:8081", protocol="grpc", namespace="a%b")
    with pytest.raises(IllegalArgumentError):
        PushConsumer("g", endpoints="127.0.0.1:8081", protocol="grpc", invisible_duration=0)
    c = PushConsumer("g", "grpc://127.0.0.1:8081")
    assert isinstance(c, GrpcPushConsumer)
    with pytest.raises(ClientStateError, match="listener"):
        c.start()
    c.register_message_listener(Deliveries())
    with pytest.raises(ClientStateError, match="subscribe"):
        c.start()


def test_backoff_policies_from_the_proxy():
    custom = v2.RetryPolicy(max_attempts=4)
    for s in (1, 5, 10):
        custom.customized_backoff.next.add(seconds=s)
    b = ConsumeBackoff.from_policy(custom)
    assert b.max_attempts == 4 and [b.delay_ms(n) for n in (1, 2, 3, 4, 9)] == [1000, 5000, 10000, 10000, 10000]
    expo = v2.RetryPolicy(max_attempts=3)
    expo.exponential_backoff.initial.seconds = 2
    expo.exponential_backoff.max.seconds = 10
    expo.exponential_backoff.multiplier = 2
    b = ConsumeBackoff.from_policy(expo)
    assert [b.delay_ms(n) for n in (1, 2, 3, 4)] == [2000, 4000, 8000, 10000]
    tiny = v2.RetryPolicy(max_attempts=3)
    tiny.exponential_backoff.initial.nanos = 10_000_000
    tiny.exponential_backoff.max.seconds = 1
    tiny.exponential_backoff.multiplier = 2
    assert ConsumeBackoff.from_policy(tiny).delay_ms(1) == 1000  # never below the proxies' 1 s


def test_fifo_group_is_consumed_in_message_group_order_with_local_retries(grpc_cluster):
    """A group the broker marks ``consumeMessageOrderly`` (5.x): the proxy says FIFO in the
    settings and pops in order; the consumer runs each message group's messages one after
    another, retrying a failure in place (after the policy's 1 s) before the next one."""
    from rocketmq_sdk.admin import AdminClient
    from rocketmq_sdk.producer.selector import SelectMessageQueueByHash

    cluster, proxy = grpc_cluster
    topic, group = unique("ff"), unique("gff")
    with AdminClient(cluster.namesrv_addr) as admin:
        admin.update_subscription_group(group, broker_addr=cluster.broker_addr, consume_message_orderly=True,
                                        retry_max_times=3)
    failed_once: set[bytes] = set()

    def fail_b3_once(m) -> bool:
        if m.body == b"B-3" and m.body not in failed_once:
            failed_once.add(m.body)
            return True
        return False

    listener = Deliveries(fail=fail_b3_once)
    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc") as p:
        for i in range(8):
            for key in ("A", "B"):
                p.send(Message(topic, f"{key}-{i}".encode()), SelectMessageQueueByHash(), key)  # group = key
    with push_consumer(proxy, group, listener, topic, consume_from_where="CONSUME_FROM_FIRST_OFFSET") as c:
        wait_until(lambda: len(listener.seen) >= 17, 40, "16 messages and one retry")
        assert c.fifo is True and c._backoff.max_attempts == 4  # retryMaxTimes 3 + 1
    seen = listener.seen
    for key in ("A", "B"):
        order = [m.body.decode() for _, m in seen if m.get_property("__SHARDINGKEY") == key]
        want = [f"{key}-{i}" for i in range(8)]
        if key == "B":
            want.insert(4, "B-3")  # consumed again in place, before B-4
        assert order == want
    b3 = [t for t, m in seen if m.body == b"B-3"]
    assert b3[1] - b3[0] >= 0.9  # the policy's first step (1 s)


def test_fifo_retries_in_place_keep_the_message_invisible_past_its_invisible_duration(grpc_cluster):
    """Local retries of a FIFO message (1 s, then 5 s) outlast an invisible duration of 2 s: the
    consumer extends the invisibility before each wait, so the message is not delivered again
    meanwhile (no second copy, order kept)."""
    from rocketmq_sdk.admin import AdminClient
    from rocketmq_sdk.producer.selector import SelectMessageQueueByHash

    cluster, proxy = grpc_cluster
    topic, group = unique("fr"), unique("gfr")
    with AdminClient(cluster.namesrv_addr) as admin:
        admin.update_subscription_group(group, broker_addr=cluster.broker_addr, consume_message_orderly=True)
    failures = {"n": 0}

    def fail_first_twice(m) -> bool:
        if m.body == b"F-0" and failures["n"] < 2:
            failures["n"] += 1
            return True
        return False

    listener = Deliveries(fail=fail_first_twice)
    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc") as p:
        for i in range(3):
            p.send(Message(topic, f"F-{i}".encode()), SelectMessageQueueByHash(), "F")
    with push_consumer(proxy, group, listener, topic, invisible_duration=2,
                       consume_from_where="CONSUME_FROM_FIRST_OFFSET"):
        wait_until(lambda: b"F-2" in listener.bodies(), 40, "the last message")
        # past every invisible duration: a copy not acked would have come back by now
        extra_deadline = time.monotonic() + 3
        wait_until(lambda: time.monotonic() > extra_deadline, 5, "3 s more")
    assert listener.bodies() == [b"F-0", b"F-0", b"F-0", b"F-1", b"F-2"], listener.bodies()
    times = [t for t, m in listener.seen]
    assert times[1] - times[0] >= 0.9 and times[2] - times[1] >= 4.9  # in place, by the policy (1 s, 5 s)


def test_on_message_async_handlers_and_an_orderly_listener(grpc_cluster):
    """The remoting listener styles work over gRPC: ``on_message`` with an ``async def`` handler
    per topic, and an orderly listener (SUSPEND_CURRENT_QUEUE_A_MOMENT = consume again later)."""
    from rocketmq_sdk.consumer.listener import ConsumeOrderlyContext, ConsumeOrderlyStatus

    _, proxy = grpc_cluster
    t1, t2 = unique("oa"), unique("ob")
    seen: dict[str, list[bytes]] = {t1: [], t2: []}
    c = PushConsumer(unique("gon"), endpoints=proxy.addr, protocol="grpc", await_duration=1,
                     consume_from_where="CONSUME_FROM_FIRST_OFFSET")

    @c.on_message(t1)
    async def first(msgs, ctx):
        seen[t1].extend(m.body for m in msgs)
        return OK

    @c.on_message(t2)
    def second(msgs, ctx):
        seen[t2].extend(m.body for m in msgs)
        return OK

    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc") as p, c:
        p.send(Message(t1, b"to-async"))
        p.send(Message(t2, b"to-sync"))
        wait_until(lambda: seen[t1] and seen[t2], 20, "both handlers")
    assert seen == {t1: [b"to-async"], t2: [b"to-sync"]}

    topic = unique("oo")
    calls: list[tuple[bytes, int, object]] = []

    def orderly(msgs, ctx):
        assert isinstance(ctx, ConsumeOrderlyContext)
        calls.append((msgs[0].body, msgs[0].reconsume_times, ctx.message_queue.topic))
        first_call = len(calls) == 1
        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT if first_call else ConsumeOrderlyStatus.SUCCESS

    o = PushConsumer(unique("gor"), endpoints=proxy.addr, protocol="grpc", await_duration=1,
                     consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    o.subscribe(topic)
    o.register_message_listener(orderly, orderly=True)
    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc") as p, o:
        p.send(Message(topic, b"ordered"))
        wait_until(lambda: len(calls) >= 2, 20, "the message again after SUSPEND")
    assert calls == [(b"ordered", 0, topic), (b"ordered", 1, topic)]


def test_push_consumer_and_pull_through_a_local_mode_proxy(local_proxy):
    """The proxy's local mode (``dev --grpc-port``: POP, ACK and CHANGE_INVISIBLETIME skip the
    connection; PULL_MESSAGE and the group settings keep it) serves the push consumer's whole
    cycle, a RECONSUME_LATER included, and PullMessage."""
    from .test_proxy_pull_and_offsets import pull, queue

    cluster, _, proxy = local_proxy
    topic, group = unique("lp"), unique("glp")
    listener = Deliveries(fail=lambda m: m.body == b"later" and m.reconsume_times == 0)
    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc") as p:
        for body in (b"now", b"later"):
            p.send(Message(topic, body))
    with push_consumer(proxy, group, listener, topic, consume_from_where="CONSUME_FROM_FIRST_OFFSET") as c:
        wait_until(lambda: listener.bodies().count(b"later") >= 2, 30, "the redelivery of 'later'")
        pulled = []
        for qid in range(4):
            pulled += pull(c._connected().conn, unique("gpull"), queue(topic, qid), 0)[1]
    assert sorted(listener.bodies()) == [b"later", b"later", b"now"]
    assert sorted(m.body for m in pulled) == [b"later", b"now"]


def test_a_consumer_killed_mid_batch_loses_nothing(grpc_cluster, tmp_path):
    """SIGKILL of a process whose gRPC push consumer holds messages in its listener: another
    consumer of the group gets every message not acknowledged, after the invisible duration
    (at-least-once: none lost, duplicates allowed)."""
    import os
    import subprocess
    import sys

    cluster, proxy = grpc_cluster
    topic, group = unique("kl"), unique("gkl")
    want = {f"k-{i}".encode() for i in range(40)}
    with Producer(unique("pg"), cluster.namesrv_addr) as p:
        for body in sorted(want):
            p.send(Message(topic, body))
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "push_consumer_process.py")
    errors = open(tmp_path / "child.err", "w")  # noqa: SIM115 - closed below
    child = subprocess.Popen([sys.executable, script, proxy.addr, topic, group, "3", "0.2"],
                             stdout=subprocess.PIPE, stderr=errors, text=True)
    first: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while len(first) < 5 and time.monotonic() < deadline:  # some consumed, more held in the listener
            line = child.stdout.readline()
            if not line:
                break
            first.append(line.strip().encode())
    finally:
        child.kill()
        child.wait(10)
        errors.close()
    # the child prints a body before it acknowledges it: lines still in the pipe are messages it
    # may have acknowledged after the fifth line was read (consumed once, not to be redelivered)
    first += [line.strip().encode() for line in child.stdout.read().splitlines() if line.strip()]
    child.stdout.close()
    assert len(first) >= 5, f"the child consumed {len(first)}: {(tmp_path / 'child.err').read_text()[-3000:]}"
    listener = Deliveries()
    with push_consumer(proxy, group, listener, topic, consume_from_where="CONSUME_FROM_FIRST_OFFSET"):
        wait_until(lambda: want <= set(first) | set(listener.bodies()), 60, "every message after the kill")
    assert len(want - set(first)) > 0  # the kill left work for the second consumer
