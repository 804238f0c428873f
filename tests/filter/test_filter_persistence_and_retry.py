"""SQL92 filter data kept across a broker restart (Java ``ConsumerFilterManager``'s
``config/consumerFilter.json``) and applied to retry messages with ``filterSupportRetry``
(Java ``ExpressionForRetryMessageFilter``)."""

from __future__ import annotations

import json
import os

import pytest
from rocketmq_sdk import Message, Producer, PullConsumer, PullStatus
from rocketmq_sdk.exceptions import MQBrokerError
from rocketmq_sdk.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from rocketmq_sdk.protocol.codes import MessageConst, PullSysFlag, ResponseCode, retry_topic
from rocketmq_sdk.protocol.message import MessageQueue

from tests.consumer.helpers import unique
from tests.filter.test_sql92_pull import _raw_pull

embedded = pytest.importorskip("rocketmq_broker.embedded")

SQL = "a > 5"
VERSION = 100
FROM_HEARTBEAT = PullSysFlag.build(False, False, False)  # the group's heartbeat subscription
FROM_HEADER = PullSysFlag.build(False, False, True)  # the subscription carried by the pull


def _wire(cluster) -> PullConsumer:
    """A started PullConsumer used for its client instance (raw heartbeats and pulls)."""
    consumer = PullConsumer(unique("cgwire"), cluster.namesrv_addr)
    consumer.start()
    consumer.fetch_subscribe_message_queues("TBW102")  # learns the broker address
    return consumer


def _heartbeat(wire: PullConsumer, group: str, topic: str) -> None:
    """``group`` subscribes ``topic`` with SQL and its retry topic with ``*`` (as a push consumer)."""
    inst = wire.instance
    subs = [SubscriptionData.build(topic, SQL, VERSION, "SQL92"), SubscriptionData.build(retry_topic(group), "*", VERSION)]
    hb = HeartbeatData(f"{group}@1", consumers=[ConsumerData(group, subscriptions=subs)])
    inst.run(inst.api.send_heartbeat(inst.find_broker_master("broker-a"), hb), 5)


def _store_messages(producer: Producer, group: str, topic: str) -> None:
    """Queue 0 of ``topic``: a=1 "low", a=9 "high"; queue 0 of the group's retry topic: the same
    two as retries of ``topic`` plus a=1 "other" retried from a topic without a filter."""
    for body, a in ((b"low", "1"), (b"high", "9")):
        producer.send(Message(topic, body, properties={"a": a}), mq=MessageQueue(topic, "broker-a", 0))
    rq = MessageQueue(retry_topic(group), "broker-a", 0)
    for body, a, origin in ((b"low", "1", topic), (b"high", "9", topic), (b"other", "1", "TopicNoFilter")):
        retry = Message(rq.topic, body, properties={"a": a})
        retry.put_property(MessageConst.RETRY_TOPIC, origin)  # as the broker's send-back sets it
        producer.send(retry, mq=rq)


def _stored_and_subscribed(cluster, group: str, topic: str) -> PullConsumer:
    """:func:`_store_messages` then :func:`_heartbeat`; returns the started wire consumer (the
    caller shuts it down)."""
    wire = _wire(cluster)
    try:
        with Producer(unique("pgfilter"), cluster.namesrv_addr) as producer:
            _store_messages(producer, group, topic)
        _heartbeat(wire, group, topic)
    except BaseException:
        wire.shutdown()
        raise
    return wire


def _bodies(wire: PullConsumer, topic: str, group: str, sys_flag: int) -> list[bytes]:
    subscription = None
    if sys_flag & PullSysFlag.SUBSCRIPTION:
        subscription = "*" if topic.startswith("%RETRY%") else SQL
    result = _raw_pull(wire, topic=topic, group=group, sys_flag=sys_flag, subscription=subscription,
                       expression_type="TAG" if subscription == "*" else "SQL92", sub_version=VERSION)
    return [m.body for m in result.msg_found_list] if result.pull_status is PullStatus.FOUND else []


@pytest.fixture(scope="module", params=["1m", "dledger"])
def cluster(request):
    """A broker, or the master of a DLedger group of three (issue 27: filters on DLedger)."""
    with embedded.start_dev_cluster(in_process=True, broker_config={"enable_property_filter": True},
                                    cluster=request.param) as c:
        yield c


@pytest.mark.parametrize("sys_flag", [FROM_HEARTBEAT, FROM_HEADER])
def test_retry_messages_are_filtered_only_with_filter_support_retry(cluster, sys_flag):
    topic, group = unique("TopicRetryFilter"), unique("cgretryfilter")
    broker = cluster.broker
    wire = _stored_and_subscribed(cluster, group, topic)
    try:
        assert _bodies(wire, topic, group, sys_flag) == [b"high"]
        rtopic = retry_topic(group)
        assert not broker.config.filter_support_retry  # the default: retries are not filtered
        assert _bodies(wire, rtopic, group, sys_flag) == [b"low", b"high", b"other"]
        broker.config.filter_support_retry = True
        try:
            # judged by the group's filter of each retry's original topic; no filter there: delivered
            assert _bodies(wire, rtopic, group, sys_flag) == [b"high", b"other"]
        finally:
            broker.config.filter_support_retry = False
    finally:
        wire.shutdown()


def test_filter_data_survives_a_restart(tmp_path):
    store = str(tmp_path / "store")
    topic, group = unique("TopicFilterRestart"), unique("cgrestart")
    config = {"enable_property_filter": True, "filter_support_retry": True}
    with embedded.start_dev_cluster(store, in_process=True, broker_config=config) as c:
        wire = _stored_and_subscribed(c, group, topic)
        try:
            assert _bodies(wire, topic, group, FROM_HEARTBEAT) == [b"high"]
        finally:
            wire.shutdown()
    with open(os.path.join(store, "config", "consumerFilter.json"), encoding="utf-8") as fh:
        saved = json.load(fh)["filterDataByTopic"][topic]
    entry = saved["groupFilterData"][group]
    assert saved["topic"] == topic
    assert {k: entry[k] for k in ("consumerGroup", "topic", "expression", "expressionType", "clientVersion")} == \
        {"consumerGroup": group, "topic": topic, "expression": SQL, "expressionType": "SQL92", "clientVersion": VERSION}
    assert entry["dead"] is True and entry["deadTime"] >= entry["bornTime"] > 0  # its consumer left at the stop

    with embedded.start_dev_cluster(store, in_process=True, broker_config=config) as c:
        loaded = c.broker.consumers.filters.get(topic, group)
        assert (loaded.expression, loaded.client_version, loaded.dead) == (SQL, VERSION, True)
        wire = _wire(c)
        try:
            # no heartbeat yet: as Java, the group info is not there (only the filter data is kept)
            with pytest.raises(MQBrokerError) as info:
                _bodies(wire, topic, group, FROM_HEARTBEAT)
            assert info.value.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
            assert info.value.remark == ("the consumer's group info not exist\n"
                                         "See http://rocketmq.apache.org/docs/faq/ for further details.")
            # ... but retry pulls carrying their subscription are filtered by the kept data at once
            assert _bodies(wire, retry_topic(group), group, FROM_HEADER) == [b"high", b"other"]
            _heartbeat(wire, group, topic)  # the same subVersion revives the kept filter
            revived = c.broker.consumers.filters.get(topic, group)
            assert not revived.dead and revived.compiled is loaded.compiled
            assert _bodies(wire, topic, group, FROM_HEARTBEAT) == [b"high"]
        finally:
            wire.shutdown()
