"""An operator's daily work with the admin API against the reference cluster: rewinding a group
whose consumers are stopped, and reading while a master is down (its slave alive)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from rocketmq_sdk import Producer
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.admin.cli import cli
from rocketmq_sdk.consumer import PushConsumer
from rocketmq_sdk.exceptions import MQBrokerError, TopicNotExistError
from rocketmq_sdk.protocol.codes import ResponseCode
from rocketmq_sdk.protocol.message import Message

from tests.conftest import Received, wait_until

embedded = pytest.importorskip("rocketmq_broker.embedded")

FAST = {"suspend_timeout": 1000, "pull_timeout": 4000, "rebalance_interval": 500,
        "persist_consumer_offset_interval": 200, "consume_from_where": "CONSUME_FROM_FIRST_OFFSET",
        "heartbeat_broker_interval": 500}


def start_consumer(ns: str, group: str, topic: str) -> tuple[PushConsumer, Received]:
    """A started consumer of ``group`` subscribed to all of ``topic``, and what it receives."""
    received = Received()
    consumer = PushConsumer(group, ns, **FAST)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(received)
    consumer.start()
    return consumer, received


def consume_all(ns: str, group: str, topic: str, n: int) -> list:
    """Run a consumer of ``group`` until it has ``n`` distinct messages, then shut it down
    (its offsets are committed and it unregisters: the group is offline)."""
    consumer, received = start_consumer(ns, group, topic)
    try:
        wait_until(lambda: len({m.msg_id for m in received.messages}) >= n, what=f"{n} messages consumed")
    finally:
        consumer.shutdown()
    return received.messages


def route_brokers(admin: AdminClient, topic: str) -> int:
    """Brokers in the topic's route; 0 until the name server has one (the brokers register a new
    topic asynchronously)."""
    try:
        return len(admin.topic_route(topic).queue_datas)
    except TopicNotExistError:
        return 0


def offline(admin: AdminClient, group: str) -> bool:
    try:
        admin.consumer_connection(group)
    except MQBrokerError as exc:
        return exc.code == ResponseCode.CONSUMER_NOT_ONLINE
    return False


def send_keyed(ns: str, topic: str, n: int, prefix: str) -> list:
    with Producer(f"{prefix}_pg", ns) as producer:
        return [producer.send(Message(topic, f"{prefix}-{i}", keys=[f"{prefix}-{i}"])) for i in range(n)]


def test_reset_offset_of_an_offline_group_updates_every_broker_directly():
    topic, group, n = "OfflineReset", "offline_cg", 16
    with embedded.start_cluster(("broker-a", "broker-b")) as cluster, AdminClient(cluster.namesrv_addr) as admin:
        ns = cluster.namesrv_addr
        admin.create_topic(topic, cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        wait_until(lambda: route_brokers(admin, topic) == 2, what="route on both brokers")
        send_keyed(ns, topic, n, "off")
        consume_all(ns, group, topic, n)
        wait_until(lambda: offline(admin, group), what="group offline")
        wait_until(lambda: admin.consumer_progress(group).total_lag == 0, what="offsets committed")

        entries = admin.reset_offset_by_time(group, topic, 0)  # the broker alone answers 206 here
        assert sorted((e.broker_name, e.queue_id, e.offset) for e in entries) == [
            ("broker-a", 0, 0), ("broker-a", 1, 0), ("broker-b", 0, 0), ("broker-b", 1, 0)]
        assert all(e.direct for e in entries)
        assert admin.consumer_progress(group).total_lag == n

        # the CLI the same way, to the latest offset (-1): nothing left to consume
        r = CliRunner().invoke(cli, ["resetOffsetByTime", "-n", ns, "-g", group, "-t", topic, "--timestamp=-1",
                                     "--json"], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        assert {(e["broker_name"], e["queue_id"]) for e in json.loads(r.output)} == {
            ("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)}
        assert admin.consumer_progress(group).total_lag == 0

        # rewound to the earliest again (the table output says how), a restarted consumer gets
        # every message once more
        r = CliRunner().invoke(cli, ["resetOffsetByTime", "-n", ns, "-g", group, "-t", topic, "-s", "0"],
                               catch_exceptions=False)
        assert r.output.splitlines()[0] == (f"reset consumer offset of group {group} on {topic} to the earliest "
                                            "offset (group offline: offsets written on the brokers directly)")
        again = consume_all(ns, group, topic, n)
        assert {m.body for m in again} == {f"off-{i}".encode() for i in range(n)}


def slave_synced(cluster, name: str, group: str, topic: str) -> bool:
    master, slave = cluster.brokers[name], cluster.slaves[name][0]
    if slave.store.get_max_phy_offset() != master.store.get_max_phy_offset():
        return False
    return all(slave.offsets.query(group, topic, q) == master.offsets.query(group, topic, q) for q in range(2))


def test_reads_come_from_the_slave_while_a_master_is_down():
    topic, group = "SlaveReads", "slave_cg"
    with embedded.start_cluster(("broker-a", "broker-b"), slaves=1, broker_role="SYNC_MASTER",
                                broker_config={"slave_sync_interval": 300}) as cluster, \
            AdminClient(cluster.namesrv_addr) as admin:
        ns = cluster.namesrv_addr
        admin.create_topic(topic, cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        wait_until(lambda: route_brokers(admin, topic) == 2, what="route on both brokers")
        consume_all(ns, group, topic, len(send_keyed(ns, topic, 8, "first")))
        sent = send_keyed(ns, topic, 12, "later")  # a backlog of 12 on both brokers
        wait_until(lambda: admin.consumer_progress(group).total_lag == 12, what="backlog of 12")
        stored = sum(q.max_offset - q.min_offset for q in admin.topic_status(topic))
        assert stored == 20
        wait_until(lambda: slave_synced(cluster, "broker-b", group, topic), what="broker-b's slave in sync")
        on_b = next(s for s in sent if s.message_queue.broker_name == "broker-b")
        key_b = f"later-{sent.index(on_b)}"
        assert admin.masterless_brokers() == []

        cluster.stop_broker("broker-b")  # its master; the slave stays
        wait_until(lambda: not any(bd.broker_name == "broker-b" and 0 in bd.broker_addrs
                                   for bd in admin.topic_route(topic).broker_datas),
                   what="a route without broker-b's master")

        assert admin.consumer_progress(group).total_lag == 12
        assert admin.topic_consumer_groups(topic) == [group]
        assert sum(q.max_offset - q.min_offset for q in admin.topic_status(topic)) == 20
        found = admin.query_message_by_key(topic, key_b)
        assert [m.body for m in found] == [key_b.encode()]
        # named by its broker (its store host is the master's, which the name server no longer lists)
        assert [m.broker_name for m in found] == ["broker-b"]
        # by its offset message id too (the id names the master's address: the slave answers)
        viewed = admin.view_message(on_b.offset_msg_id)
        assert (viewed.body, viewed.broker_name) == (key_b.encode(), "broker-b")
        pulled = admin.query_message_by_offset(topic, "broker-b", on_b.message_queue.queue_id, on_b.queue_offset)
        assert (pulled.body, pulled.broker_name) == (key_b.encode(), "broker-b")
        down = admin.masterless_brokers()
        assert [(d.cluster, d.broker_name, d.read_from) for d in down] == [
            ("DefaultCluster", "broker-b", cluster.slaves["broker-b"][0].config.broker_addr)]

        # a consumer of the group started now: a message of broker-b consumed again directly
        # (CONSUME_MESSAGE_DIRECTLY through the slave standing in for its master)
        consumer, received = start_consumer(ns, group, topic)
        try:
            wait_until(lambda: len({m.msg_id for m in received.messages}) >= 12, what="the backlog consumed")
            results = admin.consume_message_directly(group, on_b.offset_msg_id)
            assert [r.consume_result.name for r in results.values()] == ["CR_SUCCESS"]
            assert [m.body for m in received.messages].count(key_b.encode()) == 2
        finally:
            consumer.shutdown()


def test_a_group_created_but_never_used_is_listed_with_its_config():
    with embedded.start_cluster(("broker-a", "broker-b")) as cluster, AdminClient(cluster.namesrv_addr) as admin:
        admin.update_subscription_group("cfg_only_cg", cluster="DefaultCluster", retry_max_times=3,
                                        consume_broadcast_enable=True)
        assert "cfg_only_cg" not in [g.group for g in admin.consumer_groups()]  # no retry topic yet
        listed = admin.subscription_groups()
        assert [g.group for g in listed] == ["cfg_only_cg"]  # the brokers' own groups left out
        found = admin.subscription_group_config("cfg_only_cg")
        assert sorted(found.brokers) == ["broker-a", "broker-b"] and found.consistent
        assert (found.config.retry_max_times, found.config.consume_broadcast_enable) == (3, True)
        assert "TOOLS_CONSUMER" in [g.group for g in admin.subscription_groups(include_system=True)]
        admin.update_subscription_group("cfg_only_cg", broker_addr=cluster.addr("broker-b"), retry_max_times=5)
        assert not admin.subscription_group_config("cfg_only_cg").consistent
        # the topic configs the brokers store (queue numbers, perm, order), per broker
        admin.create_topic("CfgTopic", cluster="DefaultCluster", read_queue_nums=3, write_queue_nums=3, order=True)
        wait_until(lambda: route_brokers(admin, "CfgTopic") == 2, what="route on both brokers")
        configs = admin.topic_configs("CfgTopic")
        assert sorted(configs) == ["broker-a", "broker-b"]
        assert {(c.read_queue_nums, c.write_queue_nums, c.perm, c.order) for c in configs.values()} == {(3, 3, 6, True)}
