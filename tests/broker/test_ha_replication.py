"""Master/slave replication between reference brokers (docs/protocol.md §8), in process: every kind
of record reaches the slave with identical CommitLog bytes and is dispatched there, a restarted
slave resumes from its own offset, SYNC_MASTER answers SLAVE_NOT_AVAILABLE /
FLUSH_SLAVE_TIMEOUT as 4.9.8 does, SlaveSynchronize, slave refusals and slave reads."""

from __future__ import annotations

import asyncio
import filecmp
import json
import os
import socket

import pytest
from click.testing import CliRunner
from rocketmq_broker.broker.config import BrokerConfig
from rocketmq_broker.broker.controller import BrokerController
from rocketmq_broker.broker.replication import SLAVE_SEND_REMARK
from rocketmq_broker.embedded import free_broker_port, start_cluster
from rocketmq_broker.store.commit_log import BLANK, DispatchRequest
from rocketmq_broker.store.ha_frames import encode_report
from rocketmq_sdk import (
    ConsumeConcurrentlyStatus,
    LitePullConsumer,
    LocalTransactionState,
    Message,
    Producer,
    PullConsumer,
    PushConsumer,
    TransactionProducer,
)
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.admin.cli import cli
from rocketmq_sdk.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from rocketmq_sdk.protocol.message import PullStatus, SendStatus
from rocketmq_sdk.remoting import RemotingClient, RemotingCommand

from tests.broker.conftest import SyncClient, assert_restartable
from tests.conftest import wait_until

FILE = 256 * 1024  # small CommitLog files: the records cross file boundaries (blank records)
ONE_SECOND_LEVELS = " ".join(["1s"] * 18)


def _cluster(tmp_path, **extra):
    cfg = {"mapped_file_size_commit_log": FILE, "message_delay_level": ONE_SECOND_LEVELS,
           "slave_sync_interval": 300, "register_name_server_period": 10_000, **extra}
    return start_cluster(["ha-a"], slaves=1, broker_role="SYNC_MASTER", store_dir=str(tmp_path),
                         broker_config=cfg)


def _synced(c) -> bool:
    m, s = c.brokers["ha-a"], c.slaves["ha-a"][0]
    end = m.store.get_max_phy_offset()
    return s.store.get_max_phy_offset() == end > 0 and s.store.reput_from_offset == end  # and dispatched


def _records(broker) -> list:
    cl = broker.store.commit_log
    out = []
    for mf in cl.mapped_file_queue.files:
        pos = 0
        while pos < mf.wrote_position:
            r = cl.check_message_and_return_size(mf, pos, True)
            if r == BLANK:
                out.append("BLANK")
                break
            assert isinstance(r, DispatchRequest), (mf.path, pos, r)
            out.append(r)
            pos += r.msg_size
    return out


class _Commit:
    def execute_local_transaction(self, msg, arg):
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg):
        return LocalTransactionState.COMMIT_MESSAGE


def test_every_kind_of_record_reaches_the_slave_byte_for_byte(tmp_path):
    with _cluster(tmp_path) as c:
        m, s = c.brokers["ha-a"], c.slaves["ha-a"][0]
        wait_until(lambda: m.ha.connection_count == 1, 10, "the slave's HA connection")
        p = Producer("ha_pg", c.namesrv_addr, send_msg_timeout=10_000)
        tp = TransactionProducer("ha_tx_pg", c.namesrv_addr, listener=_Commit())
        client = SyncClient()
        try:
            p.start()
            tp.start()
            sent = [p.send(Message("HaNormal", os.urandom(6000), keys=f"k{i}")) for i in range(60)]  # incompressible
            assert {r.send_status for r in sent} == {SendStatus.SEND_OK}  # acknowledged by the slave
            batch = p.send_batch([Message("HaBatch", b"b%d" % i) for i in range(10)])
            assert batch.send_status is SendStatus.SEND_OK
            assert p.send(Message("HaDelayed", b"later", delay_time_level=1)).send_status is SendStatus.SEND_OK
            tx = tp.send_message_in_transaction(Message("HaTx", b"tx"))
            assert tx.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
            first = sent[0]
            phy = m.store.get_commit_log_offset_in_queue("HaNormal", first.message_queue.queue_id,
                                                         first.queue_offset)
            for delay_level in (1, -1):  # %RETRY% (via SCHEDULE_TOPIC_XXXX) and %DLQ%
                h = ConsumerSendMsgBackRequestHeader(offset=phy, group="ha_cg", delay_level=delay_level,
                                                     origin_msg_id=first.msg_id, origin_topic="HaNormal",
                                                     max_reconsume_times=16)
                resp = client.invoke(m.config.broker_addr, RequestCode.CONSUMER_SEND_MSG_BACK, h.to_ext_fields())
                assert resp.code == ResponseCode.SUCCESS, resp.remark
            wait_until(lambda: sum(m.store.get_max_offset_in_queue("HaDelayed", q) for q in range(8))
                       + m.store.get_max_offset_in_queue("%RETRY%ha_cg", 0) >= 2,
                       15, "delayed and retry messages delivered by the master")
            wait_until(lambda: _synced(c), 15, "the slave to catch up")
        finally:
            client.close()
            tp.shutdown()
            p.shutdown()
        topics = {r.topic for r in _records(m) if r != "BLANK"}
        assert {"HaNormal", "HaBatch", "HaDelayed", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC",
                "RMQ_SYS_TRANS_OP_HALF_TOPIC", "HaTx", "%RETRY%ha_cg", "%DLQ%ha_cg"} <= topics
        assert "BLANK" in _records(m)  # at least one file end was replicated
        c.stop_slave("ha-a")
        c.stop_broker("ha-a")
        mdir, sdir = m.config.store_path_root_dir, s.config.store_path_root_dir
        names = sorted(os.listdir(os.path.join(mdir, "commitlog")))
        assert len(names) >= 2 and sorted(os.listdir(os.path.join(sdir, "commitlog"))) == names
        for name in names:
            assert filecmp.cmp(os.path.join(mdir, "commitlog", name), os.path.join(sdir, "commitlog", name),
                               shallow=False), name
        # the slave dispatched what it received: same consume queues (files) and index keys
        mq = os.path.join(mdir, "consumequeue")
        for topic in ("HaNormal", "HaBatch", "HaDelayed", "HaTx", "%DLQ%ha_cg", "SCHEDULE_TOPIC_XXXX"):
            for qid in os.listdir(os.path.join(mq, topic)):
                for f in os.listdir(os.path.join(mq, topic, qid)):
                    assert filecmp.cmp(os.path.join(mq, topic, qid, f),
                                       os.path.join(sdir, "consumequeue", topic, qid, f), shallow=False)


def test_a_restarted_slave_resumes_from_its_own_offset_and_sync_sends_wait_for_it(tmp_path):
    with _cluster(tmp_path) as c:
        m = c.brokers["ha-a"]
        wait_until(lambda: m.ha.connection_count == 1, 10, "the slave's HA connection")
        p = Producer("ha_pg", c.namesrv_addr)
        p.start()
        try:
            assert p.send(Message("HaRestart", b"before")).send_status is SendStatus.SEND_OK
            wait_until(lambda: _synced(c), 10, "the slave to catch up")
            old = c.slaves["ha-a"][0]
            assert_restartable(old.config.listen_port, old.ha.port)
            c.stop_slave("ha-a")
            before = old.store.get_max_phy_offset()
            wait_until(lambda: m.ha.connection_count == 0, 10, "the master to see the slave go")
            # Java: SLAVE_NOT_AVAILABLE at once without a slave; the message is stored all the same
            down = [p.send(Message("HaRestart", b"while down %d" % i)) for i in range(20)]
            assert {r.send_status for r in down} == {SendStatus.SLAVE_NOT_AVAILABLE}
            assert m.store.get_max_offset_in_queue("HaRestart", down[-1].message_queue.queue_id) > 0
            slave = c.restart_slave("ha-a")
            assert (slave.config.listen_port, slave.ha.port) == (old.config.listen_port, old.ha.port)
            wait_until(lambda: m.ha.connections and m.ha.connections[0].request_offset >= 0, 10,
                       "the restarted slave's first report")
            assert m.ha.connections[0].request_offset == before  # resumes from its own max offset
            wait_until(lambda: _synced(c), 10, "the restarted slave to catch up")
            for r in down:  # the 20 messages written while it was down reached its consume queues
                q = r.message_queue.queue_id
                assert slave.store.get_max_offset_in_queue("HaRestart", q) > r.queue_offset
            assert p.send(Message("HaRestart", b"after")).send_status is SendStatus.SEND_OK
        finally:
            p.shutdown()


def test_sync_master_with_a_silent_slave_answers_flush_slave_timeout_after_slave_timeout(tmp_path):
    """A slave that is connected but no longer reports (Java: frozen with SIGSTOP) makes a
    SYNC_MASTER wait ``slaveTimeout`` and answer 12 FLUSH_SLAVE_TIMEOUT; the SDK returns the
    status (no exception), as the Java producer does."""
    with _cluster(tmp_path, slave_timeout=800) as c:
        m = c.brokers["ha-a"]
        wait_until(lambda: m.ha.connection_count == 1, 10, "the slave's HA connection")
        c.stop_slave("ha-a")
        wait_until(lambda: m.ha.connection_count == 0, 10, "the master to see the slave go")
        frozen = socket.create_connection(("127.0.0.1", m.ha.port))
        try:
            frozen.sendall(encode_report(m.store.get_max_phy_offset()))
            wait_until(lambda: m.ha.connections and m.ha.connections[0].request_offset >= 0, 10, "the report")
            p = Producer("ha_pg", c.namesrv_addr, send_msg_timeout=5000)
            p.start()
            try:
                r = p.send(Message("HaFrozen", b"x"))
            finally:
                p.shutdown()
            assert r.send_status is SendStatus.FLUSH_SLAVE_TIMEOUT
            assert r.msg_id and r.queue_offset == 0  # stored and answered with its position
        finally:
            frozen.close()


def test_slave_synchronize_copies_topics_offsets_delay_offsets_and_groups(tmp_path):
    with _cluster(tmp_path) as c:
        m, s = c.brokers["ha-a"], c.slaves["ha-a"][0]
        client = SyncClient()
        try:
            resp = client.invoke(m.config.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC,
                                 {"topic": "HaSynced", "defaultTopic": "TBW102", "readQueueNums": "3",
                                  "writeQueueNums": "3", "perm": "6", "topicFilterType": "SINGLE_TAG"})
            assert resp.code == ResponseCode.SUCCESS
            m.offsets.commit("ha_sync_cg", "HaSynced", 2, 42)
            m.groups.find("ha_sync_cg")
            m.schedule.offsets[3] = 7
            s.offsets.commit("only_on_slave", "HaSynced", 0, 5)
            wait_until(lambda: s.topics.get("HaSynced") is not None and s.offsets.query("ha_sync_cg", "HaSynced", 2) == 42
                       and "ha_sync_cg" in s.groups.table and s.schedule.offsets.get(3) == 7, 10,
                       "SlaveSynchronize to copy the master's metadata")
            assert s.topics.get("HaSynced").read_queue_nums == 3
            assert s.offsets.query("only_on_slave", "HaSynced", 0) == 5  # merged, not replaced
            with open(s.schedule.path) as fh:
                assert '"offsetTable"' in fh.read()
            # a slave refuses writes as 4.9.8 does (docs/protocol.md §8.8)
            send = SendMessageRequestHeader(producer_group="g", topic="HaSynced", default_topic="TBW102",
                                            default_topic_queue_nums=4, queue_id=0, sys_flag=0, born_timestamp=1,
                                            flag=0, properties="")
            resp = client.invoke(s.config.broker_addr, RequestCode.SEND_MESSAGE, send.to_ext_fields(), b"x")
            assert (resp.code, resp.remark) == (ResponseCode.SERVICE_NOT_AVAILABLE, SLAVE_SEND_REMARK)
            resp = client.invoke(s.config.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC,
                                 {"topic": "Nope", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"})
            assert resp.code == ResponseCode.SYSTEM_ERROR and "slave" in resp.remark
        finally:
            client.close()


def _pull(client, addr: str, offset: int, commit: int = -1) -> object:
    h = PullMessageRequestHeader(consumer_group="ha_read_cg", topic="HaRead", queue_id=0, queue_offset=offset,
                                 max_msg_nums=8, sys_flag=PullSysFlag.build(commit >= 0, False, True),
                                 commit_offset=max(commit, 0), suspend_timeout_millis=0, subscription="*",
                                 sub_version=0, expression_type="TAG")
    return client.invoke(addr, RequestCode.PULL_MESSAGE, h.to_ext_fields())


def test_master_sends_slow_consumers_to_the_slave_which_sends_them_back(tmp_path):
    """[seq 790, 795]: with ``slaveReadEnable`` and ``accessMessageInMemoryMaxRatio=0`` every
    FOUND answer of the master suggests broker 1; the slave serves the pull and suggests 0; a
    commit offset piggy-backed on a pull is never stored by the slave."""
    with _cluster(tmp_path) as c:
        m, s = c.brokers["ha-a"], c.slaves["ha-a"][0]
        wait_until(lambda: m.ha.connection_count == 1, 10, "the slave's HA connection")
        p = Producer("ha_pg", c.namesrv_addr)
        p.start()
        client = SyncClient()
        try:
            for i in range(20):
                p.send(Message("HaRead", b"r%d" % i), selector=lambda mqs, msg, arg: mqs[0])
            wait_until(lambda: _synced(c), 10, "the slave to catch up")
            first = _pull(client, m.config.broker_addr, 0)
            assert first.code == ResponseCode.SUCCESS and first.ext_fields["suggestWhichBrokerId"] == "0"
            m.update_config({"slaveReadEnable": "true", "accessMessageInMemoryMaxRatio": "0"})
            redirected = _pull(client, m.config.broker_addr, 0)
            assert redirected.code == ResponseCode.SUCCESS and redirected.ext_fields["suggestWhichBrokerId"] == "1"
            wait_until(lambda: s.topics.get("HaRead") is not None, 10, "SlaveSynchronize of the topic")
            on_slave = _pull(client, s.config.broker_addr, 8, commit=8)
            assert on_slave.code == ResponseCode.SUCCESS and on_slave.ext_fields["suggestWhichBrokerId"] == "0"
            assert on_slave.ext_fields["nextBeginOffset"] == "16"
            assert s.offsets.query("ha_read_cg", "HaRead", 0) == -1
            beyond = _pull(client, s.config.broker_addr, 500)  # slave never corrects the offset
            assert beyond.code == ResponseCode.PULL_RETRY_IMMEDIATELY
            assert beyond.ext_fields["nextBeginOffset"] == "500"
        finally:
            client.close()
            p.shutdown()


def test_a_slave_needs_a_positive_broker_id():
    with pytest.raises(ValueError, match="brokerId must be > 0"):
        BrokerConfig(broker_role="SLAVE", broker_id=0).check_role()
    cfg = BrokerConfig(broker_role="SYNC_MASTER", broker_id=3)
    cfg.check_role()
    assert cfg.broker_id == 0  # masters always get id 0 (Java BrokerStartup)



def test_cluster_list_shows_the_slave_with_its_replication_lag(tmp_path):
    with _cluster(tmp_path) as c:
        m, s = c.brokers["ha-a"], c.slaves["ha-a"][0]
        wait_until(lambda: m.ha.connection_count == 1, 10, "the slave's HA connection")
        p = Producer("ha_pg", c.namesrv_addr)
        p.start()
        try:
            p.send(Message("HaList", b"x" * 100))
        finally:
            p.shutdown()
        wait_until(lambda: _synced(c), 10, "the slave to catch up")
        r = CliRunner().invoke(cli, ["clusterList", "-n", c.namesrv_addr, "--json"])
        assert r.exit_code == 0, r.output
        rows = {b["broker_id"]: b for b in json.loads(r.output)}
        assert (rows[0]["role"], rows[1]["role"]) == ("MASTER", "SLAVE")
        assert rows[1]["addr"] == s.config.broker_addr
        assert rows[0]["commit_log_max_offset"] == rows[1]["commit_log_max_offset"] == m.store.get_max_phy_offset()
        assert (rows[0]["replication_lag"], rows[1]["replication_lag"]) == (None, 0)
        c.stop_slave("ha-a")
        p = Producer("ha_pg2", c.namesrv_addr)
        p.start()
        try:
            p.send(Message("HaList", b"y" * 100))  # the master alone: the slave falls behind
        finally:
            p.shutdown()
        status = AdminClient(c.namesrv_addr)
        try:
            info = status.broker_runtime_info(m.config.broker_addr)
        finally:
            status.close()
        assert info["brokerRole"] == "SYNC_MASTER" and info["haConnectionCount"] == "0"
        text = CliRunner().invoke(cli, ["clusterList", "-n", c.namesrv_addr]).output.splitlines()
        assert "#HA Lag" in text[0] and len(text) == 2  # the stopped slave unregistered


def _slave_reads(c, topic: str, n: int, queue_0: bool = False) -> tuple[list[str], list, list]:
    """Set the master to suggest its slave on every FOUND answer (``slaveReadEnable``,
    ``accessMessageInMemoryMaxRatio=0``), send ``n`` messages with keys r0.. to ``topic`` (all to
    queue 0 with ``queue_0``) and wait until the slave has them. Returns the keys and the
    (queueOffset, sysFlag) of every pull of ``topic`` at the master and at the slave."""
    m, s = c.brokers["ha-a"], c.slaves["ha-a"][0]
    wait_until(lambda: m.ha.connection_count == 1, 10, "the slave's HA connection")
    m.update_config({"slaveReadEnable": "true", "accessMessageInMemoryMaxRatio": "0"})
    at_master: list[tuple[int, int]] = []
    at_slave: list[tuple[int, int]] = []

    def recorder(seen: list):
        def record(ch, cmd) -> None:
            if cmd.code == RequestCode.PULL_MESSAGE and cmd.ext_fields.get("topic") == topic:
                seen.append((int(cmd.ext_fields["queueOffset"]), int(cmd.ext_fields.get("sysFlag", "0"))))
        return record

    m.server.add_request_hook(recorder(at_master))
    s.server.add_request_hook(recorder(at_slave))
    keys = [f"r{i}" for i in range(n)]
    p = Producer("ha_pg", c.namesrv_addr)
    p.start()
    try:
        for k in keys:
            p.send(Message(topic, b"x", keys=k), selector=(lambda mqs, msg, arg: mqs[0]) if queue_0 else None)
    finally:
        p.shutdown()
    wait_until(lambda: _synced(c) and s.topics.get(topic) is not None, 15, "the slave to have it all")
    return keys, at_master, at_slave


def test_push_consumer_follows_the_suggestion_to_the_slave_without_the_commit_bit(tmp_path):
    """The SDK side of slave reads: after the master suggests broker 1, the queue's next pull
    goes to the slave (Java ``PullAPIWrapper``), with the COMMIT_OFFSET bit cleared; everything
    is consumed once and the offsets still reach the master."""
    with _cluster(tmp_path) as c:
        m = c.brokers["ha-a"]
        keys, _, at_slave = _slave_reads(c, "HaSlaveRead", 40)
        got: list[str] = []
        consumer = PushConsumer("ha_read_push_cg", c.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                                persist_consumer_offset_interval=300, pull_batch_size=4)
        consumer.subscribe("HaSlaveRead", "*")
        consumer.register_message_listener(
            lambda msgs, ctx: got.extend(msg.keys[0] for msg in msgs) or ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
        consumer.start()
        try:
            wait_until(lambda: sorted(got) == sorted(keys), 20, "every message consumed")
            wait_until(lambda: sum(m.offsets.query("ha_read_push_cg", "HaSlaveRead", q) for q in range(4)) == 40,
                       10, "the offsets committed to the master")
        finally:
            consumer.shutdown()
        assert at_slave, "no pull reached the slave"
        assert all(not flag & PullSysFlag.COMMIT_OFFSET for _, flag in at_slave)


def test_pull_consumer_follows_the_suggestion_and_falls_back_to_the_master(tmp_path):
    """``PullConsumer.pull`` goes where the queue's last answer suggested: master (suggests 1),
    slave (suggests 0), master again; once the slave has left the route the suggested broker 1
    is unknown and the pull goes to the master."""
    with _cluster(tmp_path) as c:
        keys, at_master, at_slave = _slave_reads(c, "HaPullRead", 24, queue_0=True)
        consumer = PullConsumer("ha_read_pull_cg", c.namesrv_addr)
        consumer.start()
        try:
            mq = next(q for q in consumer.fetch_subscribe_message_queues("HaPullRead") if q.queue_id == 0)
            got: list[str] = []
            suggested: list[int] = []
            offset = 0
            for _ in range(3):
                r = consumer.pull(mq, "*", offset, 8)
                assert r.pull_status is PullStatus.FOUND
                got.extend(msg.keys[0] for msg in r.msg_found_list)
                suggested.append(r.suggest_which_broker_id)
                offset = r.next_begin_offset
            assert got == keys
            assert suggested == [1, 0, 1]
            assert [o for o, _ in at_master] == [0, 16] and [o for o, _ in at_slave] == [8]

            c.stop_slave("ha-a")  # unregisters: the next route has the master only

            def slave_gone() -> bool:
                consumer.fetch_subscribe_message_queues("HaPullRead")
                return set(consumer.instance.broker_addrs["ha-a"]) == {0}
            wait_until(slave_gone, 10, "the route without the slave")
            r = consumer.pull(mq, "*", 0, 8)
            assert r.pull_status is PullStatus.FOUND and [msg.keys[0] for msg in r.msg_found_list] == keys[:8]
            assert [o for o, _ in at_master] == [0, 16, 0] and len(at_slave) == 1
        finally:
            consumer.shutdown()


def test_lite_pull_consumer_follows_the_suggestion_to_the_slave(tmp_path):
    """The lite-pull consumer's background pulls follow the suggestions too: part of the queues'
    data comes from the slave, every message is polled exactly once, and the committed offsets
    reach the master."""
    with _cluster(tmp_path) as c:
        m = c.brokers["ha-a"]
        keys, at_master, at_slave = _slave_reads(c, "HaLiteRead", 40)
        consumer = LitePullConsumer("ha_read_lite_cg", c.namesrv_addr, pull_batch_size=4, auto_commit=False,
                                    consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        consumer.subscribe("HaLiteRead", "*")
        consumer.start()
        got: list[str] = []
        try:
            wait_until(lambda: got.extend(msg.keys[0] for msg in consumer.poll(100)) or len(got) >= len(keys),
                       20, "every message polled")
            assert sorted(got) == sorted(keys)
            consumer.commit_sync()
            assert sum(m.offsets.query("ha_read_lite_cg", "HaLiteRead", q) for q in range(4)) == 40
        finally:
            consumer.shutdown()
        assert at_slave, "no pull reached the slave"
        assert all(o > 0 for o, _ in at_slave), "a queue's first pull goes to the master, later ones as suggested"
        assert 0 in {o for o, _ in at_master}


def test_a_broker_on_a_fixed_port_serves_the_topic_config_on_its_vip_port_and_ha_on_port_plus_one(tmp_path):
    """A Java slave asks GET_ALL_TOPIC_CONFIG on ``listenPort - 2`` (docs/protocol.md §8.9) and
    connects to ``listenPort + 1`` for the CommitLog."""
    port = free_broker_port()  # p - 2 and p + 1 free too, below the ephemeral range

    async def main():
        b = BrokerController(BrokerConfig(listen_port=port, store_path_root_dir=str(tmp_path),
                                          mapped_file_size_commit_log=FILE))
        await b.start()
        client = RemotingClient()
        try:
            resp = await client.invoke(f"127.0.0.1:{port - 2}",
                                       RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG), 3000)
            return b.ha.port, b.ha_server_addr, resp
        finally:
            await client.close()
            await b.stop()

    ha_port, ha_addr, resp = asyncio.run(main())
    assert ha_port == port + 1 and ha_addr == f"127.0.0.1:{port + 1}"
    assert resp.code == ResponseCode.SUCCESS and b'"TBW102"' in resp.body
