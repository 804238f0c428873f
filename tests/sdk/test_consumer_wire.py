"""PushConsumer requests on the wire and its failure paths, against the scripted fake broker."""

from __future__ import annotations

import json
import threading
import time

import pytest
from rocketmq_sdk import ConsumeConcurrentlyStatus, Message, Producer, PushConsumer
from rocketmq_sdk.consumer.consume_service import ConsumeMessageConcurrentlyService
from rocketmq_sdk.exceptions import ClientStateError, IllegalArgumentError
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode

from tests.consumer.helpers import Collector, wait_until

from .fakes import ScriptedCluster

FAST = {"suspend_timeout": 500, "pull_timeout": 3000}


@pytest.fixture
def cluster():
    with ScriptedCluster() as c:
        yield c


def _send(cluster, topic, n, **kw):
    with Producer("pg_feed", cluster.addr) as p:
        return [p.send(Message(topic, f"m{i}", **kw)).msg_id for i in range(n)]


def test_start_heartbeats_pulls_like_java_and_shutdown_persists_and_unregisters(cluster):
    ids = _send(cluster, "TopicW", 8, tags="TagA")
    first_request = len(cluster.requests)  # the feeding producer's requests (its heartbeat too) come before
    collector = Collector()
    consumer = PushConsumer("cg_wire", cluster.addr, instance_name="w1", **FAST)
    consumer.subscribe("TopicW", "TagA || TagB")
    consumer.register_message_listener(collector.listener("w1"))
    consumer.start()
    client_id = consumer.instance.client_id
    wait_until(lambda: collector.count() >= 8, what="8 messages")
    wait_until(lambda: any(r.ext_fields.get("sysFlag") == "3" for r in cluster.requests_of(RequestCode.PULL_MESSAGE)),
               what="a pull that commits an offset")
    consumer.shutdown()
    assert sorted(m.msg_id for _, m in collector.seen) == sorted(ids)

    codes = [r.code for r in cluster.requests[first_request:] if r.code in (105, 34, 38, 11)]
    # routes first, then the heartbeat, then the rebalance (consumer list) and pulls
    assert codes.index(34) > codes.index(105) and codes.index(38) > codes.index(34)
    assert codes.index(11) > codes.index(38)
    hb = next(h for r in cluster.requests_of(RequestCode.HEART_BEAT)
              if (h := json.loads(r.body))["clientID"] == client_id)
    assert hb["producerDataSet"] == []
    (cd,) = hb["consumerDataSet"]
    assert (cd["groupName"], cd["consumeType"], cd["messageModel"], cd["consumeFromWhere"]) == \
        ("cg_wire", "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET")
    subs = {s["topic"]: s for s in cd["subscriptionDataSet"]}
    assert subs["TopicW"]["tagsSet"] == ["TagA", "TagB"] and subs["TopicW"]["codeSet"] == [2598919, 2598920]
    assert subs["%RETRY%cg_wire"]["subString"] == "*"

    pulls = [r.ext_fields for r in cluster.requests_of(RequestCode.PULL_MESSAGE) if r.ext_fields["topic"] == "TopicW"]
    first = next(p for p in pulls if p["queueOffset"] == "0")
    assert {k: first[k] for k in ("sysFlag", "commitOffset", "maxMsgNums", "suspendTimeoutMillis",
                                  "expressionType", "bname")} == \
        {"sysFlag": "2", "commitOffset": "0", "maxMsgNums": "32", "suspendTimeoutMillis": "500",
         "expressionType": "TAG", "bname": "fake-broker"}
    assert "subscription" not in first and first["subVersion"] == str(subs["TopicW"]["subVersion"])
    later = [p for p in pulls if p["sysFlag"] == "3"]
    assert all(int(p["commitOffset"]) <= int(p["queueOffset"]) for p in later)
    # shutdown: offsets persisted (every queue at its end), then UNREGISTER_CLIENT
    assert {q: cluster.offsets[("cg_wire", "TopicW", q)] for q in range(4)} == {0: 2, 1: 2, 2: 2, 3: 2}
    (unreg,) = cluster.requests_of(RequestCode.UNREGISTER_CLIENT)[-1:]
    assert unreg.ext_fields == {"clientID": client_id, "consumerGroup": "cg_wire"}


def test_messages_with_other_tags_are_filtered_on_the_client(cluster):
    # the fake broker does no tag filtering at all: the client must drop TagC by exact tag
    _send(cluster, "TopicF", 4, tags="TagC")
    ids = _send(cluster, "TopicF", 4, tags="TagA")
    collector = Collector()
    consumer = PushConsumer("cg_filter", cluster.addr, instance_name="f1", **FAST)
    consumer.subscribe("TopicF", "TagA")
    consumer.register_message_listener(collector.listener("f1"))
    consumer.start()
    try:
        wait_until(lambda: collector.count() >= 4, what="4 TagA messages")
        wait_until(lambda: all(consumer.offset_store.read_memory(mq) == 2 for mq in consumer.process_queues()
                               if mq.topic == "TopicF"), what="offsets past the filtered messages")
    finally:
        consumer.shutdown()
    assert sorted(m.msg_id for _, m in collector.seen) == sorted(ids)


def test_send_back_header_and_local_reconsume_when_send_back_fails(cluster, monkeypatch):
    monkeypatch.setattr(ConsumeMessageConcurrentlyService, "resubmit_delay_s", 0.1)
    (mid,) = _send(cluster, "TopicB", 1, tags="T")
    cluster.send_back_code = ResponseCode.SYSTEM_ERROR
    attempts = []

    def listener(msgs, ctx):
        attempts.extend((m.msg_id, m.reconsume_times, m.topic) for m in msgs)
        if len(attempts) < 3:
            raise ValueError("not yet")
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cg_back", cluster.addr, instance_name="b1", **FAST)
    consumer.subscribe("TopicB", "*")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        wait_until(lambda: len(attempts) >= 3, what="3 attempts")
        mq = next(mq for mq in consumer.process_queues()
                  if mq.topic == "TopicB" and consumer.process_queues()[mq].queue_offset_max >= 0)
        wait_until(lambda: consumer.offset_store.read_memory(mq) == 1, what="the offset after success")
    finally:
        consumer.shutdown()
    # the message was never lost: consumed again locally, counting the attempts
    assert attempts == [(mid, 0, "TopicB"), (mid, 1, "TopicB"), (mid, 2, "TopicB")]
    backs = [r.ext_fields for r in cluster.requests_of(RequestCode.CONSUMER_SEND_MSG_BACK)]
    assert len(backs) == 2
    assert {k: backs[0][k] for k in ("group", "delayLevel", "originMsgId", "originTopic", "maxReconsumeTimes",
                                     "unitMode", "bname")} == \
        {"group": "cg_back", "delayLevel": "0", "originMsgId": mid, "originTopic": "TopicB",
         "maxReconsumeTimes": "16", "unitMode": "false", "bname": "fake-broker"}
    assert int(backs[0]["offset"]) == cluster.stored("TopicB")[0].commit_log_offset


def test_shutdown_waits_for_running_listeners_and_commits_their_offsets(cluster):
    _send(cluster, "TopicS", 1)
    started, release = threading.Event(), threading.Event()

    def slow(msgs, ctx):
        started.set()
        release.wait(5)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cg_slow", cluster.addr, instance_name="s1", **FAST)
    consumer.subscribe("TopicS", "*")
    consumer.register_message_listener(slow)
    consumer.start()
    assert started.wait(5)
    threading.Timer(0.2, release.set).start()
    t0 = time.monotonic()
    consumer.shutdown()
    assert time.monotonic() - t0 >= 0.15  # it waited for the listener
    stored = cluster.stored("TopicS")[0]
    assert cluster.offsets[("cg_slow", "TopicS", stored.queue_id)] == 1


def test_consumer_argument_and_state_errors(cluster):
    with pytest.raises(IllegalArgumentError):
        PushConsumer("bad group")
    with pytest.raises(IllegalArgumentError):
        PushConsumer("cg", cluster.addr, message_model="NOPE")
    consumer = PushConsumer("cg_state", cluster.addr)
    with pytest.raises(ClientStateError, match="listener"):
        consumer.start()
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    with pytest.raises(ClientStateError, match="subscribe"):
        consumer.start()
    consumer.shutdown()  # never started: harmless


def test_illegal_offset_moves_the_queue_to_the_broker_offset(cluster):
    _send(cluster, "TopicI", 4)  # one old message per queue
    for q in range(4):
        cluster.offsets[("cg_illegal", "TopicI", q)] = 100  # beyond the end of every queue
    collector = Collector()
    consumer = PushConsumer("cg_illegal", cluster.addr, instance_name="i1", rebalance_interval=200, **FAST)
    consumer.subscribe("TopicI", "*")
    consumer.register_message_listener(collector.listener("i1"))
    consumer.start()
    try:
        wait_until(lambda: all(cluster.offsets[("cg_illegal", "TopicI", q)] == 1 for q in range(4)),
                   what="offsets moved to the queue ends")
        wait_until(lambda: len([mq for mq in consumer.process_queues() if mq.topic == "TopicI"]) == 4,
                   what="queues taken again")
        ids = _send(cluster, "TopicI", 4)
        wait_until(lambda: collector.count() >= 4, what="the 4 new messages")
    finally:
        consumer.shutdown()
    assert sorted(m.msg_id for _, m in collector.seen) == sorted(ids)  # old ones skipped, as Java


def test_a_dead_name_server_is_skipped(cluster):
    with Producer("pg_ns", f"127.0.0.1:1;{cluster.addr}", connect_timeout=500) as producer:
        for _ in range(3):
            assert producer.send(Message("TopicNS", b"x")).send_status.value == "SEND_OK"
        assert producer.instance.api.namesrv.chosen == cluster.addr


def test_send_to_an_explicit_queue(cluster):
    with Producer("pg_mq", cluster.addr) as producer:
        mqs = producer.fetch_publish_queues("TopicQ")
        assert [mq.queue_id for mq in mqs] == [0, 1, 2, 3]
        r = producer.send(Message("TopicQ", b"x"), mq=mqs[3])
    assert r.message_queue == mqs[3] and cluster.stored("TopicQ")[0].queue_id == 3


def test_routes_are_refreshed_periodically(cluster):
    with Producer("pg_poll", cluster.addr, poll_name_server_interval=50) as producer:
        producer.send(Message("TopicP", b"x"))
        wait_until(lambda: len([r for r in cluster.requests_of(RequestCode.GET_ROUTEINFO_BY_TOPIC)
                                if r.ext_fields["topic"] == "TopicP"]) >= 3, what="route refreshes")


def test_pulling_pauses_while_the_queue_holds_too_many_messages(cluster):
    with Producer("pg_flow", cluster.addr) as p:
        mq = p.fetch_publish_queues("TopicFlow")[0]
        for i in range(40):
            p.send(Message("TopicFlow", f"m{i}"), mq=mq)
    release = threading.Event()
    cached: list[int] = []
    consumer = PushConsumer("cg_flow", cluster.addr, instance_name="fl", pull_threshold_for_queue=5,
                            pull_batch_size=4, consume_thread_max=1, consume_thread_min=1, **FAST)

    def listener(msgs, ctx):
        pq = consumer.process_queues().get(ctx.message_queue)
        cached.append(pq.msg_count if pq else 0)
        release.wait(5)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.subscribe("TopicFlow", "*")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        pq = next(q for m, q in consumer.process_queues().items() if m.queue_id == mq.queue_id
                  and m.topic == "TopicFlow")
        # pulls of 4 continue while at most 5 are cached: 4, 8, then the loop waits
        wait_until(lambda: pq.msg_count == 8, what="8 cached messages")
        release.set()
        wait_until(lambda: len(cached) >= 40, what="all 40 consumed")
    finally:
        release.set()
        consumer.shutdown()
    assert max(cached) <= 5 + 4


def test_broker_can_ask_the_consumer_for_its_running_info(cluster):
    from rocketmq_sdk.protocol import ConsumerRunningInfo
    from rocketmq_sdk.remoting import RemotingCommand

    _send(cluster, "TopicRI", 4)
    collector = Collector()
    consumer = PushConsumer("cg_info", cluster.addr, instance_name="ri", **FAST)
    consumer.subscribe("TopicRI", "*")
    consumer.register_message_listener(collector.listener("ri"))
    consumer.start()
    try:
        wait_until(lambda: collector.count() >= 4, what="4 messages")
        wait_until(lambda: len(cluster.server.channels) == 1, what="the producer's connection closed")

        async def ask(group):
            (channel,) = cluster.server.channels
            cmd = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO,
                                          {"consumerGroup": group, "clientId": consumer.instance.client_id,
                                           "jstackEnable": "false"})
            return await channel.invoke(cmd, 3000)

        ok = cluster.loop.run(ask("cg_info"), 5)
        missing = cluster.loop.run(ask("nobody"), 5)
    finally:
        consumer.shutdown()
    assert ok.code == ResponseCode.SUCCESS
    info = ConsumerRunningInfo.from_json(ok.body)
    assert info.properties["consumeFromWhere"] == "CONSUME_FROM_LAST_OFFSET"
    assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY" and info.properties["pullBatchSize"] == "32"
    assert {s.topic for s in info.subscription_set} == {"TopicRI", "%RETRY%cg_info"}
    rows = {mq.queue_id: row for mq, row in info.mq_table.items() if mq.topic == "TopicRI"}
    assert sorted(rows) == [0, 1, 2, 3] and all(r["commitOffset"] == 1 and not r["droped"] for r in rows.values())
    assert missing.code == ResponseCode.SYSTEM_ERROR and "nobody" in missing.remark
