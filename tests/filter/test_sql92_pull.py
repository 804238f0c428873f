"""SQL92 property filtering over the wire: a reference broker with ``enablePropertyFilter=true``
delivers only the messages whose properties satisfy the consumer's expression (push and pull
consumers, held long polls), and answers the error codes Java's broker does."""

from __future__ import annotations

import threading
import time

import pytest
from rocketmq_sdk import Message, MessageSelector, Producer, PullConsumer, PullStatus, PushConsumer
from rocketmq_sdk.consumer import ConsumeConcurrentlyStatus
from rocketmq_sdk.exceptions import MQBrokerError, MQError
from rocketmq_sdk.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from rocketmq_sdk.protocol.codes import PullSysFlag, ResponseCode
from rocketmq_sdk.protocol.headers import PullMessageRequestHeader
from rocketmq_sdk.protocol.message import MessageQueue

from tests.consumer.helpers import FAST, owned, unique, wait_until

embedded = pytest.importorskip("rocketmq_broker.embedded")

#: (a, b, c, tag) per message; body is f"m{i}"
ROWS = [(0, "x", "1", "TagA"), (3, "y", None, "TagB"), (6, "x", None, "TagA"), (7, "z", "2", "TagC"),
        (9, "x", "3", "TagB"), (None, "x", None, "TagA"), (12, "y", "4", "TagA"), (5, None, None, "TagC")]


@pytest.fixture(scope="module", params=["1m", "dledger"])
def cluster(request):
    """A broker, or the master of a DLedger group of three (issue 27: filters on DLedger)."""
    # no periodic re-check of held pulls here (it would answer the held pull of
    # test_held_pull_is_woken_only_by_a_matching_message; test_held_pull_recheck covers it)
    config = {"enable_property_filter": True, "pull_hold_check_interval": 600_000}
    with embedded.start_dev_cluster(in_process=True, broker_config=config, cluster=request.param) as c:
        yield c


@pytest.fixture(scope="module")
def producer(cluster):
    with Producer(unique("pg"), cluster.namesrv_addr) as p:
        yield p


def _message(topic: str, i: int) -> Message:
    a, b, c, tag = ROWS[i]
    props = {k: str(v) for k, v in (("a", a), ("b", b), ("c", c)) if v is not None}
    return Message(topic, f"m{i}".encode(), tags=tag, properties=props)


@pytest.fixture(scope="module")
def rows_topic(cluster, producer):
    """A topic holding the ROWS messages (spread over its queues)."""
    topic = unique("TopicSqlRows")
    for i in range(len(ROWS)):
        producer.send(_message(topic, i))
    _wait_routable(cluster, topic)
    return topic


def _wait_routable(cluster, topic: str) -> None:
    """Wait until the name server lists the auto-created ``topic`` (registered "soon")."""
    with PullConsumer(unique("cgroute"), cluster.namesrv_addr) as probe:
        def listed() -> bool:
            try:
                return bool(probe.fetch_subscribe_message_queues(topic))
            except MQError:
                return False
        wait_until(listed, timeout_s=10, what=f"a route for {topic}")


def _pull_all(consumer: PullConsumer, topic: str, selector) -> list[bytes]:
    got: list[bytes] = []
    for mq in consumer.fetch_subscribe_message_queues(topic):
        offset = 0
        while True:
            result = consumer.pull(mq, selector, offset, 32)
            if result.pull_status is PullStatus.FOUND:
                got.extend(m.body for m in result.msg_found_list)
            if result.pull_status is PullStatus.NO_NEW_MSG or result.next_begin_offset == offset:
                break
            offset = result.next_begin_offset
    return sorted(got)


def _expected(pred) -> list[bytes]:
    return sorted(f"m{i}".encode() for i, row in enumerate(ROWS) if pred(*row))


@pytest.mark.parametrize(("sql", "pred"), [
    ("a > 5 AND b = 'x'", lambda a, b, c, t: a is not None and a > 5 and b == "x"),
    ("NOT (a > 5)", lambda a, b, c, t: a is not None and not a > 5),
    ("b IN ('y', 'z')", lambda a, b, c, t: b in ("y", "z")),
    ("b NOT IN ('y', 'z')", lambda a, b, c, t: b is not None and b not in ("y", "z")),
    ("a BETWEEN 3 AND 7", lambda a, b, c, t: a is not None and 3 <= a <= 7),
    ("a NOT BETWEEN 3 AND 7", lambda a, b, c, t: a is not None and not 3 <= a <= 7),
    ("c IS NULL", lambda a, b, c, t: c is None),
    ("c IS NOT NULL AND a < 10", lambda a, b, c, t: c is not None and a is not None and a < 10),
    ("TAGS = 'TagA' OR TAGS IN ('TagC')", lambda a, b, c, t: t in ("TagA", "TagC")),
    ("a > 100", lambda a, b, c, t: False),
])
def test_pull_consumer_gets_exactly_the_matching_messages(cluster, rows_topic, sql, pred):
    with PullConsumer(unique("cgpull"), cluster.namesrv_addr) as consumer:
        assert _pull_all(consumer, rows_topic, MessageSelector.by_sql(sql)) == _expected(pred)


def test_push_consumer_with_sql_selector_receives_exactly_the_matching_messages(cluster, producer):
    topic, group = unique("TopicSqlPush"), unique("cgpush")
    producer.send(Message(topic, b"create", properties={"a": "0"}))
    lock = threading.Lock()
    got: list[bytes] = []

    def listener(msgs, ctx):
        with lock:
            got.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = PushConsumer(group, cluster.namesrv_addr, instance_name="sqlpush", **FAST)
    c.subscribe(topic, MessageSelector.by_sql("a > 5 AND b = 'x'"))
    c.register_message_listener(listener)
    c.start()
    try:
        wait_until(lambda: len(owned(c, topic)) == 4, what="queues")
        for i in range(len(ROWS)):
            producer.send(_message(topic, i))
        expected = _expected(lambda a, b, cc, t: a is not None and a > 5 and b == "x")
        wait_until(lambda: len(got) >= len(expected), what="the matching messages")
        # every queue's offset reaches its max: the non-matching messages were skipped, not pending
        broker = cluster.broker
        wait_until(lambda: all(broker.offsets.query(group, topic, q) == broker.store.get_max_offset_in_queue(topic, q)
                               for q in range(4)), what="offsets past the filtered messages")
    finally:
        c.shutdown()
    assert sorted(got) == expected


def _raw_pull(consumer, *, topic: str, group: str, sys_flag: int, subscription: str | None = None,
              expression_type: str = "SQL92", offset: int = 0, suspend_ms: int = 0, sub_version: int = 0,
              timeout_ms: int = 5000):
    inst = consumer.instance
    header = PullMessageRequestHeader(consumer_group=group, topic=topic, queue_id=0, queue_offset=offset,
                                      max_msg_nums=32, sys_flag=sys_flag, commit_offset=0,
                                      suspend_timeout_millis=suspend_ms, subscription=subscription,
                                      sub_version=sub_version, expression_type=expression_type)
    addr = inst.find_broker_master("broker-a")
    return inst.run(inst.api.pull_message(addr, header, timeout_ms), timeout_ms / 1000 + 2)


@pytest.fixture
def wire(cluster):
    """A started PullConsumer used only for its client instance (raw PULL_MESSAGE requests)."""
    with PullConsumer(unique("cgwire"), cluster.namesrv_addr) as consumer:
        consumer.fetch_subscribe_message_queues("TBW102")  # learns the broker address
        yield consumer


def test_held_pull_is_woken_only_by_a_matching_message(cluster, producer, wire):
    topic, group = unique("TopicSqlHold"), unique("cghold")
    sent = producer.send(Message(topic, b"first", properties={"a": "1"}))
    mq0 = MessageQueue(topic, sent.message_queue.broker_name, 0)  # the name server may not list it yet
    first = producer.send(Message(topic, b"seed", properties={"a": "1"}), mq=mq0)
    start = first.queue_offset + 1
    broker = cluster.broker
    out: dict = {}

    def held_pull():
        out["result"] = _raw_pull(wire, topic=topic, group=group, subscription="a > 5",
                                  sys_flag=PullSysFlag.build(False, True, True), offset=start, suspend_ms=10_000,
                                  timeout_ms=15_000)
        out["at"] = time.monotonic()

    t = threading.Thread(target=held_pull, daemon=True)
    t.start()
    wait_until(lambda: broker.pull._held.get((topic, 0)), what="the pull to be held")
    producer.send(Message(topic, b"small", properties={"a": "2"}), mq=mq0)  # does not match
    wait_until(lambda: broker.store.get_max_offset_in_queue(topic, 0) == start + 1, what="the stored message")
    # the arrival was dispatched (the in-process broker notifies on its loop); still held
    wait_until(lambda: broker.pull.loop is not None, what="loop")
    done = threading.Event()
    broker.pull.loop.call_soon_threadsafe(done.set)
    assert done.wait(5)
    assert "result" not in out and broker.pull._held.get((topic, 0)), "a non-matching message woke the pull"
    producer.send(Message(topic, b"big", properties={"a": "9"}), mq=mq0)
    t.join(10)
    result = out["result"]
    assert result.pull_status is PullStatus.FOUND
    assert [m.body for m in result.msg_found_list] == [b"big"]
    assert result.next_begin_offset == start + 2


def test_invalid_expression_in_pull_header_is_subscription_parse_failed(cluster, rows_topic, wire):
    with pytest.raises(MQBrokerError) as info:
        _raw_pull(wire, topic=rows_topic, group=unique("cgbad"), subscription="a > AND",
                  sys_flag=PullSysFlag.build(False, False, True))
    assert info.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert info.value.remark == "parse the consumer's subscription failed"


def test_disabled_property_filter_answers_system_error(cluster, rows_topic, wire):
    broker = cluster.broker
    broker.config.enable_property_filter = False
    try:
        with pytest.raises(MQBrokerError) as info:
            _raw_pull(wire, topic=rows_topic, group=unique("cgoff"), subscription="a > 1",
                      sys_flag=PullSysFlag.build(False, False, True))
    finally:
        broker.config.enable_property_filter = True
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert info.value.remark == "The broker does not support consumer to filter message by SQL92"


def test_push_consumer_start_is_refused_for_a_bad_expression_or_a_broker_without_filtering(cluster, producer):
    """Java's checkClientInBroker (CHECK_CLIENT_CONFIG, 46) at start."""
    topic = unique("TopicSqlCheck")
    producer.send(Message(topic, b"x", properties={"a": "1"}))
    _wait_routable(cluster, topic)  # the check goes to a broker of the topic's route

    def start(sql: str) -> MQBrokerError:
        c = PushConsumer(unique("cgcheck"), cluster.namesrv_addr, instance_name=unique("check"), **FAST)
        c.subscribe(topic, MessageSelector.by_sql(sql))
        c.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
        with pytest.raises(MQBrokerError) as info:
            c.start()
        return info.value

    err = start("a >")
    assert err.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "SQL92 expression 'a >'" in err.remark
    broker = cluster.broker
    broker.config.enable_property_filter = False
    try:
        err = start("a > 1")
    finally:
        broker.config.enable_property_filter = True
    assert err.code == ResponseCode.SYSTEM_ERROR
    assert err.remark == "The broker does not support consumer to filter message by SQL92"


def test_heartbeat_with_invalid_expression_leaves_no_filter_data(cluster, producer, wire):
    """Java accepts the heartbeat but registers no filter: the group's pulls get
    FILTER_DATA_NOT_EXIST (27) until a newer subscription compiles."""
    topic, group = unique("TopicSqlBadHb"), unique("cgbadhb")
    producer.send(Message(topic, b"x", properties={"a": "1"}))
    inst = wire.instance
    addr = inst.find_broker_master("broker-a")
    broker = cluster.broker

    def heartbeat(sql: str, version: int) -> None:
        sub = SubscriptionData.build(topic, sql, version, "SQL92")
        inst.run(inst.api.send_heartbeat(addr, HeartbeatData("badhb@1", consumers=[ConsumerData(group, subscriptions=[sub])])), 5)

    heartbeat("a >", 100)
    assert broker.consumers.groups[group].subscriptions[topic].sub_string == "a >"
    with pytest.raises(MQBrokerError) as info:
        _raw_pull(wire, topic=topic, group=group, sys_flag=PullSysFlag.build(False, False, False), sub_version=100)
    assert info.value.code == ResponseCode.FILTER_DATA_NOT_EXIST
    assert info.value.remark == "The broker's consumer filter data is not exist!Your expression may be wrong!"
    heartbeat("a >= 1", 101)  # a newer, valid subscription: registered, the group's pulls filter
    result = _raw_pull(wire, topic=topic, group=group, sys_flag=PullSysFlag.build(False, False, False),
                       sub_version=101)
    assert result.pull_status in (PullStatus.FOUND, PullStatus.NO_NEW_MSG)
    heartbeat("a >= 1", 102)  # same expression, newer version: only the version moves
    assert broker.consumers.filters.get(topic, group).client_version == 102
    inst.run(inst.api.unregister_client(addr, "badhb@1", consumer_group=group), 5)
    assert broker.consumers.filters.get(topic, group).dead  # the group left: kept dead, as Java
