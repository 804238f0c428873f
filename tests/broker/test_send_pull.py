"""Send and pull against the reference broker, checked against what a 4.9.8 broker answers."""

from __future__ import annotations

import time

import pytest
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeader
from rocketmq_sdk.protocol.message import Message
from rocketmq_sdk.protocol.message_codec import decode_messages, encode_batch, encode_properties
from rocketmq_sdk.protocol.msgid import decode_offset_msg_id

from tests.conftest import load_capture, wait_until


def _send(client, cluster, topic, body, props, queue_id=0, code=RequestCode.SEND_MESSAGE_V2, batch=False):
    h = SendMessageRequestHeader(producer_group="pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
                                 queue_id=queue_id, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
                                 properties=encode_properties(props), reconsume_times=0, unit_mode=False, batch=batch)
    ext = h.to_v2() if code != RequestCode.SEND_MESSAGE else h.to_ext_fields()
    return client.invoke(cluster.broker_addr, code, ext, body)


def _pull(client, cluster, topic, queue_id, offset, sub="*", sys_flag=0x4, suspend_ms=0, timeout_ms=5000):
    h = PullMessageRequestHeader(consumer_group="cg", topic=topic, queue_id=queue_id, queue_offset=offset,
                                 max_msg_nums=32, sys_flag=sys_flag, commit_offset=0,
                                 suspend_timeout_millis=suspend_ms, subscription=sub, sub_version=0)
    return client.invoke(cluster.broker_addr, RequestCode.PULL_MESSAGE, h.to_ext_fields(), timeout_ms=timeout_ms)


def test_send_auto_creates_topic_and_answers_like_a_4_9_8_broker(cluster, client):
    r = _send(client, cluster, "AutoTopic", b"hello", {"TAGS": "TagA", "KEYS": "k1 k2", "WAIT": "true"}, queue_id=2)
    assert r.code == ResponseCode.SUCCESS
    # the captured 4.9.8 answer carries exactly these ext fields
    captured = next(f for f in load_capture("java-producer") if f.get("request_code") == 310 and f["header"]["code"] == 0)
    assert set(r.ext_fields) == set(captured["header"]["extFields"])
    assert r.ext_fields["queueId"] == "2" and r.ext_fields["queueOffset"] == "0"
    host, port, offset = decode_offset_msg_id(r.ext_fields["msgId"])
    # the first record: at 0, or in DLedger mode behind the first entry's 48-byte header
    assert (f"{host}:{port}", offset) == (cluster.broker_addr, 48 if cluster.mode == "dledger" else 0)
    # the broker registers the new topic with a oneway REGISTER_BROKER, as Java does: poll the route
    routes = []

    def routed() -> bool:
        routes.append(client.invoke(cluster.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "AutoTopic"}))
        return routes[-1].code == ResponseCode.SUCCESS

    wait_until(routed, 10.0, "AutoTopic routed by the name server")
    assert b'"readQueueNums":4' in routes[-1].body


@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_REPLY_MESSAGE_V2])
def test_send_and_reply_to_a_blank_invalid_or_system_topic_are_refused(cluster, client, code):
    refusals = {"": (ResponseCode.SYSTEM_ERROR, "The specified topic is blank."),
                "bad topic!": (ResponseCode.SYSTEM_ERROR,
                               "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
                "t" * 128: (ResponseCode.SYSTEM_ERROR, "The specified topic is longer than topic max length."),
                "SCHEDULE_TOPIC_XXXX": (ResponseCode.NO_PERMISSION,
                                        "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden.")}
    for _ in range(2):  # again: the send path memoises the names it let through
        for topic, want in refusals.items():
            r = _send(client, cluster, topic, b"x", {}, code=code)
            assert (r.code, r.remark) == want, topic


def test_stored_message_keeps_body_tags_keys_and_adds_cluster_without_wait(cluster, client):
    _send(client, cluster, "T", b"payload", {"TAGS": "TagA", "KEYS": "a b", "WAIT": "true", "u": "v"})
    r = _pull(client, cluster, "T", 0, 0)
    assert r.code == ResponseCode.SUCCESS
    (m,) = decode_messages(r.body)
    assert (m.body, m.tags, m.keys, m.properties["u"]) == (b"payload", "TagA", ["a", "b"], "v")
    assert m.properties["CLUSTER"] == "DefaultCluster" and "WAIT" not in m.properties
    assert r.ext_fields == {"suggestWhichBrokerId": "0", "nextBeginOffset": "1", "minOffset": "0", "maxOffset": "1"}


def test_cpp_style_send_message_with_numeric_ext_values_is_stored(cluster, client):
    """Replay the C++ client's SEND_MESSAGE (10) header: JSON numbers and "false" strings."""
    frame = next(f for f in load_capture("cpp-client-producer") if f["header"]["code"] == 10)
    ext = dict(frame["header"]["extFields"])
    assert isinstance(ext["queueId"], int)  # the capture really has numbers
    ext["queueId"] = 0
    from rocketmq_sdk.remoting import RemotingCommand
    cmd = RemotingCommand.request(10, {}, b"cpp-body")
    cmd.ext_fields = ext  # as decoded from JSON: values may be ints
    import json
    raw = RemotingCommand.decode(_json_frame(json.dumps({"code": 10, "extFields": ext, "flag": 0, "language": "CPP",
                                                         "opaque": 77, "remark": "", "version": 63}), b"cpp-body"))
    r = client.invoke(cluster.broker_addr, 10, cmd=raw)
    assert r.code == ResponseCode.SUCCESS, r.remark
    r = _pull(client, cluster, ext["topic"], 0, 0)
    assert [m.body for m in decode_messages(r.body)] == [b"cpp-body"]


def _json_frame(header: str, body: bytes) -> bytes:
    hb = header.encode()
    return (len(hb)).to_bytes(4, "big") + hb + body


def test_batch_send_stores_each_message_with_consecutive_offsets(cluster, client):
    msgs = [Message("BatchT", f"m{i}".encode(), tags=f"t{i}", keys=f"k{i}") for i in range(3)]
    r = _send(client, cluster, "BatchT", encode_batch(msgs), {"WAIT": "true"}, code=RequestCode.SEND_BATCH_MESSAGE,
              batch=True)
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == "0"
    assert len(r.ext_fields["msgId"].split(",")) == 3
    got = decode_messages(_pull(client, cluster, "BatchT", 0, 0).body)
    assert [(m.body, m.tags, m.queue_offset) for m in got] == [(b"m0", "t0", 0), (b"m1", "t1", 1), (b"m2", "t2", 2)]


def test_pull_status_codes_follow_the_4_9_8_table(cluster, client):
    _send(client, cluster, "S", b"x", {"TAGS": "A"})
    assert _pull(client, cluster, "S", 0, 1).code == ResponseCode.PULL_NOT_FOUND  # offset == max
    moved = _pull(client, cluster, "S", 0, 5)
    assert moved.code == ResponseCode.PULL_OFFSET_MOVED and moved.ext_fields["nextBeginOffset"] == "1"
    assert _pull(client, cluster, "S", 1, 0).code == ResponseCode.PULL_NOT_FOUND  # empty queue, offset 0
    filtered = _pull(client, cluster, "S", 0, 0, sub="B")
    assert filtered.code == ResponseCode.PULL_RETRY_IMMEDIATELY and filtered.ext_fields["nextBeginOffset"] == "1"
    assert _pull(client, cluster, "NoSuchTopic", 0, 0).code == ResponseCode.TOPIC_NOT_EXIST
    assert _pull(client, cluster, "S", 99, 0).code == ResponseCode.SYSTEM_ERROR


def test_long_poll_is_answered_when_a_message_arrives(cluster, client):
    _send(client, cluster, "LP", b"first", {})
    fut = client.loop.call_soon_threadsafe  # noqa: F841 - keep the loop referenced
    import asyncio

    async def held_pull():
        from rocketmq_sdk.remoting import RemotingCommand
        h = PullMessageRequestHeader(consumer_group="cg", topic="LP", queue_id=0, queue_offset=1, max_msg_nums=32,
                                     sys_flag=0x2 | 0x4, commit_offset=0, suspend_timeout_millis=10_000,
                                     subscription="*", sub_version=0)
        t0 = time.monotonic()
        resp = await client.client.invoke(cluster.broker_addr, RemotingCommand.request(11, h.to_ext_fields()), 15_000)
        return resp, time.monotonic() - t0

    pending = asyncio.run_coroutine_threadsafe(held_pull(), client.loop)
    deadline = time.monotonic() + 5
    broker = cluster.broker
    while not broker.pull._held and time.monotonic() < deadline:  # the pull is parked
        time.sleep(0.01)
    assert broker.pull._held, "pull was not held"
    _send(client, cluster, "LP", b"second", {})
    resp, waited = pending.result(10)
    assert resp.code == ResponseCode.SUCCESS and [m.body for m in decode_messages(resp.body)] == [b"second"]
    assert waited < 5, f"held pull answered after {waited:.2f}s, not on arrival"


@pytest.mark.single_master  # a DLedger master answers the send after the majority commit, later than the arrival
def test_send_is_answered_before_the_held_pull_it_wakes(cluster, client):
    """A message that wakes a held pull: the broker answers the send first, then the pull (Java
    wakes held pulls from its reput thread, off the send's path), so a producer's round trip does
    not include serving the consumers' pulls. Both on one connection: the answers arrive in the
    order the broker wrote them."""
    import asyncio

    from rocketmq_sdk.remoting import RemotingCommand
    _send(client, cluster, "LPO", b"first", {})
    order: list[str] = []

    async def held_pull():
        h = PullMessageRequestHeader(consumer_group="cg", topic="LPO", queue_id=0, queue_offset=1, max_msg_nums=32,
                                     sys_flag=0x2 | 0x4, commit_offset=0, suspend_timeout_millis=10_000,
                                     subscription="*", sub_version=0)
        resp = await client.client.invoke(cluster.broker_addr, RemotingCommand.request(11, h.to_ext_fields()), 15_000)
        order.append("pull")
        return resp

    async def send():
        h = SendMessageRequestHeader(producer_group="pg", topic="LPO", default_topic="TBW102", default_topic_queue_nums=4,
                                     queue_id=0, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
                                     properties="", reconsume_times=0, unit_mode=False, batch=False)
        resp = await client.client.invoke(cluster.broker_addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2,
                                                                                    h.to_v2(), b"second"), 15_000)
        order.append("send")
        return resp

    pending = asyncio.run_coroutine_threadsafe(held_pull(), client.loop)
    wait_until(lambda: cluster.broker.pull._held, 5)
    sent = asyncio.run_coroutine_threadsafe(send(), client.loop)
    assert sent.result(10).code == ResponseCode.SUCCESS
    resp = pending.result(10)
    assert [m.body for m in decode_messages(resp.body)] == [b"second"]
    assert order == ["send", "pull"]


def test_long_poll_times_out_with_pull_not_found(cluster, client):
    t0 = time.monotonic()
    r = _pull(client, cluster, "TBW102", 0, 0, sys_flag=0x2 | 0x4, suspend_ms=300)
    assert r.code == ResponseCode.PULL_NOT_FOUND and 0.25 < time.monotonic() - t0 < 5


def test_oversized_body_and_illegal_topic_are_refused(cluster, client):
    big = _send(client, cluster, "Big", b"x" * (4 * 1024 * 1024 + 1), {})
    assert big.code == ResponseCode.MESSAGE_ILLEGAL
    bad = _send(client, cluster, "bad topic!", b"x", {})
    assert bad.code == ResponseCode.SYSTEM_ERROR
    forbidden = _send(client, cluster, "SCHEDULE_TOPIC_XXXX", b"x", {})
    assert forbidden.code == ResponseCode.NO_PERMISSION


def test_unknown_request_code_gets_request_code_not_supported(cluster, client):
    r = client.invoke(cluster.broker_addr, 9999)
    assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "9999" in r.remark


def test_sync_flush_broker_acknowledges_after_the_store_put(tmp_path, client):
    from rocketmq_broker.embedded import start_dev_cluster
    with start_dev_cluster(str(tmp_path / "s"), in_process=True, broker_config={"flush_disk_type": "SYNC_FLUSH"}) as c:
        r = _send(client, c, "SyncT", b"durable", {"WAIT": "true"})
        assert r.code == ResponseCode.SUCCESS
        wrote_end = int(r.ext_fields["queueOffset"]) + 1  # one record stored...
        assert wrote_end == 1 and c.broker.store.commit_log.flushed_where > 0  # ...and already fsynced
        assert [m.body for m in decode_messages(_pull(client, c, "SyncT", 0, 0).body)] == [b"durable"]


def test_a_suspended_pull_is_held_only_when_nothing_is_past_its_offset(cluster, client):
    """With the SUSPEND flag: a pull at the queue's end (or at 0 of an empty or unknown queue) is
    held and answered PULL_NOT_FOUND at its timeout; past the end or behind it, it is answered at
    once as without SUSPEND (PULL_OFFSET_MOVED / SUCCESS), never held."""
    for i in range(3):
        _send(client, cluster, "HOLD", f"m{i}".encode(), {})
    held, quick = 0x2 | 0x4, 0x4
    for queue_id, offset in [(0, 3), (1, 0), (3, 0)]:  # the end; an empty queue; a queue never written
        t0 = time.monotonic()
        r = _pull(client, cluster, "HOLD", queue_id, offset, sys_flag=held, suspend_ms=300)
        assert r.code == ResponseCode.PULL_NOT_FOUND and time.monotonic() - t0 >= 0.25, (queue_id, offset)
    for queue_id, offset, code, next_offset in [(0, 5, ResponseCode.PULL_OFFSET_MOVED, "3"),
                                                (1, 2, ResponseCode.PULL_OFFSET_MOVED, "0"),
                                                (0, 1, ResponseCode.SUCCESS, "3")]:
        t0 = time.monotonic()
        r = _pull(client, cluster, "HOLD", queue_id, offset, sys_flag=held, suspend_ms=10_000)
        assert (r.code, r.ext_fields["nextBeginOffset"]) == (code, next_offset), (queue_id, offset, r.remark)
        assert time.monotonic() - t0 < 5, "answered at once, not held"
        same = _pull(client, cluster, "HOLD", queue_id, offset, sys_flag=quick)
        assert (same.code, same.ext_fields) == (r.code, r.ext_fields)
    assert [m.body for m in decode_messages(r.body)] == [b"m1", b"m2"]
    assert not cluster.broker.pull._held


def test_each_pull_filters_by_its_own_header_subscription(cluster, client):
    """Header subscriptions are built once per expression and version: pulls of one group
    alternating two expressions each get their own filter."""
    _send(client, cluster, "SUBS", b"a", {"TAGS": "A"})
    for _ in range(2):
        for sub, code in [("A", ResponseCode.SUCCESS), ("B", ResponseCode.PULL_RETRY_IMMEDIATELY),
                          ("B || A", ResponseCode.SUCCESS), ("*", ResponseCode.SUCCESS)]:
            assert _pull(client, cluster, "SUBS", 0, 0, sub=sub).code == code, sub
