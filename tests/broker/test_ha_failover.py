"""SIGKILL of a master under load in a 2m-2s-sync cluster (one process per broker, issue 20).

Two producer threads send synchronously to a topic on both masters while a consumer group
consumes; broker-a's master is SIGKILLed mid-run. What must hold (SYNC_MASTER: SEND_OK means
the slave has the bytes):

* every message acknowledged SEND_OK - before or after the kill - is consumed (broker-a's from
  its slave), by the running group and by a group started after the kill (which can read
  broker-a's messages from nowhere but the slave);
* the producers continue on broker-b (SEND_OK from broker-b after the kill);
* when broker-a's master returns, the offsets the running group committed meanwhile (on the
  slave) are re-committed to the master, not lost.

The figures are printed (``pytest -s``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

from rocketmq_broker.embedded import read_announcements, start_dev_cluster
from rocketmq_sdk import ConsumeConcurrentlyStatus, Message, Producer, PushConsumer
from rocketmq_sdk.admin.client import AdminClient
from rocketmq_sdk.exceptions import MQError
from rocketmq_sdk.protocol.codes import RequestCode
from rocketmq_sdk.protocol.message import SendStatus

from tests.broker.conftest import SyncClient, assert_restartable
from tests.conftest import wait_until

TOPIC = "HaFailover"
FAST = {"poll_name_server_interval": 1000, "persist_consumer_offset_interval": 500,
        "heartbeat_broker_interval": 1000}


def _consumer(group: str, namesrv: str, seen: Counter, lock: threading.Lock) -> PushConsumer:
    c = PushConsumer(group, namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST)
    c.subscribe(TOPIC, "*")

    def listener(msgs, ctx):
        with lock:
            for m in msgs:
                seen[m.keys[0]] += 1
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c.register_message_listener(listener)
    c.start()
    return c


def test_sigkill_of_a_master_under_load_loses_nothing_acknowledged(tmp_path):
    with start_dev_cluster(str(tmp_path), cluster="2m-2s-sync",
                           broker_config={"mappedFileSizeCommitLog": 8 * 1024 * 1024}) as c:
        admin = AdminClient(c.namesrv_addr)
        try:
            masters = [b.addr for b in c.brokers if b.broker_id == 0]
            for addr in masters:
                admin.create_topic(TOPIC, broker_addr=addr, read_queue_nums=4, write_queue_nums=4)
        finally:
            admin.close()
        # a slave serves pulls of topics it knows: SlaveSynchronize copies the master's topic
        # config every 10 s (first 3 s after start), as Java's; wait for it before the kill
        client = SyncClient()
        try:
            for b in (b for b in c.brokers if b.broker_id > 0):
                wait_until(lambda b=b: TOPIC.encode() in client.invoke(b.addr, RequestCode.GET_ALL_TOPIC_CONFIG).body,
                           30, f"slave {b.name} to get the topic")
        finally:
            client.close()
        lock = threading.Lock()
        seen: Counter = Counter()
        late_seen: Counter = Counter()
        acked: dict[str, tuple[str, float]] = {}  # key -> (broker name, time)
        failures: Counter = Counter()
        stop = threading.Event()
        killed_at = [0.0]
        consumer = _consumer("ha_fo_cg", c.namesrv_addr, seen, lock)
        producer = Producer("ha_fo_pg", c.namesrv_addr, send_msg_timeout=3000, **FAST)
        producer.start()
        late = None

        def send_loop(n: int) -> None:
            i = 0
            while not stop.is_set():
                key = f"t{n}-{i}"
                i += 1
                try:
                    r = producer.send(Message(TOPIC, b"flight %s" % key.encode(), keys=key))
                except MQError as exc:
                    failures[type(exc).__name__] += 1
                    continue
                if r.send_status is SendStatus.SEND_OK:
                    with lock:
                        acked[key] = (r.message_queue.broker_name, time.monotonic())
                else:
                    failures[r.send_status.value] += 1

        threads = [threading.Thread(target=send_loop, args=(n,), daemon=True) for n in range(2)]
        try:
            for t in threads:
                t.start()
            wait_until(lambda: sum(1 for b, _ in list(acked.values()) if b == "broker-a") >= 100, 30,
                       "load on broker-a")
            a = c.broker("broker-a", 0)
            assert_restartable(int(a.addr.rsplit(":", 1)[1]), int(a.ha_addr.rsplit(":", 1)[1]))
            killed_at[0] = time.monotonic()
            c.kill_broker("broker-a", 0)  # SIGKILL
            wait_until(lambda: sum(1 for b, t in list(acked.values()) if b == "broker-b" and t > killed_at[0] + 1)
                       >= 100, 30, "the producers to continue on broker-b")
            stop.set()
            for t in threads:
                t.join(15)
            late = _consumer("ha_fo_late_cg", c.namesrv_addr, late_seen, lock)
            wanted = set(acked)
            wait_until(lambda: wanted <= set(seen), 60, "the running group to consume every SEND_OK message")
            wait_until(lambda: wanted <= set(late_seen), 60, "the late group to consume every SEND_OK message")
            on_a = [k for k, (b, _) in acked.items() if b == "broker-a"]
            assert on_a and all(k in late_seen for k in on_a)  # read from broker-a's slave only
            after = [k for k, (_, t) in acked.items() if t > killed_at[0] + 1]
            assert after and all(acked[k][0] == "broker-b" for k in after)
            # the master returns: the running group's offsets reach it again
            c.start_broker("broker-a", 0)
            admin = AdminClient(c.namesrv_addr)
            try:
                def caught_up() -> bool:
                    try:
                        progress = admin.consumer_progress("ha_fo_cg", TOPIC)
                    except MQError:
                        return False  # the route to the returning master is not there yet
                    a = [q for q in progress.queues if q.broker_name == "broker-a"]
                    return len(a) == 4 and all(q.consumer_offset == q.broker_offset for q in a) \
                        and sum(q.broker_offset for q in a) >= len(on_a)
                wait_until(caught_up, 60, "broker-a's master to get the group's offsets back")
            finally:
                admin.close()
            dup = sum(n - 1 for n in seen.values() if n > 1)
            print(f"\nfailover figures: acked SEND_OK {len(acked)} (broker-a {len(on_a)}, after the kill "
                  f"{len(after)}), failed sends {dict(failures)}, consumed {len(seen)} keys, duplicates {dup}, "
                  f"late group {len(late_seen)} keys, lost 0")
        finally:
            stop.set()
            for t in threads:
                t.join(15)
            producer.shutdown()
            consumer.shutdown()
            if late is not None:
                late.shutdown()


def test_dev_command_prints_every_broker_of_a_mode_and_stops_them_all(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "rocketmq_broker", "dev", "--cluster", "2m-2s-async",
                             "--store-dir", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        lines = read_announcements(proc, 60)
        rows = {k: v.split() for k, v in lines.items() if k.startswith("BROKER.")}
        assert {k: v[0] for k, v in rows.items()} == {
            "BROKER.broker-a.0": "ASYNC_MASTER", "BROKER.broker-b.0": "ASYNC_MASTER",
            "BROKER.broker-a.1": "SLAVE", "BROKER.broker-b.1": "SLAVE"}
        assert lines["BROKER"] == rows["BROKER.broker-a.0"][1]
        pids = [int(v[3].removeprefix("pid=")) for v in rows.values()]
        assert all(v[2].startswith("ha=127.0.0.1:") for v in rows.values())
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    for pid in pids:  # every broker process was stopped with the command
        wait_until(lambda pid=pid: not os.path.exists(f"/proc/{pid}") or _zombie(pid), 10, f"broker {pid} to exit")


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True
