"""Message traces written by the SDK's producer and push consumer to the reference broker, read
back as mqadmin/the dashboard do (QUERY_MESSAGE on the trace topic with key = msgId) and decoded
with the Java-format decoder."""

from __future__ import annotations

import threading

import pytest
from rocketmq_broker import embedded
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.consumer import ConsumeConcurrentlyStatus, PushConsumer
from rocketmq_sdk.producer import Producer
from rocketmq_sdk.protocol.message import Message
from rocketmq_sdk.trace import TraceType, build_trace_graph, decode_trace_text, query_trace

from tests.conftest import wait_until

TOPIC = "TraceE2E"


@pytest.fixture(scope="module")
def cluster():
    with embedded.start_cluster(("broker-a",)) as c:
        with AdminClient(c.namesrv_addr) as adm:
            adm.create_topic(TOPIC, cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        yield c


def _records(adm: AdminClient, msg_id: str, topic: str = "RMQ_SYS_TRACE_TOPIC"):
    try:
        return query_trace(adm, msg_id, topic)
    except Exception:  # the trace topic does not exist until the first trace message
        return []


def test_producer_and_consumer_traces_round_trip(cluster) -> None:
    addr = cluster.addr("broker-a")
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def listener(msgs, ctx):
        with lock:
            for m in msgs:
                seen[m.msg_id] = seen.get(m.msg_id, 0) + 1
                if "fail-once" in m.keys and seen[m.msg_id] == 1:
                    ctx.delay_level_when_next_consume = 1
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("trace_cg", cluster.namesrv_addr, enable_msg_trace=True,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    with Producer("trace_pg", cluster.namesrv_addr, enable_msg_trace=True) as producer:
        plain = producer.send(Message(TOPIC, b"hello", tags="TagA", keys=["order-1", "order-2"]))
        big = producer.send(Message(TOPIC, b"x" * 6000))  # compressed on the wire
        retry = producer.send(Message(TOPIC, b"retry me", keys="fail-once"))
        producer.send_oneway(Message(TOPIC, b"oneway", keys="oneway-1"))
        consumer.start()
        try:
            with AdminClient(cluster.namesrv_addr) as adm:
                wait_until(lambda: len(_records(adm, retry.msg_id)) >= 5, 30, "Pub + two deliveries of the retried message")
                wait_until(lambda: len(_records(adm, plain.msg_id)) >= 3, 15, "Pub + SubBefore + SubAfter")
                pub, before, after = _records(adm, plain.msg_id)[:3]
                big_pub = next(r for r in _records(adm, big.msg_id) if r.type is TraceType.Pub)
                retried = _records(adm, retry.msg_id)
                trace_msgs = adm.query_message_by_key("RMQ_SYS_TRACE_TOPIC", plain.msg_id)
        finally:
            consumer.shutdown()

    assert pub.type is TraceType.Pub
    assert (pub.group_name, pub.topic, pub.msg_id, pub.offset_msg_id) == ("trace_pg", TOPIC, plain.msg_id,
                                                                        plain.offset_msg_id)
    assert (pub.tags, pub.keys, pub.store_host, pub.body_length, pub.msg_type, pub.success) == (
        "TagA", "order-1 order-2", addr, 5, 0, True)
    assert pub.region_id == "DefaultRegion" and pub.cost_time >= 0 and pub.time_stamp > 0
    assert big_pub.body_length < 6000 and (big_pub.tags, big_pub.keys) == ("null", "null")

    assert before.type is TraceType.SubBefore and after.type is TraceType.SubAfter
    assert before.request_id == after.request_id and before.request_id
    assert (before.group_name, before.msg_id, before.retry_times, before.keys) == ("trace_cg", plain.msg_id, 0,
                                                                                  "order-1 order-2")
    assert (after.group_name, after.msg_id, after.success, after.context_code) == ("trace_cg", plain.msg_id,
                                                                                  True, 0)
    assert after.time_stamp >= before.time_stamp

    # the retried message: failed once (contextCode 4 = FAILED), then succeeded with retryTimes 1
    graph = build_trace_graph(retry.msg_id, retried)
    deliveries = graph.consumers["trace_cg"]
    assert [(n.status, n.retry_times, n.context_code) for n in deliveries] == [("FAILED", 0, 4), ("SUCCESS", 1, 0)]
    assert graph.producer is not None and graph.producer.msg_id == retry.msg_id

    # the trace message itself: KEYS hold the msgIds and business keys of its records, no tags
    tm = trace_msgs[0]
    records = decode_trace_text(tm.body.decode("utf-8"))
    assert plain.msg_id in tm.keys and "order-1" in tm.keys
    assert {r.msg_id for r in records} <= set(tm.keys)
    assert tm.tags is None


def test_oneway_send_has_no_pub_and_custom_topic(cluster) -> None:
    with Producer("trace_pg2", cluster.namesrv_addr, enable_msg_trace=True,
                  customized_trace_topic="MyTraceTopic") as producer:
        sync = producer.send(Message(TOPIC, b"a", keys="custom-1"))
        producer.send_oneway(Message(TOPIC, b"b", keys="custom-2"))
        assert producer.trace_dispatcher is not None and producer.trace_dispatcher.flush(10)
    with AdminClient(cluster.namesrv_addr) as adm:
        wait_until(lambda: _records(adm, sync.msg_id, "MyTraceTopic"), 15, "the Pub in the custom topic")
        (pub,) = _records(adm, sync.msg_id, "MyTraceTopic")
        assert pub.type is TraceType.Pub and pub.group_name == "trace_pg2"
        keys = {k for m in adm.query_message_by_key("MyTraceTopic", "custom-1") for k in m.keys}
        assert "custom-2" not in keys  # the oneway send wrote no record


def test_transaction_traces_half_pub_and_end_transaction_records() -> None:
    """A half message gets a ``Pub`` with msgType 1; each end gets an ``EndTransaction`` record
    (msgType 2, the state's Java name), also the end that answers a broker check."""
    from rocketmq_sdk.producer import LocalTransactionState, TransactionListener, TransactionProducer

    class Listener(TransactionListener):
        def execute_local_transaction(self, msg, arg):
            return {"commit": LocalTransactionState.COMMIT_MESSAGE, "rollback": LocalTransactionState.ROLLBACK_MESSAGE,
                    "check": LocalTransactionState.UNKNOW}[arg]

        def check_local_transaction(self, msg):
            return LocalTransactionState.COMMIT_MESSAGE

    cfg = {"transaction_check_interval": 200, "transaction_time_out": 300}
    with embedded.start_cluster(("broker-a",), broker_config=cfg) as c:
        with AdminClient(c.namesrv_addr) as adm:
            adm.create_topic(TOPIC, cluster="DefaultCluster", read_queue_nums=1, write_queue_nums=1)
            with TransactionProducer("trace_tx_pg", c.namesrv_addr, listener=Listener(), enable_msg_trace=True) as p:
                results = {arg: p.send_message_in_transaction(Message(TOPIC, arg.encode(), tags="TagTx", keys=f"tx-{arg}"),
                                                              arg) for arg in ("commit", "rollback", "check")}

                def ends(arg: str) -> list:
                    return [r for r in _records(adm, results[arg].msg_id) if r.type is TraceType.EndTransaction]

                # the broker checks again every transaction_check_interval until the check's end is
                # stored, so a loaded machine may see two or more check answers: wait for at least one
                wait_until(lambda: len(ends("check")) >= 2, 30, "the UNKNOW end and the end after the check")
                wait_until(lambda: ends("commit") and ends("rollback"), 15, "the commit and rollback records")
                pubs = [r for r in _records(adm, results["commit"].msg_id) if r.type is TraceType.Pub]
                found = {arg: ends(arg) for arg in results}
    assert [(p.msg_type, p.tags, p.keys) for p in pubs] == [(1, "TagTx", "tx-commit")]
    addr = c.addr("broker-a")
    (commit,) = found["commit"]
    assert (commit.group_name, commit.topic, commit.msg_type, commit.transaction_state,
            commit.from_transaction_check, commit.store_host) == ("trace_tx_pg", TOPIC, 2, "COMMIT_MESSAGE", False, addr)
    assert commit.transaction_id == commit.msg_id == results["commit"].msg_id
    assert (commit.tags, commit.keys, commit.region_id) == ("TagTx", "tx-commit", "DefaultRegion")
    assert [e.transaction_state for e in found["rollback"]] == ["ROLLBACK_MESSAGE"]
    checked = sorted((e.transaction_state, e.from_transaction_check) for e in found["check"])
    assert checked[-1] == ("UNKNOW", False)
    assert checked[:-1] and set(checked[:-1]) == {("COMMIT_MESSAGE", True)}
