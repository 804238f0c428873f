"""Issue 14's fault suite: what the reference broker guarantees when things go wrong.

- SIGKILL of the broker under SYNC_FLUSH and ASYNC_FLUSH while producers send: acknowledged
  messages found after the restart, lost, duplicated, recovery time;
- SIGKILL of a consumer process mid-batch: every message consumed at least once by the group,
  takeover time of the surviving consumer;
- a full disk (a small tmpfs, root only): sends refused with code 14, broker alive, store loads;
- many idle and slow-loris connections while a producer sends: every send answered.

Quick sizes by default (part of ``make test``); ``FAULTS_FULL=1`` (``make faults``) runs the big
ones. Each scenario prints one ``FAULTS {...}`` line of figures (see ``faults_helpers.record``).
"""

from __future__ import annotations

import os
import socket
import sys
import textwrap
import threading
import time
from collections import Counter

import pytest
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import ConsumeConcurrentlyStatus, Message, Producer, PushConsumer
from rocketmq_sdk.exceptions import MQBrokerError

from tests.broker.test_crash_recovery import FILE_SIZE, THREADS, _consume_all, _send_then_kill
from tests.conftest import wait_until
from tests.faults.faults_helpers import FULL, kill_consumer_mid_run, record
from tests.tmpfs import small_tmpfs as mounted_tmpfs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _dev_cmd(store: str, flush: str) -> list[str]:
    return [sys.executable, "-m", "rocketmq_broker", "dev", "--store-dir", store, "--flush-disk-type", flush,
            "--namesrv-port", "0", "--broker-port", "0", "--commit-log-file-size", str(FILE_SIZE)]


@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_broker_sigkill_with_live_producers(tmp_path, server_process, flush):
    store = str(tmp_path / "store")
    acked, failures = _send_then_kill(server_process(_dev_cmd(store, flush)), 5000 if FULL else 1500)
    t0 = time.monotonic()
    restarted = server_process(_dev_cmd(store, flush))
    recovery_s = time.monotonic() - t0
    consumed = _consume_all(restarted.lines["NAMESRV"])
    found = {key for _, _, key, _, _ in consumed}
    lost = sorted(set(acked) - found)
    dups = sum(n - 1 for n in Counter(key for _, _, key, _, _ in consumed).values() if n > 1)
    record(f"broker SIGKILL {flush}", acked=len(acked), in_flight_failed=len(failures), found=len(consumed),
           lost=len(lost), duplicates=dups, unacked_but_stored=len(found - set(acked)),
           restart_to_ready_s=round(recovery_s, 2))
    assert not lost, lost[:5]
    assert dups == 0
    assert len(found - set(acked)) <= THREADS  # at most the sends in flight at the kill


_CONSUMER = textwrap.dedent("""
    import sys, threading, time
    from rocketmq_sdk import ConsumeConcurrentlyStatus, PushConsumer
    out = threading.Lock()
    def listener(msgs, ctx):
        with out:  # one write per batch: lines of concurrent batches never interleave
            sys.stdout.write("".join(m.keys[0] + "\\n" for m in msgs))
            sys.stdout.flush()
        time.sleep(0.02)  # a slow batch: the kill lands in the middle of one
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    c = PushConsumer("cg_faults", sys.argv[1], consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                     consume_message_batch_max_size=8, poll_name_server_interval=200,
                     heartbeat_broker_interval=200, rebalance_interval=300, persist_consumer_offset_interval=200)
    c.subscribe("TopicFaults")
    c.register_message_listener(listener)
    c.start()
    print("STARTED", flush=True)
    time.sleep(600)
""")


def test_consumer_sigkill_mid_batch_is_taken_over_at_least_once(tmp_path):
    total = 5000 if FULL else 600
    cluster = start_dev_cluster(str(tmp_path / "store"), in_process=True)
    producer = Producer("pg_faults", cluster.namesrv_addr)
    survivor = None
    try:
        producer.start()
        keys = [f"k{i}" for i in range(total)]
        for k in keys:
            producer.send(Message("TopicFaults", b"x", keys=k))
        # killed mid-batch: its offsets of the current batch were never committed
        before_kill, killed_at = kill_consumer_mid_run(_CONSUMER, cluster.namesrv_addr, total // 4, ROOT)

        seen_by_survivor: list[str] = []
        first: list[float] = []
        lock = threading.Lock()

        def listener(msgs, ctx):
            with lock:
                if not first:
                    first.append(time.monotonic())
                seen_by_survivor.extend(m.keys[0] for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        survivor = PushConsumer("cg_faults", cluster.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                                poll_name_server_interval=200, heartbeat_broker_interval=200,
                                rebalance_interval=300)
        survivor.subscribe("TopicFaults")
        survivor.register_message_listener(listener)
        survivor.start()
        try:
            wait_until(lambda: before_kill | set(seen_by_survivor) >= set(keys), 120, "every message consumed")
        except AssertionError as exc:
            missing = sorted(set(keys) - before_kill - set(seen_by_survivor), key=lambda k: int(k[1:]))
            raise AssertionError(f"{exc}: {len(missing)} of {total} never consumed, e.g. {missing[:10]}; "
                                 f"{len(before_kill)} before the kill") from None
        redelivered = len(before_kill & set(seen_by_survivor))
        record("consumer SIGKILL mid-batch", messages=total, consumed_before_kill=len(before_kill),
               consumed_by_survivor=len(seen_by_survivor), redelivered=redelivered, lost=0,
               takeover_s=round(first[0] - killed_at, 2))
    finally:
        if survivor is not None:
            survivor.shutdown()
        producer.shutdown()
        cluster.stop()


@pytest.fixture
def small_tmpfs(tmp_path):
    with mounted_tmpfs(tmp_path / "tmpfs", "24m") as mnt:
        yield mnt


# "roll": 1 MiB CommitLog files, the disk fills when a new file is needed; "mid-file": 64 MiB files
# (sparse) reserving 1 MiB ahead, the disk fills in the middle of the first file. Both with index
# files of 0.4 + 8 MB (the default geometry's hash slots, 20 MB reserved whole, would take most of
# the 24 MiB)
_DISK_FULL_CONFIGS = {
    "roll": {"mapped_file_size_commit_log": 1024 * 1024},
    "mid-file": {"mapped_file_size_commit_log": 64 * 1024 * 1024, "reserve_ahead_bytes": 1024 * 1024},
}
_SMALL_INDEX = {"max_hash_slot_num": 100_000, "max_index_num": 400_000}


@pytest.mark.parametrize("fill", sorted(_DISK_FULL_CONFIGS))
def test_disk_full_refuses_sends_with_code_14_and_the_broker_lives(small_tmpfs, client, fill):
    store = str(small_tmpfs / "store")
    config = {**_DISK_FULL_CONFIGS[fill], **_SMALL_INDEX, "disk_space_warning_level_ratio": 0.999}
    cluster = start_dev_cluster(store, in_process=True, broker_config=config)
    acked = 0
    refusal = None
    t0 = time.monotonic()
    try:
        with Producer("pg_full", cluster.namesrv_addr, retry_times_when_send_failed=0) as p:
            for _ in range(20000):
                try:  # random: the SDK's compression keeps it 4 KiB
                    p.send(Message("TopicFull", os.urandom(4096)))
                except MQBrokerError as exc:
                    refusal = exc
                    break
                acked += 1
        assert refusal is not None and refusal.code == 14, refusal
        fill_s = time.monotonic() - t0
        # the broker is alive and serves what it stored
        from tests.broker.test_hostile_names import _commit_log_offset
        _commit_log_offset(client, cluster, "TopicFull")
    finally:
        cluster.stop()
    again = start_dev_cluster(store, in_process=True, broker_config=config)
    try:
        stored = sum(again._servers[-1].store.get_max_offset_in_queue("TopicFull", q) for q in range(4))
        files = os.listdir(os.path.join(store, "commitlog"))
    finally:
        again.stop()
    if fill == "mid-file":
        assert len(files) == 1, files  # refused before the first file was full
    record(f"disk full (24 MiB tmpfs, {fill})", acked=acked, stored_after_restart=stored, refusal_code=14,
           refusal=str(refusal)[:120], fill_s=round(fill_s, 2))
    assert stored >= acked


def test_idle_and_slow_connections_do_not_stop_the_broker(tmp_path):
    idle_n, slow_n, sends = (1000, 200, 2000) if FULL else (150, 30, 200)
    cluster = start_dev_cluster(str(tmp_path / "store"), in_process=True)
    host, port = cluster.broker_addr.rsplit(":", 1)
    socks: list[socket.socket] = []
    stop = threading.Event()
    try:
        for _ in range(idle_n):
            socks.append(socket.create_connection((host, int(port)), timeout=5))
        slow = [socket.create_connection((host, int(port)), timeout=5) for _ in range(slow_n)]
        socks.extend(slow)

        def drip() -> None:  # slow-loris: a frame header one byte at a time, never finished
            frame = (1000).to_bytes(4, "big") + (100).to_bytes(4, "big") + b'{"code":10'
            i = 0
            while not stop.is_set() and i < len(frame):
                for s in slow:
                    try:
                        s.send(frame[i:i + 1])
                    except OSError:
                        pass
                i += 1
                stop.wait(0.05)

        dripper = threading.Thread(target=drip, daemon=True)
        dripper.start()
        latencies = []
        with Producer("pg_idle", cluster.namesrv_addr) as p:
            for i in range(sends):
                t = time.perf_counter()
                p.send(Message("TopicIdle", b"x%d" % i))
                latencies.append(time.perf_counter() - t)
        latencies.sort()
        record("idle and slow connections", idle=idle_n, slow_loris=slow_n, sends=sends, failed=0,
               send_p50_ms=round(latencies[len(latencies) // 2] * 1000, 2),
               send_p99_ms=round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 2))
    finally:
        stop.set()
        for s in socks:
            s.close()
        cluster.stop()
