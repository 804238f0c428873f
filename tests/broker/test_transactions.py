"""Transactional messages on the reference broker, driven by the SDK's ``TransactionProducer``.

Half messages wait in ``RMQ_SYS_TRANS_HALF_TOPIC``; END_TRANSACTION commits (the message appears
in its topic, once) or rolls back (never appears); UNKNOW outcomes are settled by the broker's
CHECK_TRANSACTION_STATE; the check count limit, the immunity property and a broker restart are
covered, and the frames are compared with the Java 4.9.8 capture ``java-transaction.jsonl``.
Rounds of checks are started by the tests (periodic rounds in the limit and immunity tests).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_broker.store.results import GetMessageStatus
from rocketmq_sdk import PushConsumer
from rocketmq_sdk.exceptions import MQBrokerError, MQClientError, RemotingTimeoutError
from rocketmq_sdk.producer import LocalTransactionState, TransactionProducer
from rocketmq_sdk.protocol import Message
from rocketmq_sdk.protocol.codes import (
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    MessageSysFlag,
    RequestCode,
    ResponseCode,
)
from rocketmq_sdk.protocol.message_codec import decode_message, decode_messages
from rocketmq_sdk.protocol.msgid import decode_offset_msg_id
from rocketmq_sdk.remoting import RemotingClient, RemotingCommand

from tests.broker.conftest import cluster_mode
from tests.conftest import Received, load_capture, wait_until

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
#: Check rounds run when a test asks (:func:`check_round`) and every half message is due at once.
#: As in Java, a check not answered before the next round is asked again (and a second COMMIT
#: stores the message twice), so tests that count deliveries never let a timer start a round
#: while answers are on their way, however loaded the machine is.
MANUAL_CHECKS = {"transaction_check_interval": 60_000, "transaction_time_out": 0}
_seq = iter(range(10**6))


def unique(prefix: str) -> str:
    return f"{prefix}_{next(_seq)}_{int(time.time() * 1000) % 100000}"



class Listener:
    """Local outcome per message key; check answers from ``check`` (a state or a callable)."""

    def __init__(self, check: LocalTransactionState | Callable = COMMIT) -> None:
        self.check = check
        self.lock = threading.Lock()
        self.checked: list = []

    def execute_local_transaction(self, msg, arg):
        return arg

    def check_local_transaction(self, msg):
        with self.lock:
            self.checked.append(msg)
        return self.check(msg) if callable(self.check) else self.check

    def checked_keys(self) -> Counter:
        with self.lock:
            return Counter(m.keys[0] for m in self.checked)


def on_loop(cluster, fn: Callable):
    """Run ``fn()`` on the broker's event loop (the store's owner) and return its result."""
    async def call():
        return fn()
    return asyncio.run_coroutine_threadsafe(call(), cluster._loop).result(10)


def stored(cluster, topic: str, queues: range = range(16)) -> list:
    """Every record of ``topic`` in the broker's consume queues (what consumers can pull)."""
    def read():
        out = []
        for q in queues:
            offset = 0
            while True:
                res = cluster.broker.store.get_message("test", topic, q, offset, 32)
                if res is None or res.status is not GetMessageStatus.FOUND:
                    break
                out += [decode_message(raw, 0)[0] for raw in res.message_buffers]
                offset = res.next_begin_offset
        return out
    return on_loop(cluster, read)


def keys_in(cluster, topic: str) -> Counter:
    return Counter(m.keys[0] for m in stored(cluster, topic) if m.keys)


def check_round(cluster, group: str | None = None) -> int:
    """Run one check round now; returns how many CHECK_TRANSACTION_STATE it sent. Waits first for
    producer ``group`` to have heartbeated (the broker checks through its connection) and for the
    clock to pass a millisecond (a round leaves messages stored in its first ms for later)."""
    svc = cluster.broker.transactions.check_service
    if group is not None:
        wait_until(lambda: group in cluster.broker.producers.groups, what=f"a heartbeat of {group}")
    rounds, sent = svc.rounds, svc.checks_sent
    called = int(time.time() * 1000)
    wait_until(lambda: int(time.time() * 1000) > called + 1, what="the next millisecond")
    cluster._loop.call_soon_threadsafe(svc.wakeup)
    wait_until(lambda: svc.rounds > rounds, what="a check round")
    return svc.checks_sent - sent


def assert_settled(cluster) -> int:
    """A check round sends no check and the check progress (``CID_RMQ_SYS_TRANS`` offset of the
    half queue) reaches the end of the half queue; returns that end offset."""
    b = cluster.broker
    end = on_loop(cluster, lambda: b.store.get_max_offset_in_queue(TRANS_HALF_TOPIC, 0))
    assert check_round(cluster) == 0  # no new check; the progress moves past the copies
    wait_until(lambda: b.offsets.query("CID_RMQ_SYS_TRANS", TRANS_HALF_TOPIC, 0) == end,
               what="the check progress at the end of the half queue")
    return end


def ops_count(cluster) -> int:
    return len(stored(cluster, TRANS_OP_HALF_TOPIC, range(1)))


def tx_producer(cluster, group: str, listener: Listener) -> TransactionProducer:
    # heartbeats every 200 ms: the broker learns the producer's channel quickly
    p = TransactionProducer(group, cluster.namesrv_addr, listener=listener, heartbeat_broker_interval=200)
    p.start()
    return p


def send(p: TransactionProducer, topic: str, key: str, state: LocalTransactionState, **props):
    msg = Message(topic, f"body-{key}".encode(), tags="TagTx", keys=key, properties=props or None)
    return p.send_message_in_transaction(msg, state)


@pytest.fixture
def fast_cluster(tmp_path, request):
    with start_dev_cluster(str(tmp_path / "store"), in_process=True, broker_config=dict(MANUAL_CHECKS),
                           cluster=cluster_mode(request)) as c:
        yield c


def test_outcomes_reach_a_push_consumer_exactly_once(fast_cluster):
    """COMMIT at once and COMMIT on check are consumed once each; ROLLBACK at once and on check
    never; the half messages stay out of the topic until committed."""
    c = fast_cluster
    topic, group = unique("TxTopic"), unique("tx_pg")
    listener = Listener(check=lambda m: COMMIT if m.keys[0] == "check-commit" else ROLLBACK)
    p = tx_producer(c, group, listener)
    try:
        results = {k: send(p, topic, k, s) for k, s in (("commit", COMMIT), ("rollback", ROLLBACK),
                                                        ("check-commit", UNKNOW), ("check-rollback", UNKNOW))}
        wait_until(lambda: ops_count(c) == 2, what="the op messages of the first two")
        assert keys_in(c, topic) == Counter(commit=1)  # the UNKNOW ones are still half messages
        assert {r.local_transaction_state for r in results.values()} == {COMMIT, ROLLBACK, UNKNOW}
        assert check_round(c, group) == 2
        wait_until(lambda: ops_count(c) == 4, what="both checks answered")
        assert listener.checked_keys() == Counter({"check-commit": 1, "check-rollback": 1})
        wait_until(lambda: keys_in(c, topic) == Counter({"commit": 1, "check-commit": 1}),
                   what="the checked commit in the topic")
    finally:
        p.shutdown()
    received = Received()
    seen = received.messages
    cgroup = unique("tx_cg")
    consumer = PushConsumer(cgroup, c.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                            rebalance_interval=500, persist_consumer_offset_interval=200, suspend_timeout=1000)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(received)
    consumer.start()
    try:
        b = c.broker

        def all_consumed() -> bool:  # the group's committed offsets reached the end of every queue
            ends = on_loop(c, lambda: {q: b.store.get_max_offset_in_queue(topic, q) for q in range(4)})
            return all(b.offsets.query(cgroup, topic, q) == end for q, end in ends.items())

        wait_until(lambda: len(seen) >= 2 and all_consumed(), what="the topic consumed to its end")
    finally:
        consumer.shutdown()
    assert Counter(m.keys[0] for m in seen) == Counter({"commit": 1, "check-commit": 1})
    for m in seen:
        r = results[m.keys[0]]
        assert m.msg_id == r.msg_id and m.body == f"body-{m.keys[0]}".encode() and m.tags == "TagTx"
        assert m.topic == topic and m.queue_id == r.message_queue.queue_id
        assert MessageSysFlag.transaction_value(m.sys_flag) == MessageSysFlag.TRANSACTION_COMMIT_TYPE
        # the committed record points at the half record it came from (a checked one: at the copy)
        half = decode_message(on_loop(c, lambda m=m: b.store.look_message_by_offset(m.prepared_transaction_offset)))[0]
        assert half.topic == TRANS_HALF_TOPIC and half.msg_id == m.msg_id
        # as Java, the stored properties string still has the half message's bookkeeping
        assert m.get_property("REAL_TOPIC") == topic and m.get_property("PGROUP") == group
    # four outcomes -> four op messages, tag "d", body = a half queue offset
    ops = stored(c, TRANS_OP_HALF_TOPIC, range(1))
    assert len(ops) == 4 and {o.tags for o in ops} == {"d"}
    halves = {h.queue_offset: h for h in stored(c, TRANS_HALF_TOPIC, range(1))}
    assert sorted(halves[int(o.body)].keys[0] for o in ops) == ["check-commit", "check-rollback", "commit",
                                                                  "rollback"]


def test_half_messages_share_the_half_queue_and_keep_their_real_queue(fast_cluster):
    c = fast_cluster
    topic = unique("TxQueues")
    p = tx_producer(c, unique("tx_pg"), Listener())
    try:
        sel = lambda mqs, msg, arg: mqs[arg]  # noqa: E731
        rs = []
        for q in (2, 0, 3):
            msg = Message(topic, b"x", keys=f"q{q}")
            msg.put_property("TRAN_MSG", "true")
            msg.put_property("PGROUP", p.group)
            rs.append(p.send(msg, sel, q))  # a half message sent without ending it
    finally:
        p.shutdown()
    assert [r.message_queue.queue_id for r in rs] == [2, 0, 3]
    assert [r.queue_offset for r in rs] == [0, 1, 2]  # offsets in the one half queue
    halves = stored(c, TRANS_HALF_TOPIC)
    assert [(h.queue_id, h.get_property("REAL_QID"), h.get_property("REAL_TOPIC")) for h in halves] == [
        (0, "2", topic), (0, "0", topic), (0, "3", topic)]
    assert all(MessageSysFlag.transaction_value(h.sys_flag) == MessageSysFlag.TRANSACTION_NOT_TYPE for h in halves)
    assert stored(c, topic) == []


def test_end_transaction_checks_group_and_offsets_as_java(tmp_path, client):
    """END_TRANSACTION invoked synchronously (SDKs send it oneway) shows Java's answers."""
    with start_dev_cluster(str(tmp_path / "s"), in_process=True,
                           broker_config={"transaction_check_interval": 60_000}) as c:
        topic, group = unique("TxEnd"), unique("tx_pg")
        p = tx_producer(c, group, Listener())
        try:
            r = send(p, topic, "k", UNKNOW)
        finally:
            p.shutdown()
        offset = decode_offset_msg_id(r.offset_msg_id)[2]
        good = {"producerGroup": group, "tranStateTableOffset": str(r.queue_offset), "commitLogOffset": str(offset),
                "commitOrRollback": "8", "fromTransactionCheck": "false", "msgId": r.msg_id}

        def end(**changes):
            return client.invoke(c.broker_addr, RequestCode.END_TRANSACTION, {**good, **changes})

        for changes, remark in (({"producerGroup": "other"}, "The producer group wrong"),
                                ({"tranStateTableOffset": "7"}, "The transaction state table offset wrong"),
                                ({"commitLogOffset": "3"}, "Find prepared transaction message failed")):
            resp = end(**changes)
            assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, remark)
        assert stored(c, topic) == [] and stored(c, TRANS_OP_HALF_TOPIC) == []
        for from_check in ("false", "true"):  # UNKNOW (0) is logged and left alone: no answer
            with pytest.raises(RemotingTimeoutError):
                client.invoke(c.broker_addr, RequestCode.END_TRANSACTION,
                              {**good, "commitOrRollback": "0", "fromTransactionCheck": from_check}, timeout_ms=300)
        assert end().code == ResponseCode.SUCCESS
        assert keys_in(c, topic) == Counter(k=1)
        assert [o.body for o in stored(c, TRANS_OP_HALF_TOPIC)] == [str(r.queue_offset).encode()]


def test_check_count_limit_then_discarded(tmp_path):
    """transactionCheckMax=3: three checks answered UNKNOW, then the half message is moved to
    TRANS_CHECK_MAX_TIME_TOPIC and never checked or delivered again."""
    cfg = {"transaction_check_interval": 100, "transaction_time_out": 300, "transaction_check_max": 3}
    with start_dev_cluster(str(tmp_path / "s"), in_process=True, broker_config=cfg) as c:
        topic = unique("TxLimit")
        listener = Listener(check=UNKNOW)
        p = tx_producer(c, unique("tx_pg"), listener)
        try:
            r = send(p, topic, "limit", UNKNOW)
            wait_until(lambda: len(stored(c, TRANS_CHECK_MAX_TIME_TOPIC, range(1))) == 1, what="the discard")
            svc = c.broker.transactions.check_service
            rounds = svc.rounds
            wait_until(lambda: svc.rounds >= rounds + 3, what="three more check rounds")
        finally:
            p.shutdown()
        assert listener.checked_keys() == Counter(limit=3)
        (dead,) = stored(c, TRANS_CHECK_MAX_TIME_TOPIC, range(1))
        assert dead.msg_id == r.msg_id and dead.get_property("TRANSACTION_CHECK_TIMES") == "3"
        assert dead.get_property("REAL_TOPIC") == topic and dead.body == b"body-limit"
        assert stored(c, topic) == []


def test_check_immunity_time_property_is_honoured(tmp_path):
    """transactionTimeOut is 60 s, but a message with CHECK_IMMUNITY_TIME_IN_SECONDS=1 is checked
    after about a second (not before), by the periodic rounds (every 100 ms). (As Java, the half
    queue is checked in order: a younger message without the property in front of it would hold
    it back.)"""
    cfg = {"transaction_check_interval": 100, "transaction_time_out": 60_000}
    with start_dev_cluster(str(tmp_path / "s"), in_process=True, broker_config=cfg) as c:
        topic = unique("TxImmune")
        first_check: list[float] = []
        born = time.monotonic()
        listener = Listener(check=lambda m: first_check.append(time.monotonic()) or UNKNOW)
        p = tx_producer(c, unique("tx_pg"), listener)
        try:
            r = send(p, topic, "immune-1s", UNKNOW, CHECK_IMMUNITY_TIME_IN_SECONDS="1")
            wait_until(lambda: first_check, what="the check")
        finally:
            p.shutdown()
        assert 0.9 <= first_check[0] - born < 5
        m = listener.checked[0]
        assert m.msg_id == r.msg_id and m.get_property("CHECK_IMMUNITY_TIME_IN_SECONDS") == "1"
        assert stored(c, topic) == []


def test_pending_half_message_is_still_checked_after_a_restart(tmp_path):
    """A broker stopped with an UNKNOW transaction pending checks it after its restart (a new
    producer of the group answers COMMIT); the committed one is not checked; the check progress
    is persisted as CID_RMQ_SYS_TRANS offsets in consumerOffset.json."""
    store = str(tmp_path / "store")
    topic, group = unique("TxRestart"), unique("tx_pg")
    first = Listener()
    with start_dev_cluster(store, in_process=True, broker_config={"transaction_check_interval": 60_000}) as c:
        p = tx_producer(c, group, first)
        try:
            send(p, topic, "done-before", COMMIT)
            pending = send(p, topic, "pending", UNKNOW)
            wait_until(lambda: ops_count(c) == 1, what="the commit's op message")
        finally:
            p.shutdown()
        assert keys_in(c, topic) == Counter({"done-before": 1})
    assert first.checked == []
    second = Listener(check=COMMIT)
    with start_dev_cluster(store, in_process=True, broker_config=dict(MANUAL_CHECKS)) as c:
        p = tx_producer(c, group, second)
        try:
            # a producer learns brokers from routes; this one sends nothing, so look the topic up
            # and heartbeat now instead of waiting for the periodic tasks (30 s)
            p.fetch_publish_queues(topic)
            p.instance.run(p.instance.send_heartbeat_to_all(), 5)
            assert check_round(c, group) == 1
            wait_until(lambda: keys_in(c, topic) == Counter({"done-before": 1, "pending": 1}),
                       what="the pending transaction committed after the restart")
            end = assert_settled(c)
        finally:
            p.shutdown()
        assert second.checked_keys() == Counter(pending=1)
        assert second.checked[0].msg_id == pending.msg_id and second.checked[0].topic == topic
    with open(os.path.join(store, "config", "consumerOffset.json")) as fh:
        table = json.loads(re.sub(r"([{,])(\d+):", r'\1"\2":', fh.read()))["offsetTable"]  # fastjson int keys
    assert table[f"{TRANS_HALF_TOPIC}@CID_RMQ_SYS_TRANS"] == {"0": end}
    assert f"{TRANS_OP_HALF_TOPIC}@CID_RMQ_SYS_TRANS" in table


# ------------------------------------------------------------------ wire level, vs the Java capture

def _capture_frames() -> list[dict]:
    return load_capture("java-transaction")


def test_frames_match_the_java_capture(fast_cluster):
    """END_TRANSACTION (both kinds) from the SDK and CHECK_TRANSACTION_STATE from the broker carry
    the fields Java 4.9.8 put on the wire (java-transaction.jsonl), with consistent values."""
    frames = _capture_frames()
    java_ends = [f["header"]["extFields"] for f in frames if f["code"] == 37 and f["from"] == "client"]
    java_checks = [f for f in frames if f["code"] == 39 and f["from"] == "broker"]
    java_sends = [f["header"]["extFields"] for f in frames if f["code"] == 310 and f["from"] == "client"]
    assert len(java_ends) == 6 and len(java_checks) == 2
    c = fast_cluster
    b = c.broker
    ends: list = []
    original = b.server._processors[RequestCode.END_TRANSACTION]

    def record_end(ch, cmd):
        ends.append(cmd)
        return original(ch, cmd)

    b.server.register_processor(RequestCode.END_TRANSACTION, record_end)
    listener = Listener(check=lambda m: COMMIT if m.keys[0] == "tx-commit-on-check" else ROLLBACK)
    p = tx_producer(c, unique("tx_pg"), listener)
    checks: list = []
    inst = p.instance
    on_check = inst.remoting._processors[RequestCode.CHECK_TRANSACTION_STATE]

    def record_check(ch, cmd):
        checks.append(cmd)
        return on_check(ch, cmd)

    inst.remoting.register_processor(RequestCode.CHECK_TRANSACTION_STATE, record_check)
    topic = unique("CapTxTopic")
    try:
        sent = [send(p, topic, k, s) for k, s in (("tx-commit-on-check", UNKNOW), ("tx-rollback-on-check", UNKNOW),
                                                  ("tx-commit-now", COMMIT), ("tx-rollback-now", ROLLBACK))]
        wait_until(lambda: len(ends) == 4 and ops_count(c) == 2, what="four END_TRANSACTION frames")
        assert check_round(c, p.group) == 2
        wait_until(lambda: len(ends) == 6 and ops_count(c) == 4, what="six END_TRANSACTION frames")
    finally:
        p.shutdown()
    # the half messages' send responses: queueOffset counts in the one half queue
    java_offsets = [int(f["header"]["extFields"]["queueOffset"]) for f in frames if f.get("request_code") == 310]
    assert [r.queue_offset for r in sent] == java_offsets == [0, 1, 2, 3]
    assert {s["f"] for s in java_sends} == {"4"}  # sysFlag of Java's half messages, as the SDK's
    by_check = {False: [], True: []}
    for cmd in ends:
        by_check[cmd.ext_fields["fromTransactionCheck"] == "true"].append(cmd.ext_fields)
    java_by_check = {False: [e for e in java_ends if e["fromTransactionCheck"] == "false"],
                     True: [e for e in java_ends if e["fromTransactionCheck"] == "true"]}
    for kind in (False, True):
        assert [set(e) for e in by_check[kind]] == [set(e) for e in java_by_check[kind]], kind
    assert [e["commitOrRollback"] for e in by_check[False]] == [e["commitOrRollback"] for e in java_by_check[False]]
    assert sorted(e["commitOrRollback"] for e in by_check[True]) == ["12", "8"]
    for e, r in zip(by_check[False], sent, strict=True):
        assert e["msgId"] == r.msg_id and e["tranStateTableOffset"] == str(r.queue_offset)
        assert e["commitLogOffset"] == str(decode_offset_msg_id(r.offset_msg_id)[2]) and e["bname"] == "broker-a"
    # CHECK_TRANSACTION_STATE: header fields and body as the Java broker sends them
    assert len(checks) == 2
    for cmd in checks:
        jf = java_checks[0]
        h = cmd.ext_fields
        assert set(h) == set(jf["header"]["extFields"]) and cmd.flag & 0x2  # oneway
        (m,) = decode_messages(cmd.body)
        (jm,) = jf["decoded"]["messages"]
        assert set(m.properties) == set(jm["properties"])
        assert h["msgId"] == h["transactionId"] == m.msg_id
        assert decode_offset_msg_id(h["offsetMsgId"])[2] == int(h["commitLogOffset"]) == m.commit_log_offset
        assert int(h["tranStateTableOffset"]) == m.queue_offset >= 4  # the re-appended copy
        assert m.topic == topic and m.sys_flag == jm["sysFlag"] == 0
        assert m.properties["TRANSACTION_CHECK_TIMES"] == "1" and m.properties["WAIT"] == "false"
        assert m.properties["REAL_QID"] == str(m.queue_id)
        mine = next(e for e in by_check[True] if e["msgId"] == h["msgId"])
        assert (mine["commitLogOffset"], mine["tranStateTableOffset"], mine["transactionId"]) == (
            h["commitLogOffset"], h["tranStateTableOffset"], h["transactionId"])
    wait_until(lambda: keys_in(c, topic) == Counter({"tx-commit-now": 1, "tx-commit-on-check": 1}),
               what="the two commits in the topic")


def test_java_client_frames_replayed_against_the_broker(fast_cluster):
    """The Java 4.9.8 TransactionMQProducer's own frames (sends, END_TRANSACTION 0/8/12, heartbeat)
    replayed on one connection: the broker answers the sends as 4.9.8 did (half queue offsets
    0-3), checks the two UNKNOW transactions on that connection about the re-appended copies
    (offsets 4 and 5, as in the capture), and the answers from the check settle them."""
    frames = load_capture("java-transaction")
    c = fast_cluster
    checks: list[RemotingCommand] = []

    async def on_check(channel, cmd):
        checks.append(cmd)

    async def main():
        client = RemotingClient()
        client.register_processor(RequestCode.CHECK_TRANSACTION_STATE, on_check)
        addr = c.broker_addr
        try:
            offsets: dict[str, int] = {}  # captured commitLogOffset -> ours
            replies = {f["reply_to"]: f for f in frames if "reply_to" in f}
            for f in frames:
                if f["from"] != "client" or f["server_port"] != 10911 or f["code"] not in (310, 37, 34):
                    continue
                ext = dict(f["header"].get("extFields") or {})
                body = base64.b64decode(f["body_b64"]) if f.get("body_b64") else b""
                if f["code"] == 310:
                    # born now: a half message born longer ago than the file reserved time (72 h,
                    # Java's needSkip) is never checked, and the capture ages
                    ext["g"] = str(int(time.time() * 1000))
                if f["code"] == 37:
                    if ext["fromTransactionCheck"] == "true":
                        continue  # answered below, to our own checks
                    ext["commitLogOffset"] = str(offsets[ext["commitLogOffset"]])
                    await client.invoke_oneway(addr, RemotingCommand.request(37, ext, oneway=True))
                    continue
                resp = await client.invoke(addr, RemotingCommand.request(f["code"], ext, body), 5000)
                captured = replies[f["seq"]]
                assert resp.code == captured["code"] == ResponseCode.SUCCESS
                if f["code"] == 310:
                    cap = captured["header"]["extFields"]
                    assert set(resp.ext_fields) == set(cap)
                    assert (resp.ext_fields["queueId"], resp.ext_fields["queueOffset"]) == (
                        cap["queueId"], cap["queueOffset"])
                    offsets[str(decode_offset_msg_id(cap["msgId"])[2])] = decode_offset_msg_id(
                        resp.ext_fields["msgId"])[2]
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 15
            while ops_count(c) < 2 and loop.time() < deadline:
                await asyncio.sleep(0.02)
            assert await loop.run_in_executor(None, check_round, c, "cap_tx_producer_group") == 2
            while len(checks) < 2 and loop.time() < deadline:
                await asyncio.sleep(0.02)
            assert len(checks) == 2, "no CHECK_TRANSACTION_STATE for the two UNKNOW transactions"
            java_answers = {f["header"]["extFields"]["msgId"]: f["header"]["extFields"] for f in frames
                            if f["code"] == 37 and f["header"]["extFields"]["fromTransactionCheck"] == "true"}
            for cmd in checks:  # answer as the Java client did, about our copies
                answer = dict(java_answers[cmd.ext_fields["msgId"]])
                for k in ("commitLogOffset", "tranStateTableOffset", "transactionId"):
                    answer[k] = cmd.ext_fields[k]
                await client.invoke_oneway(addr, RemotingCommand.request(37, answer, oneway=True))
        finally:
            await client.close()

    asyncio.run(main())
    java_checks = {f["header"]["extFields"]["msgId"]: f for f in frames if f["code"] == 39}
    assert sorted(int(cmd.ext_fields["tranStateTableOffset"]) for cmd in checks) == [4, 5]
    for cmd in checks:
        jf = java_checks[cmd.ext_fields["msgId"]]
        assert set(cmd.ext_fields) == set(jf["header"]["extFields"])
        assert cmd.ext_fields["tranStateTableOffset"] == jf["header"]["extFields"]["tranStateTableOffset"]
        (m,) = decode_messages(cmd.body)
        (jm,) = jf["decoded"]["messages"]
        assert m.properties == jm["properties"]  # identical, values included
        assert (m.topic, m.queue_id, m.queue_offset, m.sys_flag, m.body) == (
            jm["topic"], jm["queueId"], jm["queueOffset"], jm["sysFlag"], base64.b64decode(jm["body_b64"])
            if "body_b64" in jm else jm["body_text"].encode())
    wait_until(lambda: keys_in(c, "CapTxTopic") == Counter({"tx-commit-now": 1, "tx-commit-on-check": 1}),
               what="the two commits in CapTxTopic")
    # each op message is its own put after its commit (in DLedger mode a quorum round later)
    wait_until(lambda: ops_count(c) == 4, what="the four op messages")


def test_sync_flush_broker_commits_and_checks(tmp_path):
    """Under SYNC_FLUSH the puts run on worker threads: commit at once and commit on check work."""
    cfg = {**MANUAL_CHECKS, "flush_disk_type": "SYNC_FLUSH"}
    with start_dev_cluster(str(tmp_path / "s"), in_process=True, broker_config=cfg) as c:
        topic = unique("TxSync")
        listener = Listener(check=COMMIT)
        p = tx_producer(c, unique("tx_pg"), listener)
        try:
            send(p, topic, "now", COMMIT)
            send(p, topic, "later", UNKNOW)
            wait_until(lambda: ops_count(c) == 1, what="the commit's op message")
            assert check_round(c, p.group) == 1
            wait_until(lambda: keys_in(c, topic) == Counter(now=1, later=1), what="both commits")
        finally:
            p.shutdown()
        assert listener.checked_keys() == Counter(later=1)
        assert len(stored(c, TRANS_OP_HALF_TOPIC, range(1))) == 2


def test_a_slave_refuses_end_transaction(tmp_path, client):
    with start_dev_cluster(str(tmp_path / "s"), in_process=True, broker_config={"broker_id": 1, "broker_role": "SLAVE"}) as c:
        assert c.broker.transactions.check_service._task is None  # no checks on a slave
        resp = client.invoke(c.broker_addr, RequestCode.END_TRANSACTION, {
            "producerGroup": "g", "tranStateTableOffset": "0", "commitLogOffset": "0", "commitOrRollback": "8",
            "fromTransactionCheck": "false", "msgId": "m"})
        assert resp.code == ResponseCode.SLAVE_NOT_AVAILABLE


def test_many_pending_transactions_are_each_settled_by_one_check(fast_cluster):
    c = fast_cluster
    topic = unique("TxMany")
    listener = Listener(check=lambda m: COMMIT if int(m.keys[0][1:]) % 2 == 0 else ROLLBACK)
    p = TransactionProducer(unique("tx_pg"), c.namesrv_addr, listener=listener, heartbeat_broker_interval=200,
                            check_thread_pool_size=4)
    p.start()
    try:
        for i in range(40):
            send(p, topic, f"k{i}", UNKNOW)
        want = Counter(f"k{i}" for i in range(0, 40, 2))
        assert check_round(c, p.group) == 40
        wait_until(lambda: ops_count(c) == 40, what="40 answers")
        wait_until(lambda: keys_in(c, topic) == want, what="the 20 commits")
        assert_settled(c)
    finally:
        p.shutdown()
    assert listener.checked_keys() == Counter(f"k{i}" for i in range(40))
    assert keys_in(c, topic) == want
    assert len(stored(c, TRANS_OP_HALF_TOPIC, range(1))) == 40


def test_compressed_body_survives_check_and_commit(fast_cluster):
    """An 8 KiB body is sent compressed (sysFlag bit 0): the check carries it as stored and the
    committed message inflates to the original."""
    c = fast_cluster
    topic = unique("TxBig")
    body = bytes(range(256)) * 32
    listener = Listener(check=COMMIT)
    p = tx_producer(c, unique("tx_pg"), listener)
    try:
        r = p.send_message_in_transaction(Message(topic, body, keys="big"), UNKNOW)
        assert check_round(c, p.group) == 1
        wait_until(lambda: keys_in(c, topic) == Counter(big=1), what="the commit")
    finally:
        p.shutdown()
    assert listener.checked[0].body == body and listener.checked[0].sys_flag & MessageSysFlag.COMPRESSED
    (m,) = stored(c, topic)
    assert m.body == body and m.msg_id == r.msg_id and m.sys_flag & MessageSysFlag.COMPRESSED


def test_reject_transaction_message_refuses_half_messages_only(fast_cluster):
    """``rejectTransactionMessage=true``: a half message gets NO_PERMISSION with Java's remark
    (nothing stored, the local transaction never runs); ordinary sends still pass."""
    c = fast_cluster
    topic, group = unique("TxRejected"), unique("tx_pg_rej")
    c.broker.update_config({"rejectTransactionMessage": "true"})
    executed: list = []

    class Recording(Listener):
        def execute_local_transaction(self, msg, arg):
            executed.append(msg)
            return arg

    p = tx_producer(c, group, Recording())
    try:
        with pytest.raises(MQClientError) as info:
            send(p, topic, "refused", COMMIT)
        cause = info.value.__cause__
        assert isinstance(cause, MQBrokerError) and cause.code == ResponseCode.NO_PERMISSION
        assert cause.remark == f"the broker[{c.broker.config.broker_ip1}] sending transaction message is forbidden"
        assert executed == []
        assert stored(c, TRANS_HALF_TOPIC, range(1)) == []
        assert p.send(Message(topic, b"plain", keys="plain")).send_status.name == "SEND_OK"
        c.broker.update_config({"rejectTransactionMessage": "false"})
        assert send(p, topic, "accepted", COMMIT).local_transaction_state is COMMIT
        wait_until(lambda: keys_in(c, topic) == Counter(plain=1, accepted=1), what="the accepted transaction")
    finally:
        p.shutdown()


def test_listener_exceptions_are_reported_in_end_transaction_remarks(fast_cluster):
    """As Java's producer: a raising ``execute_local_transaction`` ends the transaction UNKNOW with
    remark ``executeLocalTransactionBranch exception: <exception>``; a raising check answers with
    ``checkLocalTransactionState Exception: <exception>, <innermost frame>``."""
    c = fast_cluster
    topic, group = unique("TxRaising"), unique("tx_pg_raise")
    ends: list[RemotingCommand] = []

    def record(_channel, cmd):
        if cmd.code == RequestCode.END_TRANSACTION:
            ends.append(cmd)

    c.broker.server.add_request_hook(record)

    class Raising(Listener):
        def execute_local_transaction(self, msg, arg):
            raise ValueError("db down")

        def check_local_transaction(self, msg):
            raise KeyError("order-7")

    p = tx_producer(c, group, Raising())
    try:
        result = send(p, topic, "raising", COMMIT)
        assert result.local_transaction_state is UNKNOW
        wait_until(lambda: len(ends) == 1, what="END_TRANSACTION")
        assert ends[0].remark == "executeLocalTransactionBranch exception: ValueError: db down"
        assert ends[0].ext_fields["commitOrRollback"] == "0"
        assert check_round(c, group) == 1
        wait_until(lambda: len(ends) == 2, what="the check's END_TRANSACTION")
        assert ends[1].ext_fields["fromTransactionCheck"] == "true"
        assert re.fullmatch(r"checkLocalTransactionState Exception: KeyError: 'order-7', "
                            r"check_local_transaction\(test_transactions\.py:\d+\)", ends[1].remark)
    finally:
        p.shutdown()
