"""DLedger faults with real broker processes (``dev --cluster dledger``): SIGKILL of the leader
while 4 threads send. Quick sizes and 500 ms heartbeats by default (``make test``); DLedger's
own timers and bigger sizes with ``FAULTS_FULL=1`` (``make faults``). Each run prints a
``FAULTS {...}`` line: acknowledged, failed, lost (must be 0), stored twice (must be 0), the
client-visible outage and the time from kill to the new master's registration."""

from __future__ import annotations

import os
import signal
import struct
import threading
import time

import pytest
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import Message, Producer
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.exceptions import MQError
from rocketmq_sdk.protocol.message_codec import decode_message

from tests.faults.faults_helpers import FULL, record

pytestmark = pytest.mark.timeout(600 if FULL else 240)

TOPIC = "DLFaultTopic"
FAST = {"heartBeatTimeIntervalMs": "500", "minVoteIntervalMs": "100", "maxVoteIntervalMs": "300"}


def read_log(member_dir: str) -> bytes:
    """The entries of a member's DLedger data files, read-only (the broker process may run)."""
    data_dir = next(os.path.join(r, "data") for r, ds, _ in os.walk(member_dir) if os.path.basename(r).startswith("dledger-"))
    out = bytearray()
    for name in sorted(os.listdir(data_dir)):
        with open(os.path.join(data_dir, name), "rb") as fh:
            buf = fh.read()
        pos = 0
        while pos + 8 <= len(buf):
            magic, size = struct.unpack_from(">ii", buf, pos)
            if magic != 1 or size < 48 or pos + size > len(buf):
                break
            out += buf[pos:pos + size]
            pos += size
        if not (pos + 8 <= len(buf) and struct.unpack_from(">i", buf, pos)[0] == -1):
            break
    return bytes(out)


def stored_bodies(log: bytes) -> list[bytes]:
    bodies, pos = [], 0
    while pos < len(log):
        size = struct.unpack_from(">i", log, pos + 4)[0]
        msg, _ = decode_message(log[pos + 48:pos + size], decompress=False)
        if msg.topic == TOPIC:
            bodies.append(msg.body)
        pos += size
    return bodies


def master_addr(admin: AdminClient) -> str | None:
    try:
        brokers = admin.cluster_list(runtime=False)
    except MQError:
        return None
    return next((b.addr for b in brokers if b.broker_name == "broker-a" and b.broker_id == 0), None)


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"] if FULL else ["ASYNC_FLUSH"])
def test_leader_sigkill_under_4_senders_loses_nothing_acked(tmp_path, flush):
    per_thread = 1500 if FULL else 100
    conf = {"flushDiskType": flush, "mappedFileSizeCommitLog": str(8 * 1024 * 1024), **({} if FULL else FAST)}
    cluster = start_dev_cluster(str(tmp_path / "store"), cluster="dledger", broker_config=conf, start_timeout_s=60)
    acked: set[bytes] = set()
    failed: list[tuple[float, bytes]] = []
    ok_times: list[float] = []
    lock = threading.Lock()
    errors: dict[str, int] = {}
    try:
        with AdminClient(cluster.namesrv_addr) as admin:
            deadline = time.monotonic() + 60
            while master_addr(admin) is None:
                assert time.monotonic() < deadline, "no master elected"
                time.sleep(0.1)
            producer = Producer("dl_fault_producer", namesrv_addr=cluster.namesrv_addr,
                                retry_times_when_send_failed=0, send_msg_timeout=3000)
            producer.start()
            stop = threading.Event()

            def sender(t: int) -> None:
                i = 0
                while not stop.is_set():
                    body = f"{t}-{i}".encode()
                    i += 1
                    try:
                        r = producer.send(Message(TOPIC, body))
                        ok = r.send_status.name == "SEND_OK"
                    except MQError as exc:
                        ok = False
                        key = f"{type(exc).__name__}: {str(exc)[:80]}"
                        errors[key] = errors.get(key, 0) + 1
                    with lock:
                        if ok:
                            acked.add(body)
                            ok_times.append(time.monotonic())
                        else:
                            failed.append((time.monotonic(), body))
                    time.sleep(0.005)
            threads = [threading.Thread(target=sender, args=(t,), daemon=True) for t in range(4)]
            for th in threads:
                th.start()
            deadline = time.monotonic() + 120
            while len(acked) < per_thread * 2:  # every thread well under way
                assert time.monotonic() < deadline, "sends before the kill too slow"
                time.sleep(0.05)
            old = master_addr(admin)
            victim = next(b for b in cluster.brokers if b.addr == old)
            killed = time.monotonic()
            cluster.kill_broker(victim.name, victim.broker_id, signal.SIGKILL)
            while master_addr(admin) in (None, old):
                assert time.monotonic() - killed < 60, "no new master registered"
                time.sleep(0.05)
            registered = time.monotonic()
            while sum(t > registered for t in ok_times) < per_thread * 2:
                assert time.monotonic() - registered < 120, "too few sends after the new master registered"
                time.sleep(0.05)
            stop.set()
            for th in threads:
                th.join(30)
            producer.shutdown()
            cluster.start_broker(victim.name, victim.broker_id)  # catches up from its own store
            members = [os.path.join(cluster.store_dir, f"{b.name}-{b.broker_id}") for b in cluster.brokers]
            deadline = time.monotonic() + 120
            while True:
                logs = [read_log(m) for m in members]
                if len(set(logs)) == 1:
                    break
                assert time.monotonic() < deadline, f"logs still differ: sizes {[len(lg) for lg in logs]}"
                time.sleep(0.5)
        bodies = stored_bodies(logs[0])
        stored = set(bodies)
        lost = acked - stored
        twice = len(bodies) - len(stored)
        first_fail = min((t for t, _ in failed if t > killed), default=killed)
        after = [t for t in ok_times if t > first_fail]
        outage = (min(after) - first_fail) if after else None
        record(f"dledger leader SIGKILL {flush}", sent=len(acked) + len(failed), acked=len(acked), failed=len(failed),
               lost=len(lost), stored_twice=twice, stored_not_acked=len(stored - acked),
               kill_to_registered_s=round(registered - killed, 2),
               registered_to_first_ok_s=round(min(after) - registered, 2) if after else None,
               client_outage_s=round(outage, 2) if outage is not None else None, log_bytes=len(logs[0]))
        print("send errors:", errors)  # what the clients saw during the outage
        assert not lost, f"{len(lost)} acknowledged messages lost"
        assert twice == 0
        assert len(acked) > 0 and after
        assert min(after) - registered <= 2.0
    finally:
        cluster.stop()
