"""Issue 32's faults on a broker answering as RocketMQ 5.x (part of ``make faults`` at full size;
quick sizes in ``make test``):

- broker SIGKILL with timer messages pending: after the restart every acknowledged timer message
  is delivered, none before its time, and none of those recalled (RECALL_MESSAGE) before the kill;
- SIGKILL of a POP consumer process mid-batch: every message is consumed by the group at least
  once (the killed consumer's messages come back after their invisible time).
"""

from __future__ import annotations

import sys
import textwrap
import threading
import time

from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import ConsumeConcurrentlyStatus, Message, Producer, PushConsumer, SimpleConsumer
from rocketmq_sdk.consumer.pop_consume import PopSettings

from tests.conftest import wait_until
from tests.faults.faults_helpers import FULL, kill_consumer_mid_run, record
from tests.faults.test_faults import ROOT

TOPIC = "TopicFaultsV5"


def _dev_cmd(store: str) -> list[str]:
    return [sys.executable, "-m", "rocketmq_broker", "dev", "--store-dir", store, "--namesrv-port", "0",
            "--broker-port", "0", "--broker-version", "5.3.3", "--recall-message-enable"]


def test_broker_sigkill_with_timers_pending_loses_none_and_delivers_none_early(tmp_path, server_process):
    total = 1000 if FULL else 60
    store = str(tmp_path / "store")
    broker = server_process(_dev_cmd(store))
    asked: dict[str, int] = {}
    recalled: dict[str, int] = {}
    with Producer("pg_timer_faults", broker.lines["NAMESRV"]) as p:
        p.send(Message(TOPIC, b"warm-up", keys="warm-up"))
        base = int(time.time() * 1000)
        for i in range(total):
            at = base + 3000 + (i * 7919) % 4000  # 3..7 s ahead, out of order
            r = p.send(Message(TOPIC, b"t", keys=f"t{i}", deliver_time_ms=at))
            assert r.send_status.name == "SEND_OK"
            if i % 5 == 0:  # recalled before the kill: never delivered, even after the restart
                assert p.recall_message(TOPIC, r.recall_handle) == r.msg_id
                recalled[f"t{i}"] = at
            else:
                asked[f"t{i}"] = at
    broker.kill()
    restarted = server_process(_dev_cmd(store))
    got: dict[str, int] = {}
    early: list[tuple[str, int]] = []
    c = SimpleConsumer("cg_timer_faults", restarted.lines["NAMESRV"], await_duration=0.5,
                       consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe(TOPIC)
    c.start()
    recalled_seen: list[str] = []
    past_recalled = max(recalled.values()) + 2000  # every recalled slot has fired by then (epoch ms)
    try:
        deadline = time.monotonic() + 60
        while not set(asked) <= set(got) or time.time() * 1000 < past_recalled:
            assert time.monotonic() < deadline, f"{len(set(asked) - set(got))} of {len(asked)} timer messages lost"
            for m in c.receive(32, 60):
                key = m.keys[0]
                if key in asked:
                    got.setdefault(key, m.store_timestamp)
                    if m.store_timestamp < asked[key]:
                        early.append((key, asked[key] - m.store_timestamp))
                recalled_seen += [key] if key in recalled else []
                c.ack(m)
    finally:
        c.shutdown()
    late = sorted(got[k] - asked[k] for k in asked)
    record("broker SIGKILL with timers pending", timers=total, recalled=len(recalled), lost=0, early=len(early),
           recalled_delivered=len(recalled_seen), p50_late_ms=late[len(late) // 2], max_late_ms=late[-1])
    assert not early, early[:5]
    assert not recalled_seen, recalled_seen[:5]


_POP_CONSUMER = textwrap.dedent("""
    import sys, threading, time
    from rocketmq_sdk import ConsumeConcurrentlyStatus, PushConsumer
    from rocketmq_sdk.consumer.pop_consume import PopSettings
    out = threading.Lock()
    def listener(msgs, ctx):
        with out:
            sys.stdout.write("".join(m.keys[0] + "\\n" for m in msgs))
            sys.stdout.flush()
        time.sleep(0.05)  # slow batches, one at a time: the kill lands in the middle of a popped 32
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    c = PushConsumer("cg_pop_faults", sys.argv[1], pop=True, consume_thread_min=1, consume_thread_max=1,
                     pop_settings=PopSettings(poll_time_ms=1000, invisible_time_ms=3000, init_mode=0,
                                              consume_batch_max_size=8))
    c.subscribe("TopicFaultsV5")
    c.register_message_listener(listener)
    c.start()
    print("STARTED", flush=True)
    time.sleep(600)
""")


def test_pop_consumer_sigkill_mid_batch_loses_nothing(tmp_path):
    total = 3000 if FULL else 300
    cluster = start_dev_cluster(str(tmp_path / "store"), in_process=True,
                                broker_config={"broker_version": "5.3.3", "revive_interval": 200})
    producer = Producer("pg_pop_faults", cluster.namesrv_addr)
    survivor = None
    try:
        producer.start()
        keys = [f"k{i}" for i in range(total)]
        for k in keys:
            producer.send(Message(TOPIC, b"x", keys=k))
        # killed mid-batch: popped, maybe consumed, not acknowledged
        before_kill, killed_at = kill_consumer_mid_run(_POP_CONSUMER, cluster.namesrv_addr, total // 4, ROOT)
        seen: list[str] = []
        lock = threading.Lock()

        def listener(msgs, ctx):
            with lock:
                seen.extend(m.keys[0] for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        survivor = PushConsumer("cg_pop_faults", cluster.namesrv_addr, pop=True,
                                pop_settings=PopSettings(poll_time_ms=1000, invisible_time_ms=3000, init_mode=0))
        survivor.subscribe(TOPIC)
        survivor.register_message_listener(listener)
        survivor.start()
        wait_until(lambda: before_kill | set(seen) >= set(keys), 120, "every message consumed")
        record("POP consumer SIGKILL mid-batch", messages=total, consumed_before_kill=len(before_kill),
               consumed_by_survivor=len(seen), redelivered=len(before_kill & set(seen)), lost=0,
               all_done_s=round(time.monotonic() - killed_at, 2), invisible_time_s=3)
    finally:
        if survivor is not None:
            survivor.shutdown()
        producer.shutdown()
        cluster.stop()
