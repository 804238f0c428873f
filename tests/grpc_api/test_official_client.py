"""The official RocketMQ 5.x Python client (rocketmq-python-client 5.1.2) against the reference
broker's gRPC proxy; what it sends is consumed with this SDK over remoting."""

from __future__ import annotations

import time

from rocketmq_sdk import LitePullConsumer

from .conftest import finish, read_line, unique


def consume(namesrv_addr: str, topic: str, want: int, timeout_s: float = 40.0) -> list:
    """``want`` messages of ``topic`` read from the start with a remoting consumer (fails after
    ``timeout_s`` with what it got)."""
    consumer = LitePullConsumer(unique("cg"), namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic, "*")
    consumer.start()
    got: list = []
    try:
        deadline = time.monotonic() + timeout_s
        while len(got) < want and time.monotonic() < deadline:
            got.extend(consumer.poll(500))
    finally:
        consumer.shutdown()
    assert len(got) >= want, f"got {len(got)} of {want} messages: {[m.body for m in got]}"
    return got


def test_normal_fifo_and_delay_sends_reach_remoting_consumers_intact(grpc_cluster, official):
    cluster, proxy = grpc_cluster
    topic = unique("t5")
    sent = finish(official("produce.py", proxy.addr, topic))
    assert [s["kind"] for s in sent] == ["normal", "fifo", "fifo", "fifo", "delay"]
    got = {m.msg_id: m for m in consume(cluster.namesrv_addr, topic, 5)}
    assert set(got) == {s["id"] for s in sent}  # the 5.x message ids are the UNIQ_KEYs

    normal = got[sent[0]["id"]]
    assert normal.body == b"normal" and normal.tags == "TagN"
    assert sorted(normal.keys) == ["k1", "k2"]
    assert normal.get_property("color") == "red"

    fifo = [got[s["id"]] for s in sent[1:4]]
    assert [m.body for m in sorted(fifo, key=lambda m: m.queue_offset)] == [b"fifo-0", b"fifo-1", b"fifo-2"]
    assert {m.get_property("__SHARDINGKEY") for m in fifo} == {"order-42"}
    assert len({m.queue_id for m in fifo}) == 1  # one message group, one queue

    delayed = got[sent[4]["id"]]
    assert delayed.body == b"delayed"
    # stored in the topic when due, never early: the 5.x broker's timer wheel (1 s slots), not the
    # next delay level (5 s after the send, 2-3 s late; failed so before the proxy used timers)
    assert sent[4]["deliver_ms"] <= delayed.store_timestamp < sent[4]["deliver_ms"] + 2000


def test_transactions_commit_rollback_and_server_check(grpc_cluster, official):
    cluster, proxy = grpc_cluster
    topic = unique("tx5")
    p = official("transaction.py", proxy.addr, topic)
    halves = {}
    while len(halves) < 3:
        line = read_line(p)
        halves[line["kind"]] = line
    assert all(h["tx"] for h in halves.values())
    # the committed one and, after the broker's check answered COMMIT by the checker, the open one
    got = consume(cluster.namesrv_addr, topic, 2)
    lines = finish(p)
    bodies = sorted(m.body for m in got)
    assert bodies == [b"tx-commit", b"tx-open"]
    checks = [line for line in lines if line["kind"] == "check"]
    assert checks and {c["id"] for c in checks} == {halves["tx-open"]["id"]}
    assert {m.msg_id for m in got} == {halves["tx-commit"]["id"], halves["tx-open"]["id"]}


def test_simple_consumer_receives_remoting_sends_with_redelivery(grpc_cluster, official):
    from rocketmq_sdk import Message, Producer

    cluster, proxy = grpc_cluster
    topic, group = unique("r5"), unique("g5")
    ids = {}
    with Producer(unique("pg"), cluster.namesrv_addr) as producer:
        m = Message(topic, b"plain", tags="TagR", keys=["a", "b"])
        m.put_user_property("color", "blue")
        ids["plain"] = producer.send(m).msg_id
        m = Message(topic, b"grouped", tags="TagR")
        m.put_property("__SHARDINGKEY", "order-7")
        ids["grouped"] = producer.send(m).msg_id
        ids["redeliver"] = producer.send(Message(topic, b"redeliver")).msg_id
    lines = finish(official("simple_consume.py", proxy.addr, topic, group, "3"))
    by_body: dict[str, list[dict]] = {}
    for line in lines:
        by_body.setdefault(line["body"], []).append(line)
    plain = by_body["plain"][0]
    assert plain["id"] == ids["plain"] and plain["tag"] == "TagR" and plain["keys"] == ["a", "b"]
    assert plain["props"] == {"color": "blue"}
    assert by_body["grouped"][0]["group"] == "order-7"
    # not acked at its first delivery: delivered again once invisible, as attempt 2
    assert [d["attempt"] for d in by_body["redeliver"]] == [1, 2]
    assert all(len(v) == 1 for k, v in by_body.items() if k != "redeliver")


def test_push_consumer_receives_with_assignment_ack_and_redelivery(grpc_cluster, official):
    from rocketmq_sdk import Message, Producer

    cluster, proxy = grpc_cluster
    topic, group = unique("p5"), unique("gp5")
    with Producer(unique("pg"), cluster.namesrv_addr) as producer:
        ids = {producer.send(Message(topic, body, tags="TagP")).msg_id: body for body in (b"ok-1", b"fail-once", b"ok-2")}
    lines = finish(official("push_consume.py", proxy.addr, topic, group, "3"), timeout_s=120)
    succeeded = {line["id"] for line in lines}
    assert succeeded == set(ids)
    fail_once = [line["attempt"] for line in lines if line["body"] == "fail-once"]
    assert fail_once[:2] == [1, 2]  # FAILURE: delivered again as the next attempt


def test_official_push_consumer_on_a_fifo_group_consumes_in_message_group_order(grpc_cluster, official):
    """A group the broker marks ``consumeMessageOrderly``: the proxy's settings say FIFO, so the
    official client consumes each message group in order, from the proxy's orderly POP."""
    from rocketmq_sdk import Message, Producer
    from rocketmq_sdk.admin import AdminClient
    from rocketmq_sdk.producer.selector import SelectMessageQueueByHash

    cluster, proxy = grpc_cluster
    topic, group = unique("pf"), unique("gpf")
    with AdminClient(cluster.namesrv_addr) as admin:
        admin.update_subscription_group(group, broker_addr=cluster.broker_addr, consume_message_orderly=True)
    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc") as producer:
        for i in range(6):
            for key in ("x", "y"):
                producer.send(Message(topic, f"{key}-{i}".encode(), tags="TagP"), SelectMessageQueueByHash(), key)
    lines = finish(official("push_consume.py", proxy.addr, topic, group, "12"), timeout_s=120)
    for key in ("x", "y"):
        assert [line["body"] for line in lines if line["body"].startswith(key)] == [f"{key}-{i}" for i in range(6)]
