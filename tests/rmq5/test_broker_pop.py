"""The reference broker as a 5.x broker: POP_MESSAGE / ACK_MESSAGE / BATCH_ACK_MESSAGE /
CHANGE_MESSAGE_INVISIBLETIME with 5.3.3's header grammar, revive into the POP retry topic,
orderly POP and long polling (../shared/docs/rocketmq5-remoting.md §5)."""

from __future__ import annotations

import asyncio
import time

from rocketmq_sdk import Message
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.message_codec import decode_messages
from rocketmq_sdk.protocol.pop import (
    BatchAck,
    ReceiptHandle,
    attach_handles,
    encode_batch_ack_body,
    parse_offset_infos,
    parse_order_count_info,
)
from rocketmq_sdk.remoting import RemotingCommand

from tests.rmq5.conftest import V4, broker_of

TOPIC, GROUP = "PopTopic", "pop_group"


TOO_LATE = "the broker received the request too late"


def _pop(client, addr, *, max_n=32, invisible=60000, poll=0, queue_id=-1, order=False, exp="*", topic=TOPIC,
         group=GROUP, timeout_ms=5000, born_ms=None):
    """One POP_MESSAGE, sent again (at most 5 times, with a new ``bornTime``) when the broker refuses
    it as arrived too late: like 5.x (``isTimeoutTooMuch``) the broker refuses a request that reached
    it more than ``pollTime`` + 500 ms after its ``bornTime``, which a loaded test machine (or the
    connect of a test's first request) can cause; that refusal is tested on its own
    (``test_a_pop_that_reaches_the_broker_too_late_is_refused``), the other tests need the pop."""
    for _ in range(5):
        ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "maxMsgNums": str(max_n),
               "invisibleTime": str(invisible), "pollTime": str(poll),
               "bornTime": str(int(time.time() * 1000) if born_ms is None else born_ms),
               "initMode": "0", "expType": "TAG", "exp": exp, "order": str(order).lower(), "bname": "broker-a"}
        resp = client.invoke(addr, RequestCode.POP_MESSAGE, ext, timeout_ms=timeout_ms)
        if born_ms is not None or not (resp.code == ResponseCode.POLLING_TIMEOUT and resp.remark == TOO_LATE):
            return resp
    return resp


def _handles(resp):
    """(message, receipt handle) pairs built the way a 5.x client builds them."""
    msgs = attach_handles(decode_messages(resp.body), resp.ext_fields, "broker-a")
    return [(m, ReceiptHandle.parse(m.receipt_handle)) for m in msgs]


def _ack(client, addr, m, handle, group=GROUP):
    ext = {"consumerGroup": group, "topic": handle.topic_for_ack(group, TOPIC), "queueId": str(handle.queue_id),
           "offset": str(handle.queue_offset), "extraInfo": str(handle), "bname": "broker-a"}
    return client.invoke(addr, RequestCode.ACK_MESSAGE, ext)


def _send(producer, n, topic=TOPIC, tags="TagA"):
    for i in range(n):
        producer.send(Message(topic, f"body-{i}".encode(), tags=tags, keys=f"k{i}"))


def test_pop_answers_with_5x_header_grammar_and_ack_removes(v5_cluster, v5_client, v5_producer):
    _send(v5_producer, 6)
    addr = v5_cluster.broker_addr
    resp = _pop(v5_client, addr, max_n=32, invisible=60000)
    assert resp.code == ResponseCode.SUCCESS and resp.remark == "FOUND"
    h = resp.ext_fields
    msgs = _handles(resp)
    assert sorted(m.body for m, _ in msgs) == sorted(f"body-{i}".encode() for i in range(6))
    assert h["invisibleTime"] == "60000" and h["restNum"] == "0" and int(h["reviveQid"]) in range(8)
    offsets = parse_offset_infos(h["msgOffsetInfo"])
    assert sum(len(v) for v in offsets.values()) == 6 and all(k[0] == 0 for k in offsets)
    # nothing left to pop while they are invisible
    assert _pop(v5_client, addr).code == ResponseCode.POLLING_TIMEOUT
    for m, handle in msgs:
        assert _ack(v5_client, addr, m, handle).code == ResponseCode.SUCCESS
    assert broker_of(v5_cluster).pop.service.in_flight(GROUP) == 0


def test_unacked_message_is_revived_into_retry_topic_with_reconsume_times(v5_cluster, v5_client, v5_producer):
    _send(v5_producer, 1)
    addr = v5_cluster.broker_addr
    # taken before the pop: the broker's pop time (the start of the 300 ms) is after it, while the
    # time the answer reaches the test is not a bound (the answer may take longer than the wake-up)
    popped_at = time.monotonic()
    first = _handles(_pop(v5_client, addr, invisible=300))
    assert len(first) == 1
    deadline = popped_at + 10
    while True:
        resp = _pop(v5_client, addr, poll=1000, invisible=60000)
        if resp.code == ResponseCode.SUCCESS:
            break
        assert time.monotonic() < deadline, "un-acked message never came back"
    again = _handles(resp)
    # never before its invisible time (less the 1 ms the broker's millisecond clock truncates)
    assert time.monotonic() - popped_at >= 0.299
    (m, handle), = again
    assert m.body == b"body-0" and m.topic == TOPIC and m.reconsume_times == 1
    assert handle.retry_flag == 1 and m.properties["1ST_POP_TIME"] == str(first[0][1].pop_time)
    assert _ack(v5_client, addr, m, handle).code == ResponseCode.SUCCESS
    assert broker_of(v5_cluster).pop.service.in_flight(GROUP) == 0


def test_a_pop_that_reaches_the_broker_too_late_is_refused(v5_cluster, v5_client, v5_producer):
    """5.x ``isTimeoutTooMuch``: born more than pollTime + 500 ms ago -> POLLING_TIMEOUT, nothing popped."""
    _send(v5_producer, 1)
    addr = v5_cluster.broker_addr
    late = _pop(v5_client, addr, poll=1000, born_ms=int(time.time() * 1000) - 1600)
    assert (late.code, late.remark) == (ResponseCode.POLLING_TIMEOUT, TOO_LATE)
    assert broker_of(v5_cluster).pop.service.in_flight(GROUP) == 0
    assert [m.body for m, _ in _handles(_pop(v5_client, addr))] == [b"body-0"]  # still there


def test_change_invisible_time_gives_new_handle_and_old_ack_is_harmless(v5_cluster, v5_client, v5_producer):
    _send(v5_producer, 1)
    addr = v5_cluster.broker_addr
    (m, handle), = _handles(_pop(v5_client, addr, invisible=60000))
    ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(handle.queue_id), "offset": str(m.queue_offset),
           "extraInfo": str(handle), "invisibleTime": "300", "bname": "broker-a"}
    resp = v5_client.invoke(addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, ext)
    assert resp.code == ResponseCode.SUCCESS and resp.remark == "not set any response code"
    assert resp.ext_fields["invisibleTime"] == "300"
    assert _ack(v5_client, addr, m, handle).code == ResponseCode.SUCCESS  # old handle: no effect
    resp = _pop(v5_client, addr, poll=3000)
    assert resp.code == ResponseCode.SUCCESS  # came back after 300 ms, not 60 s
    assert [x.body for x, _ in _handles(resp)] == [b"body-0"]


def test_batch_ack_and_bad_requests(v5_cluster, v5_client, v5_producer):
    _send(v5_producer, 3)
    addr = v5_cluster.broker_addr
    resp = _pop(v5_client, addr, queue_id=-1)
    msgs = _handles(resp)
    acks = {}
    for m, h in msgs:
        acks.setdefault((h.queue_id, h.ck_offset), []).append(m.queue_offset)
    body = encode_batch_ack_body([BatchAck(GROUP, TOPIC, 0, q, so, msgs[0][1].revive_qid, msgs[0][1].pop_time,
                                           60000, offs) for (q, so), offs in acks.items()], "broker-a")
    assert v5_client.invoke(addr, RequestCode.BATCH_ACK_MESSAGE, body=body).code == ResponseCode.SUCCESS
    assert broker_of(v5_cluster).pop.service.in_flight(GROUP) == 0
    assert _pop(v5_client, addr, max_n=33).code == ResponseCode.INVALID_PARAMETER
    assert _pop(v5_client, addr, invisible=0).code == ResponseCode.INVALID_PARAMETER
    assert _pop(v5_client, addr, topic="NoSuchPopTopic").code == ResponseCode.TOPIC_NOT_EXIST
    m, h = msgs[0]
    bad = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(h.queue_id), "offset": "999",
           "extraInfo": str(h), "bname": "broker-a"}
    resp = v5_client.invoke(addr, RequestCode.ACK_MESSAGE, bad)
    assert resp.code == ResponseCode.NO_MESSAGE and "offset is illegal" in resp.remark
    bad.update(offset=str(m.queue_offset), extraInfo="garbage")
    assert v5_client.invoke(addr, RequestCode.ACK_MESSAGE, bad).code == ResponseCode.INVALID_PARAMETER


def test_long_polling_pop_is_woken_by_a_send(v5_cluster, v5_client, v5_producer):
    _send(v5_producer, 1)  # creates the topic
    addr = v5_cluster.broker_addr
    for m, h in _handles(_pop(v5_client, addr)):
        _ack(v5_client, addr, m, h)
    ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1", "maxMsgNums": "8", "invisibleTime": "60000",
           "pollTime": "15000", "bornTime": str(int(time.time() * 1000)), "initMode": "0", "expType": "TAG",
           "exp": "*", "order": "false"}
    pending = asyncio.run_coroutine_threadsafe(
        v5_client.client.invoke(addr, RemotingCommand.request(RequestCode.POP_MESSAGE, ext), 20000), v5_client.loop)
    deadline = time.monotonic() + 10
    while broker_of(v5_cluster).pop.held_count(TOPIC, GROUP) == 0:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    sent = time.monotonic()
    v5_producer.send(Message(TOPIC, b"wake-up"))
    resp = pending.result(10)
    assert resp.code == ResponseCode.SUCCESS and time.monotonic() - sent < 5
    assert resp.version == 479  # a held request is answered as 5.3.3 too
    assert [m.body for m in decode_messages(resp.body)] == [b"wake-up"]


def test_order_pop_blocks_queue_until_acked_and_redelivers_with_counts(v5_cluster, v5_client, v5_producer):
    for i in range(4):
        v5_producer.send(Message(TOPIC, f"o{i}".encode()), lambda mqs, msg, arg: mqs[0], None)
    addr = v5_cluster.broker_addr
    first = _pop(v5_client, addr, queue_id=0, max_n=2, invisible=400, order=True)
    assert first.code == ResponseCode.SUCCESS and first.ext_fields["reviveQid"] == "999"
    assert first.ext_fields["orderCountInfo"] == "0 0 0"
    assert [m.body for m, _ in _handles(first)] == [b"o0", b"o1"]
    assert _pop(v5_client, addr, queue_id=0, max_n=2, order=True).code == ResponseCode.POLLING_TIMEOUT  # blocked
    # not acked: after 400 ms the same messages again, from the same queue, delivery count 1
    again = _pop(v5_client, addr, queue_id=0, max_n=2, order=True, poll=3000)
    assert again.code == ResponseCode.SUCCESS
    per_queue, per_msg = parse_order_count_info(again.ext_fields["orderCountInfo"])
    assert per_queue == {(0, 0): 1} and per_msg == {(0, 0, 0): 1, (0, 0, 1): 1}
    for m, h in _handles(again):
        assert _ack(v5_client, addr, m, h).code == ResponseCode.SUCCESS
    nxt = _pop(v5_client, addr, queue_id=0, max_n=2, order=True)
    assert [m.body for m, _ in _handles(nxt)] == [b"o2", b"o3"]


def test_checkpoints_survive_a_broker_restart(tmp_path, v5_client):
    from rocketmq_broker.embedded import start_dev_cluster
    from rocketmq_sdk import Producer
    cfg = {"broker_version": "5.3.3", "revive_interval": 100, "pop_from_retry_probability": 0}
    store = str(tmp_path / "store")
    c = start_dev_cluster(store, in_process=True, broker_config=cfg)
    try:
        p = Producer("pop_restart_producer", namesrv_addr=c.namesrv_addr)
        p.start()
        p.send(Message(TOPIC, b"survivor"))
        p.shutdown()
        assert len(_handles(_pop(v5_client, c.broker_addr, invisible=1000))) == 1
    finally:
        c.stop()
    c = start_dev_cluster(store, in_process=True, broker_config=cfg)
    try:
        deadline = time.monotonic() + 10
        while True:
            resp = _pop(v5_client, c.broker_addr, poll=1000)
            if resp.code == ResponseCode.SUCCESS:
                break
            assert time.monotonic() < deadline, "popped message lost across the restart"
        assert [m.body for m, _ in _handles(resp)] == [b"survivor"]
    finally:
        c.stop()


def test_broker_4x_does_not_know_pop(tmp_path, v5_client):
    from rocketmq_broker.embedded import start_dev_cluster
    with start_dev_cluster(str(tmp_path / "store4"), in_process=True, broker_config=V4) as c:  # brokerVersion 4.9.8
        assert _pop(v5_client, c.broker_addr).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


def test_change_in_the_same_millisecond_as_the_pop_keeps_the_message(v5_cluster, v5_producer):
    """The new checkpoint of a CHANGE_MESSAGE_INVISIBLETIME made in the pop's own millisecond
    used to replace the pop's checkpoint (same key) and was then dropped by the ack of the old
    handle: the message was never revived."""
    _send(v5_producer, 2)
    svc = broker_of(v5_cluster).pop.service
    now = int(time.time() * 1000)

    def on_loop(fn):
        async def run():
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), v5_cluster._loop).result(5)

    res = on_loop(lambda: svc.pop(GROUP, TOPIC, -1, 32, 60000, now_ms=now))
    first = min(res.handles, key=lambda h: (h.queue_id, h.queue_offset))
    assert first.ck_offset == first.queue_offset  # the first of its checkpoint: same key as a new one
    on_loop(lambda: svc.change_invisible_time(GROUP, TOPIC, first, 1000, now_ms=now))
    assert svc.in_flight(GROUP) == 2
    assert on_loop(lambda: svc.revive(now_ms=now + 1500)) == 1


def test_notification_and_polling_info(v5_cluster, v5_client, v5_producer):
    _send(v5_producer, 1)
    addr = v5_cluster.broker_addr
    ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1", "pollTime": "0",
           "bornTime": str(int(time.time() * 1000)), "order": "false"}
    resp = v5_client.invoke(addr, RequestCode.NOTIFICATION, ext)
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["hasMsg"] == "true"
    for m, h in _handles(_pop(v5_client, addr)):
        _ack(v5_client, addr, m, h)
    # nothing left: a held NOTIFICATION, counted by POLLING_INFO, answered by the next send
    held = asyncio.run_coroutine_threadsafe(v5_client.client.invoke(addr, RemotingCommand.request(
        RequestCode.NOTIFICATION, dict(ext, pollTime="10000")), 15000), v5_client.loop)
    info = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1"}
    deadline = time.monotonic() + 10
    while v5_client.invoke(addr, RequestCode.POLLING_INFO, info).ext_fields["pollingNum"] != "1":
        assert time.monotonic() < deadline
    v5_producer.send(Message(TOPIC, b"now"))
    resp = held.result(10)
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["hasMsg"] == "true"
