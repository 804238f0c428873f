"""The proxy's pull side of the 5.x API: PullMessage, UpdateOffset, GetOffset, QueryOffset (as
Apache's proxy: PULL_MESSAGE and the offset requests of remoting), namespaces, bad input."""

from __future__ import annotations

import time

import pytest
from rocketmq_sdk import Message, Producer
from rocketmq_sdk.grpc import v2
from rocketmq_sdk.grpc.connection import GrpcConnection

from .conftest import unique


@pytest.fixture
def conn(grpc_cluster):
    _, proxy = grpc_cluster
    c = GrpcConnection(proxy.addr, unique("client"))
    yield c
    c.close()


def queue(topic: str, qid: int = 0, broker: str = "broker-a", namespace: str = "") -> v2.MessageQueue:
    mq = v2.MessageQueue(id=qid)
    mq.topic.name, mq.topic.resource_namespace = topic, namespace
    mq.broker.name = broker
    return mq


def pull(conn, group: str, mq, offset: int, batch: int = 32, polling_ms: int = 0, expression: str = "*",
         namespace: str = "") -> tuple[int, list, int | None]:
    req = v2.PullMessageRequest(group=v2.Resource(name=group, resource_namespace=namespace), offset=offset,
                                batch_size=batch)
    req.message_queue.CopyFrom(mq)
    req.filter_expression.type, req.filter_expression.expression = v2.TAG, expression
    req.long_polling_timeout.seconds, rest = divmod(polling_ms, 1000)
    req.long_polling_timeout.nanos = rest * 1_000_000
    code, msgs, next_offset = None, [], None
    for r in conn.stream("PullMessage", req, 10):
        kind = r.WhichOneof("content")
        if kind == "status":
            code = r.status.code
        elif kind == "message":
            msgs.append(r.message)
        else:
            next_offset = r.next_offset
    return code, msgs, next_offset


def end_offset(conn, topic: str, qid: int = 0) -> int:
    q = v2.QueryOffsetRequest(query_offset_policy=v2.END)
    q.message_queue.CopyFrom(queue(topic, qid))
    return conn.call("QueryOffset", q, 5).offset


def fill_queue0(conn, namesrv: str, topic: str, messages: list[Message]) -> tuple[int, int]:
    """Create ``topic`` and put ``messages`` into its queue 0 on broker-a: (their first offset,
    the time in ms just before they were sent)."""
    with Producer(unique("pg"), namesrv) as p:
        p.send(Message(topic, b"create"))
        q0 = next(q for q in p.fetch_publish_queues(topic) if q.queue_id == 0)
        first = end_offset(conn, topic)
        before = int(time.time() * 1000)
        for m in messages:
            p.send(m, mq=q0)
    return first, before


def test_pull_from_an_offset_filters_by_tag_and_gives_the_next_offset(grpc_cluster, conn):
    cluster, _ = grpc_cluster
    topic, group = unique("pl"), unique("gpl")
    first, _ = fill_queue0(conn, cluster.namesrv_addr, topic, [
        Message(topic, f"m-{i}".encode(), tags="A" if i % 2 == 0 else "B", keys=[f"k{i}"]) for i in range(6)])
    code, msgs, nxt = pull(conn, group, queue(topic), first, batch=32, expression="A")
    assert code == v2.OK and nxt == first + 6
    assert [m.body for m in msgs] == [b"m-0", b"m-2", b"m-4"]
    assert msgs[0].system_properties.tag == "A" and list(msgs[0].system_properties.keys) == ["k0"]
    assert msgs[0].system_properties.queue_offset == first and msgs[0].system_properties.queue_id == 0
    code, msgs, nxt = pull(conn, group, queue(topic), first + 1, batch=2)
    assert code == v2.OK and [m.body for m in msgs] == [b"m-1", b"m-2"] and nxt == first + 3
    # at the end: nothing within the long polling, the same next offset
    t0 = time.monotonic()
    code, msgs, nxt = pull(conn, group, queue(topic), first + 6, polling_ms=500)
    assert code == v2.MESSAGE_NOT_FOUND and msgs == [] and nxt == first + 6
    assert time.monotonic() - t0 >= 0.4  # held by the broker (long polling)
    code, _, _ = pull(conn, group, queue(topic), first + 1000)
    assert code == v2.ILLEGAL_OFFSET


def test_offsets_update_get_and_query(grpc_cluster, conn):
    cluster, _ = grpc_cluster
    topic, group = unique("of"), unique("gof")
    first, before = fill_queue0(conn, cluster.namesrv_addr, topic,
                                [Message(topic, f"m-{i}".encode()) for i in range(4)])
    get = v2.GetOffsetRequest(group=v2.Resource(name=group))
    get.message_queue.CopyFrom(queue(topic))
    fresh = conn.call("GetOffset", get, 5)  # nothing committed: the broker's rule for a queue starting at 0
    assert fresh.status.code == v2.OK and fresh.offset == 0
    upd = v2.UpdateOffsetRequest(group=v2.Resource(name=group), offset=3)
    upd.message_queue.CopyFrom(queue(topic))
    # a 5.x broker keeps no offsets of a group it does not know (SUBSCRIPTION_GROUP_NOT_EXIST)
    assert conn.call("UpdateOffset", upd, 5).status.code == v2.CONSUMER_GROUP_NOT_FOUND
    assert pull(conn, group, queue(topic), first, batch=1)[0] == v2.OK  # a pull creates the group
    assert conn.call("UpdateOffset", upd, 5).status.code == v2.OK
    got = conn.call("GetOffset", get, 5)
    assert got.status.code == v2.OK and got.offset == 3
    q = v2.QueryOffsetRequest(query_offset_policy=v2.END)
    q.message_queue.CopyFrom(queue(topic))
    end = conn.call("QueryOffset", q, 5)
    assert end.status.code == v2.OK and end.offset == first + 4
    q.query_offset_policy = v2.BEGINNING
    assert conn.call("QueryOffset", q, 5).offset == 0
    q.query_offset_policy = v2.TIMESTAMP
    assert conn.call("QueryOffset", q, 5).status.code == v2.BAD_REQUEST  # no timestamp
    q.timestamp.seconds, q.timestamp.nanos = divmod(before, 1000)[0], before % 1000 * 1_000_000
    at = conn.call("QueryOffset", q, 5)
    # the first message stored at or after the time: m-0, or the topic-creating message just before
    # it when that one went to queue 0 within the same millisecond
    assert at.status.code == v2.OK and at.offset in (first - 1, first)


def test_namespaced_pull_and_offsets(grpc_cluster, conn):
    _, proxy = grpc_cluster
    topic, group, ns = unique("np"), unique("gnp"), unique("ns")
    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc", namespace=ns) as p:
        for i in range(4):
            p.send(Message(topic, f"n-{i}".encode()))
    found = []
    for qid in range(4):
        code, msgs, _ = pull(conn, group, queue(topic, qid, namespace=ns), 0, namespace=ns)
        found.extend(msgs)
        assert code in (v2.OK, v2.MESSAGE_NOT_FOUND)
    assert sorted(m.body for m in found) == [b"n-0", b"n-1", b"n-2", b"n-3"]
    assert {m.topic.name for m in found} == {topic} and {m.topic.resource_namespace for m in found} == {ns}
    # without the namespace the topic is another one (not created): refused, nothing read
    code, msgs, _ = pull(conn, group, queue(topic), 0)
    assert code == v2.TOPIC_NOT_FOUND and msgs == []


def test_bad_pull_and_offset_requests_are_refused_before_any_broker(grpc_cluster, conn):
    cluster, _ = grpc_cluster
    topic = unique("bd")
    with Producer(unique("pg"), cluster.namesrv_addr) as p:
        p.send(Message(topic, b"x"))
    assert pull(conn, "g", queue(topic, broker="no-such-broker"), 0)[0] == v2.BAD_REQUEST
    assert pull(conn, "g", queue(topic, qid=99), 0)[0] == v2.BAD_REQUEST
    assert pull(conn, "g", queue(topic, qid=-1), 0)[0] == v2.BAD_REQUEST
    assert pull(conn, "g", queue(topic), -5)[0] == v2.ILLEGAL_OFFSET
    assert pull(conn, "g", queue(topic), 0, batch=33)[0] == v2.BAD_REQUEST
    assert pull(conn, "g", queue(topic), 0, polling_ms=31_000)[0] == v2.ILLEGAL_POLLING_TIME
    assert pull(conn, "g/../x", queue(topic), 0)[0] == v2.ILLEGAL_CONSUMER_GROUP
    assert pull(conn, "g", queue("../../etc"), 0)[0] == v2.ILLEGAL_TOPIC
    upd = v2.UpdateOffsetRequest(group=v2.Resource(name="g"), offset=-1)
    upd.message_queue.CopyFrom(queue(topic))
    assert conn.call("UpdateOffset", upd, 5).status.code == v2.ILLEGAL_OFFSET
