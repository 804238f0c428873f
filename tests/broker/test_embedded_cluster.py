"""``rocketmq_broker.embedded.start_cluster``: broker-a and broker-b of one cluster behind one or
two name servers; a topic spread on both is routed, produced and consumed as a whole."""

from __future__ import annotations

import threading
import time

import pytest
from rocketmq_broker.embedded import start_cluster
from rocketmq_sdk import ConsumeConcurrentlyStatus, Message, Producer, PushConsumer
from rocketmq_sdk.admin.client import AdminClient

from tests.conftest import wait_until


@pytest.mark.parametrize("namesrvs", [1, 2])
def test_topic_on_two_brokers_is_routed_spread_and_consumed(namesrvs):
    topic, group = f"TopicEmb{namesrvs}", f"cg_emb{namesrvs}"
    with start_cluster(("broker-a", "broker-b"), namesrvs=namesrvs, cluster_name="EmbCluster") as cl:
        assert len(cl.namesrv_addrs) == namesrvs and cl.namesrv_addr == ";".join(cl.namesrv_addrs)
        assert cl.addr("broker-a") != cl.addr("broker-b")
        with AdminClient(cl.namesrv_addr) as admin:
            assert sorted(admin.create_topic(topic, cluster="EmbCluster", read_queue_nums=4,
                                             write_queue_nums=4)) == sorted([cl.addr("broker-a"), cl.addr("broker-b")])
        for ns in cl.namesrv_addrs:  # every name server lists both brokers and their queues
            with AdminClient(ns) as admin:
                route = admin.topic_route(topic)
            assert {(b.broker_name, b.cluster, b.broker_addrs[0]) for b in route.broker_datas} == \
                {("broker-a", "EmbCluster", cl.addr("broker-a")), ("broker-b", "EmbCluster", cl.addr("broker-b"))}
            assert sorted((q.broker_name, q.write_queue_nums) for q in route.queue_datas) == \
                [("broker-a", 4), ("broker-b", 4)]

        with Producer("pg_emb", cl.namesrv_addr) as p:
            results = [p.send(Message(topic, f"m{i}".encode(), keys=f"k{i}")) for i in range(40)]
        per_broker: dict[str, int] = {}
        for r in results:
            per_broker[r.message_queue.broker_name] = per_broker.get(r.message_queue.broker_name, 0) + 1
        assert per_broker == {"broker-a": 20, "broker-b": 20}  # round robin over 8 queues
        sent = {r.msg_id for r in results}

        got: list[tuple[str, str]] = []
        lock = threading.Lock()

        def listener(msgs, ctx):
            with lock:
                got.extend((m.msg_id, m.store_host) for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        c = PushConsumer(group, cl.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                         rebalance_interval=500, suspend_timeout=1000)
        c.subscribe(topic)
        c.register_message_listener(listener)
        c.start()
        try:
            wait_until(lambda: len(got) >= 40, 20, "40 messages")
        finally:
            c.shutdown()
        ids = [m for m, _ in got]
        assert sorted(ids) == sorted(sent)  # each once
        assert {h for _, h in got} == {cl.addr("broker-a"), cl.addr("broker-b")}


def test_stop_broker_leaves_the_other_running():
    with start_cluster(("broker-a", "broker-b")) as cl:
        cl.stop_broker("broker-b")
        cl.stop_broker("broker-b")  # idempotent
        with Producer("pg_emb_stop", cl.namesrv_addr) as p:
            r = p.send(Message("TopicEmbStop", b"x"))
        assert r.message_queue.broker_name == "broker-a"


def test_start_cluster_rejects_bad_arguments():
    with pytest.raises(ValueError):
        start_cluster(("broker-a", "broker-a"))
    with pytest.raises(ValueError):
        start_cluster(("broker-a",), namesrvs=0)


def test_read_announcements_reads_up_to_ready_and_enforces_its_deadline():
    import subprocess
    import sys

    from rocketmq_broker.embedded import DevClusterError, read_announcements

    def spawn(code: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)

    p = spawn("print('NAMESRV 127.0.0.1:1'); print('READY', flush=True); import time; time.sleep(30)")
    try:
        assert read_announcements(p, 10) == {"NAMESRV": "127.0.0.1:1", "READY": ""}
    finally:
        p.kill()
        p.wait(5)
    p = spawn("import sys; print('BROKER x'); sys.exit(3)")  # exits without READY
    with pytest.raises(DevClusterError, match="exit code 3"):
        read_announcements(p, 10)
    p = spawn("import time; time.sleep(30)")  # silent: the deadline holds although nothing is printed
    try:
        t0 = time.monotonic()
        with pytest.raises(DevClusterError, match="still running"):
            read_announcements(p, 0.5)
        assert time.monotonic() - t0 < 5
    finally:
        p.kill()
        p.wait(5)
