"""Request-reply (Java 4.9 ``DefaultMQProducer.request``) against the in-process reference broker:
a PushConsumer answers with ``create_reply_message``; the broker pushes the reply to the
requester with PUSH_REPLY_MESSAGE_TO_CLIENT (326)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
import zlib

import pytest
from rocketmq_sdk import ConsumeConcurrentlyStatus, Message, Producer, PushConsumer
from rocketmq_sdk.admin.client import AdminClient
from rocketmq_sdk.config import ProducerConfig
from rocketmq_sdk.exceptions import (
    ClientStateError,
    IllegalArgumentError,
    MQBrokerError,
    RequestTimeoutError,
    TopicNotExistError,
)
from rocketmq_sdk.producer import request as rr
from rocketmq_sdk.producer.prepare import MessagePreparer
from rocketmq_sdk.protocol.bodies import HeartbeatData
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.codes import MessageSysFlag, RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import ReplyMessageRequestHeader
from rocketmq_sdk.protocol.message import MessageExt, MessageQueue
from rocketmq_sdk.protocol.message_codec import decode_properties, encode_properties
from rocketmq_sdk.remoting import EventLoopThread, RemotingClient, RemotingCommand

from .conftest import stored_count, unique, wait_until

REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"
FAST = {"suspend_timeout": 1000, "pull_timeout": 4000, "rebalance_interval": 500,
        "persist_consumer_offset_interval": 300, "consume_from_where": "CONSUME_FROM_FIRST_OFFSET"}


class CodeRecorder:
    """RPC hook recording the request codes a client sends."""

    def __init__(self) -> None:
        self.codes: list[int] = []

    def before_request(self, addr: str, cmd: RemotingCommand) -> None:
        self.codes.append(cmd.code)

    def after_response(self, addr: str, cmd: RemotingCommand, resp: RemotingCommand) -> None:
        pass


def _create_topic(namesrv: str, topic: str) -> None:
    with AdminClient(namesrv) as admin:
        admin.create_topic(topic, cluster="DefaultCluster", read_queue_nums=4, write_queue_nums=4)

        def routed() -> bool:
            try:
                return bool(admin.topic_route(topic).queue_datas)
            except TopicNotExistError:
                return False

        wait_until(routed, what=f"route of {topic}")


@pytest.fixture(scope="module")
def env(cluster):
    """Topic ``topic`` answered by a PushConsumer that replies ``echo:<body>`` through its own
    producer (whose request codes are recorded); ``silent`` has no consumer."""
    topic, silent = unique("RR"), unique("RRSilent")
    _create_topic(cluster.namesrv_addr, topic)
    _create_topic(cluster.namesrv_addr, silent)
    recorder = CodeRecorder()
    replier = Producer(unique("rr_replier_pg"), cluster.namesrv_addr, instance_name="rr-replier",
                       rpc_hooks=[recorder])
    replier.start()
    seen: list[MessageExt] = []
    lock = threading.Lock()

    def listener(msgs, ctx):
        for m in msgs:
            with lock:
                seen.append(m)
            replier.reply(m, b"echo:" + m.body)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(unique("rr_cg"), cluster.namesrv_addr, instance_name="rr-consumer", **FAST)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    requester = Producer(unique("rr_requester_pg"), cluster.namesrv_addr, instance_name="rr-requester")
    requester.start()
    # the consumer owns every queue before the first request is sent
    wait_until(lambda: len({mq for mq, pq in consumer.process_queues().items()
                            if mq.topic == topic and not pq.dropped}) == 4, what="rebalance")
    yield {"topic": topic, "silent": silent, "requester": requester, "replier": replier, "seen": seen,
           "recorder": recorder, "consumer": consumer}
    requester.shutdown()
    consumer.shutdown()
    replier.shutdown()


def test_request_returns_the_reply_of_a_push_consumer(env, cluster):
    stored_before = stored_count(cluster.broker, REPLY_TOPIC, 1)
    req = Message(env["topic"], b"ping")
    reply = env["requester"].request(req, 10_000)
    assert reply.body == b"echo:ping"
    assert reply.topic == REPLY_TOPIC
    assert reply.get_property(MC.CORRELATION_ID) == req.get_property(MC.CORRELATION_ID)
    assert reply.get_property(MC.MESSAGE_TYPE) == "reply"
    assert reply.get_property(MC.MESSAGE_REPLY_TO_CLIENT) == env["requester"].instance.client_id
    assert reply.get_property(MC.MESSAGE_TTL) == "10000"
    assert int(reply.get_property(MC.REPLY_MESSAGE_ARRIVE_TIME)) >= int(reply.get_property(MC.PUSH_REPLY_TIME))
    # the request carried the three properties (and the broker's CLUSTER) to the consumer
    got = [m for m in env["seen"] if m.get_property(MC.CORRELATION_ID) == req.get_property(MC.CORRELATION_ID)]
    assert len(got) == 1 and got[0].get_property(MC.CLUSTER) == "DefaultCluster"
    assert got[0].get_property(MC.MESSAGE_TYPE) is None  # Java marks only the reply
    # storeReplyMessageEnable (default true): the broker kept a copy of the reply
    wait_until(lambda: stored_count(cluster.broker, REPLY_TOPIC, 1) == stored_before + 1, what="stored reply")
    assert rr.pending_request_count() == 0


def test_reply_goes_out_as_send_reply_message_v2(env):
    recorder: CodeRecorder = env["recorder"]
    recorder.codes.clear()
    env["requester"].request(Message(env["topic"], b"code"), 10_000)
    sends = [c for c in recorder.codes if c in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2,
                                                 RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2)]
    assert sends == [RequestCode.SEND_REPLY_MESSAGE_V2]
    # the same producer's normal sends are unchanged
    recorder.codes.clear()
    env["replier"].send(Message(env["silent"], b"plain"))
    assert RequestCode.SEND_MESSAGE_V2 in recorder.codes and RequestCode.SEND_REPLY_MESSAGE_V2 not in recorder.codes


def test_request_times_out_when_nobody_replies(env):
    started = time.monotonic()
    with pytest.raises(RequestTimeoutError) as info:
        env["requester"].request(Message(env["silent"], b"anyone?"), 400)
    elapsed = time.monotonic() - started
    assert 0.35 <= elapsed < 3.0
    assert info.value.sent is True and info.value.topic == env["silent"]
    assert isinstance(info.value, TimeoutError)
    assert rr.pending_request_count() == 0


def test_request_async_times_out_and_calls_back(env):
    called: list = []
    done = threading.Event()

    def callback(reply, error):
        called.append((reply, error))
        done.set()

    fut = env["requester"].request_async(Message(env["silent"], b"async anyone?"), 300, callback=callback)
    with pytest.raises(RequestTimeoutError):
        fut.result(5)
    assert done.wait(5)
    assert called[0][0] is None and isinstance(called[0][1], RequestTimeoutError)
    wait_until(lambda: rr.pending_request_count() == 0, 2, "table cleaned")


def test_shutdown_fails_requests_still_waiting(env, cluster):
    errors: list = []
    done = threading.Event()
    producer = Producer(unique("rr_short_pg"), cluster.namesrv_addr, instance_name="rr-short")
    producer.start()
    stored = stored_count(cluster.broker, env["silent"])
    fut = producer.request_async(Message(env["silent"], b"never answered"), 60_000,
                                 callback=lambda reply, error: (errors.append(error), done.set()))
    wait_until(lambda: stored_count(cluster.broker, env["silent"]) > stored, 10, "request stored")
    started = time.monotonic()
    producer.shutdown()
    with pytest.raises(ClientStateError, match="shut down"):
        fut.result(5)
    assert time.monotonic() - started < 5
    assert done.wait(5) and isinstance(errors[0], ClientStateError)
    wait_until(lambda: rr.pending_request_count() == 0, 2, "table cleaned")


def test_concurrent_requests_get_their_own_replies(env):
    requester = env["requester"]
    n = 24
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        sync = list(pool.map(lambda i: requester.request(Message(env["topic"], f"s{i}"), 15_000).body, range(n)))
    assert sync == [f"echo:s{i}".encode() for i in range(n)]
    futs = [requester.request_async(Message(env["topic"], f"a{i}"), 15_000) for i in range(n)]
    assert [f.result(20).body for f in futs] == [f"echo:a{i}".encode() for i in range(n)]
    assert rr.pending_request_count() == 0


def test_request_to_the_queue_a_selector_or_mq_picks(env):
    requester, topic = env["requester"], env["topic"]
    req = Message(topic, b"q2")
    assert requester.request(req, 10_000, lambda mqs, msg, arg: mqs[arg], 2).body == b"echo:q2"
    req3 = Message(topic, b"q3")
    assert requester.request(req3, 10_000, mq=MessageQueue(topic, "broker-a", 3)).body == b"echo:q3"
    fut = requester.request_async(Message(topic, b"q1"), 10_000, mq=MessageQueue(topic, "broker-a", 1))
    assert fut.result(15).body == b"echo:q1"
    queue_of = {m.body: m.queue_id for m in env["seen"]}
    assert (queue_of[b"q2"], queue_of[b"q3"], queue_of[b"q1"]) == (2, 3, 1)


def test_arequest_from_asyncio(env):
    async def main():
        return await asyncio.gather(*(env["requester"].arequest(Message(env["topic"], f"x{i}"), 15_000)
                                      for i in range(5)))

    replies = asyncio.run(main())
    assert [r.body for r in replies] == [f"echo:x{i}".encode() for i in range(5)]


def test_reply_to_an_unknown_client_is_a_system_error(env):
    req = Message(env["topic"], b"x")
    for name, value in ((MC.CLUSTER, "DefaultCluster"), (MC.CORRELATION_ID, "c-1"),
                        (MC.MESSAGE_REPLY_TO_CLIENT, "10.0.0.1@gone"), (MC.MESSAGE_TTL, "3000")):
        req.put_property(name, value)
    with pytest.raises(MQBrokerError) as info:
        env["replier"].reply(req, b"late")
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert "channel of <10.0.0.1@gone> not found" in info.value.remark


def test_push_reply_frame_fields(cluster):
    """A fake requester (heartbeat as producer with client id ``fake@1``) receives the 326 frame:
    every ReplyMessageRequestHeader field Java sends, the body, PUSH_REPLY_TIME; the replier's
    324 (long header names) and 325 (V2) requests both get SUCCESS with the stored msgId."""
    loop_thread = EventLoopThread(name="rr-fake")
    fake, replier = RemotingClient(), RemotingClient()
    pushed: list[RemotingCommand] = []

    def on_push(ch, cmd):
        pushed.append(cmd)
        return cmd.response(ResponseCode.SUCCESS)

    fake.register_processor(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, on_push)
    addr = cluster.broker_addr
    try:
        hb = RemotingCommand.request(RequestCode.HEART_BEAT, None, HeartbeatData("fake@1", ["fake_pg"]).to_json())
        assert loop_thread.run(fake.invoke(addr, hb, 3000), 5).code == ResponseCode.SUCCESS
        props = {MC.CORRELATION_ID: "corr-1", MC.MESSAGE_REPLY_TO_CLIENT: "fake@1", MC.MESSAGE_TTL: "3000",
                 MC.MESSAGE_TYPE: "reply", "color": "blue"}
        body = zlib.compress(b"reply body")
        v1 = {"producerGroup": "replier_pg", "topic": REPLY_TOPIC, "defaultTopic": "TBW102",
              "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": str(MessageSysFlag.COMPRESSED),
              "bornTimestamp": "1700000000123", "flag": "7", "properties": encode_properties(props),
              "reconsumeTimes": "0", "unitMode": "false"}
        v2 = {"a": "replier_pg", "b": REPLY_TOPIC, "c": "TBW102", "d": "4", "e": "0",
              "f": str(MessageSysFlag.COMPRESSED), "g": "1700000000123", "h": "7", "i": encode_properties(props),
              "j": "0", "k": "false", "m": "false"}
        for code, ext in ((RequestCode.SEND_REPLY_MESSAGE, v1), (RequestCode.SEND_REPLY_MESSAGE_V2, v2)):
            resp = loop_thread.run(replier.invoke(addr, RemotingCommand.request(code, ext, body), 5000), 10)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            assert resp.ext_fields["queueId"] == "0" and len(resp.ext_fields["msgId"]) == 32
        assert len(pushed) == 2
        replier_local = loop_thread.run(replier.get_channel(addr), 5).local_addr
        for cmd in pushed:
            assert cmd.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT and not cmd.is_oneway
            ext = cmd.ext_fields
            assert {k: ext[k] for k in ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums",
                                        "queueId", "sysFlag", "bornTimestamp", "flag", "reconsumeTimes",
                                        "unitMode")} == {
                "producerGroup": "replier_pg", "topic": REPLY_TOPIC, "defaultTopic": "TBW102",
                "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": str(MessageSysFlag.COMPRESSED),
                "bornTimestamp": "1700000000123", "flag": "7", "reconsumeTimes": "0", "unitMode": "false"}
            assert ext["bornHost"] == replier_local
            assert ext["storeHost"] == addr
            assert abs(int(ext["storeTimestamp"]) - time.time() * 1000) < 60_000
            assert ext["properties"].startswith(MC.PUSH_REPLY_TIME + "\x01")  # first, as 4.9.8
            pushed_props = decode_properties(ext["properties"])
            assert int(pushed_props.pop(MC.PUSH_REPLY_TIME)) > 0
            assert pushed_props == props
            assert cmd.body == body
        # the SDK's 326 processor reads that frame back into the reply message
        msg = rr.decode_reply_message(pushed[1], 42)
        assert (msg.body, msg.flag, msg.topic, msg.born_host, msg.store_host) == (
            b"reply body", 7, REPLY_TOPIC, replier_local, addr)
        assert msg.get_property(MC.REPLY_MESSAGE_ARRIVE_TIME) == "42" and msg.get_property("color") == "blue"
        assert rr.decode_reply_message(RemotingCommand.request(326, dict(pushed[0].ext_fields, bornHost="/1.2.3.4:5"),
                                                               b"x")).born_host == "1.2.3.4:5"
    finally:
        loop_thread.run(fake.close(), 5)
        loop_thread.run(replier.close(), 5)
        loop_thread.stop()


def test_create_reply_message_copies_the_request_properties():
    req = MessageExt(topic="T", body=b"q", properties={
        MC.CLUSTER: "C1", MC.CORRELATION_ID: "id-1", MC.MESSAGE_REPLY_TO_CLIENT: "1.2.3.4@x", MC.MESSAGE_TTL: "500",
        "user": "u"})
    reply = rr.create_reply_message(req, "answer")
    assert reply.topic == "C1_REPLY_TOPIC" and reply.body == b"answer"
    assert {k: reply.get_property(k) for k in (MC.MESSAGE_TYPE, MC.CORRELATION_ID, MC.MESSAGE_REPLY_TO_CLIENT,
                                               MC.MESSAGE_TTL)} == {
        MC.MESSAGE_TYPE: "reply", MC.CORRELATION_ID: "id-1", MC.MESSAGE_REPLY_TO_CLIENT: "1.2.3.4@x",
        MC.MESSAGE_TTL: "500"}
    assert reply.get_property("user") is None
    assert reply.get_property(MC.WAIT_STORE_MSG_OK) is None  # a bare Java Message: no WAIT
    with pytest.raises(IllegalArgumentError, match="CLUSTER"):
        rr.create_reply_message(Message("T", b"q"), b"a")


def test_unmatched_reply_is_acknowledged_and_dropped(caplog):
    ext = ReplyMessageRequestHeader(topic=REPLY_TOPIC, queue_id=0, sys_flag=0, born_timestamp=1, flag=0,
                                    properties=encode_properties({MC.CORRELATION_ID: "nobody"}),
                                    born_host="/1.1.1.1:5", store_host="/2.2.2.2:6",
                                    store_timestamp=3).to_ext_fields()
    cmd = RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, ext, b"b")
    with caplog.at_level("WARNING", logger="rocketmq_sdk.producer.request"):
        resp = rr.receive_reply_message(None, cmd)
    assert resp.code == ResponseCode.SUCCESS
    assert "not matched any request, CorrelationId: nobody" in caplog.text


# -- against the Java 4.9.8 capture (tests/data/captures/java-request-reply.jsonl) -----------------

def _capture() -> dict[int, dict]:
    from tests.conftest import load_capture

    return {row["seq"]: row for row in load_capture("java-request-reply")}


def _body(row: dict) -> bytes:
    import base64

    return base64.b64decode(row.get("body_b64", ""))


def test_reply_request_matches_the_java_capture():
    """The SDK's reply to the captured request is the 325 frame Java's replier sent: same
    header keys, same properties (but the fresh UNIQ_KEY), no WAIT."""
    rows = _capture()
    request_ext, java_reply = rows[65]["header"]["extFields"], rows[71]
    req = MessageExt(topic=request_ext["b"], body=_body(rows[65]), properties={
        **decode_properties(request_ext["i"]), MC.CLUSTER: "DefaultCluster"})
    # what Producer("cap_reply_producer_group") prepares (nothing is sent)
    preparer = MessagePreparer("cap_reply_producer_group", ProducerConfig.from_kwargs(namesrv_addr="127.0.0.1:9"))
    prepared = preparer.prepare(rr.create_reply_message(req, _body(java_reply)))
    java_ext = java_reply["header"]["extFields"]
    assert prepared.code == java_reply["code"] == RequestCode.SEND_REPLY_MESSAGE_V2
    assert set(prepared.ext) | {"n"} == set(java_ext)  # "n" (broker name) is added per queue
    assert {k: prepared.ext[k] for k in "abcdfhjkm"} == {k: java_ext[k] for k in "abcdfhjkm"}
    ours, java = decode_properties(prepared.ext["i"]), decode_properties(java_ext["i"])
    assert ours.pop(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) and java.pop(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    assert ours == java
    assert prepared.body == _body(java_reply)


def test_broker_pushes_the_reply_as_the_java_broker_did(cluster):
    """The captured requester heartbeat and replier 325 request replayed into the reference
    broker: its 326 push has the captured header (hosts, times aside) and body, and its answer
    to the replier has the captured fields."""
    rows = _capture()
    loop_thread = EventLoopThread(name="rr-capture")
    requester, replier = RemotingClient(), RemotingClient()
    pushed: list[RemotingCommand] = []
    requester.register_processor(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT,
                                 lambda ch, cmd: pushed.append(cmd) or cmd.response(ResponseCode.SUCCESS))
    addr = cluster.broker_addr
    try:
        hb = RemotingCommand.request(RequestCode.HEART_BEAT, None, _body(rows[58]))
        assert loop_thread.run(requester.invoke(addr, hb, 3000), 5).code == ResponseCode.SUCCESS
        java_send = rows[71]
        cmd = RemotingCommand.request(java_send["code"], dict(java_send["header"]["extFields"]), _body(java_send))
        resp = loop_thread.run(replier.invoke(addr, cmd, 5000), 10)
        java_resp = rows[76]["header"]
        assert resp.code == java_resp["code"] and set(resp.ext_fields) == set(java_resp["extFields"])
        assert len(pushed) == 1
        ours, java = pushed[0].ext_fields, rows[72]["header"]["extFields"]
        assert set(ours) == set(java)
        volatile = {"bornHost", "storeHost", "storeTimestamp", "properties"}
        assert {k: v for k, v in ours.items() if k not in volatile} == \
               {k: v for k, v in java.items() if k not in volatile}
        ours_props, java_props = decode_properties(ours["properties"]), decode_properties(java["properties"])
        assert list(ours_props)[0] == list(java_props)[0] == MC.PUSH_REPLY_TIME
        ours_props.pop(MC.PUSH_REPLY_TIME), java_props.pop(MC.PUSH_REPLY_TIME)
        assert ours_props == java_props
        assert ours["storeHost"] == addr and ours["bornHost"].startswith("127.0.0.1:")
        assert pushed[0].body == _body(rows[72])
    finally:
        loop_thread.run(requester.close(), 5)
        loop_thread.run(replier.close(), 5)
        loop_thread.stop()


def test_sdk_completes_the_request_from_the_java_push():
    """The captured 326 frame completes the waiting request; the answer is a bare SUCCESS."""
    rows = _capture()
    push = rows[72]
    props = decode_properties(push["header"]["extFields"]["properties"])
    waiter = rr.RequestResponseFuture(props[MC.CORRELATION_ID], "CapRequestTopic", 10_000)
    rr.register_request(waiter)
    cmd = RemotingCommand.request(push["code"], dict(push["header"]["extFields"]), _body(push))
    resp = rr.receive_reply_message(None, cmd)
    assert resp.code == rows[73]["header"]["code"] == ResponseCode.SUCCESS and not resp.ext_fields
    reply = waiter.future.result(0)
    assert reply.body == b"reply to request 0" and reply.born_host == "127.0.0.1:52534"
    assert reply.store_host == "127.0.0.1:10911" and reply.store_timestamp == 1795335163478
    assert {k: v for k, v in reply.properties.items() if k != MC.REPLY_MESSAGE_ARRIVE_TIME} == props
    assert rr.pending_request_count() == 0
