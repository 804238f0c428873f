"""``busyPollUs`` / ``busy_poll_us`` reaches the broker's remoting server: from broker.conf, from
``python -m rocketmq_broker dev --busy-poll-us`` and from ``start_dev_cluster(broker_config=...)``
(child process); a broker that polls still stores and answers sends."""

from __future__ import annotations

import os

import pytest
from rocketmq_broker.broker.config import BrokerConfig
from rocketmq_broker.broker.controller import BrokerController
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import Message, Producer, PullConsumer
from rocketmq_sdk.protocol.message import SendStatus

pytestmark = pytest.mark.timeout(60)


def test_broker_conf_key_sets_the_servers_busy_poll(tmp_path) -> None:
    cfg = BrokerConfig.from_properties({"busyPollUs": "150", "storePathRootDir": str(tmp_path)})
    assert cfg.busy_poll_us == 150
    assert BrokerController(cfg).server.busy_poll_us == 150
    assert BrokerController(BrokerConfig(store_path_root_dir=str(tmp_path))).server.busy_poll_us == 0


def test_dev_cluster_child_process_polls_and_serves_sends(tmp_path) -> None:
    store = tmp_path / "store"
    with start_dev_cluster(str(store), broker_config={"busy_poll_us": 200}) as c:
        with Producer("pg_busy_poll", c.namesrv_addr) as p:
            results = [p.send(Message("BusyPollT", f"m{i}".encode())) for i in range(20)]
        assert [r.send_status for r in results] == [SendStatus.SEND_OK] * 20
        with PullConsumer("cg_busy_poll", c.namesrv_addr) as pc:
            bodies = []
            for mq in pc.fetch_subscribe_message_queues("BusyPollT"):
                res = pc.pull(mq, "*", 0, 32)
                bodies += [m.body for m in res.msg_found_list or []]
        assert sorted(bodies) == sorted(f"m{i}".encode() for i in range(20))
        with open(os.path.join(store, "dev-cluster.log")) as fh:
            log = fh.read()
    assert "busy poll up to 200 µs after answers" in log
