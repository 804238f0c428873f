"""CPU of the reference broker per Celery task without sockets (issue 26): the requests one
no-op task costs the broker, replayed in process.

First a real ``celery worker`` (prefork ``-c 2``, ``celery_bench_app``) runs against an in-process
broker whose channels record the frames they receive, while a few tasks are sent; from those
frames the driver takes the producer's SEND_MESSAGE_V2 and the worker's long-polling
PULL_MESSAGE. Then it replays, per task, what the broker does for one task in
``celery_cpu_split.py``: the pull arrives first and finds nothing (held), the send is stored and
answered, the arrival wakes the held pull, which is answered with the message. Both channels
write to transports that only count bytes, so this times frame decoding, the request hooks, the
send and pull processors, the store put and get, the hold/wake and response encoding - every
per-task cost but the event loop's socket work and the occasional heartbeat/offset commit. Every
replayed send carries the recorded keys, so the index's hash-slot pages stay mapped: the page
faults a real run's distinct keys cost (``celery_cpu_split.py`` counts them) are not in these
figures, nor the cache misses of a machine shared with the producer and the worker (a real
Celery task costs the broker about three times this).

Usage: ``python benchmarks/profiling/broker_task_path.py [--count 5000] [--rounds 3] [--profile]``
(``--frames FILE`` saves/loads the recorded frames, skipping the worker run when FILE exists).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "profiling"))
import rocketmq_sdk.integrations.celery  # noqa: E402,F401 - registers the rocketmq:// transport
from broker_send_path import CountingTransport, print_profile  # noqa: E402
from celery_tasks import app_for, executed, make_env, stop_worker, wait_for  # noqa: E402
from rocketmq_broker.embedded import start_dev_cluster  # noqa: E402
from rocketmq_sdk.protocol.codes import PullSysFlag, RequestCode  # noqa: E402
from rocketmq_sdk.protocol.headers import V2Field  # noqa: E402
from rocketmq_sdk.remoting import Channel, RemotingCommand  # noqa: E402
from rocketmq_sdk.remoting.frame import FrameDecoder  # noqa: E402


def record(tasks: int = 30) -> tuple[bytes, bytes]:
    """(send frame, pull frame) of a real Celery producer and prefork worker."""
    seen: list[bytes] = []
    original = Channel.data_received

    def recording(self, data):  # noqa: ANN001
        seen.append(bytes(data))
        return original(self, data)

    Channel.data_received = recording
    try:
        with start_dev_cluster(in_process=True) as cluster, tempfile.TemporaryDirectory() as tmp:
            mark = Path(tmp) / "mark"
            env = make_env(f"rocketmq://{cluster.namesrv_addr}", mark, {})
            app = app_for(env)
            noop = app.tasks["bench.noop"]
            worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "celery_bench_app", "worker", "-P",
                                       "prefork", "-c", "2", "-n", "record@localhost", "--loglevel=WARNING",
                                       "--without-gossip", "--without-mingle"], cwd=HERE, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            try:
                with app.producer_or_acquire() as producer:
                    for _ in range(tasks):
                        noop.apply_async(producer=producer)
                    wait_for(lambda: executed(mark) >= tasks, 120, "the recording worker")
            finally:
                stop_worker(worker)
                app.close()
    finally:
        Channel.data_received = original
    send = pull = None
    for data in seen:
        dec = FrameDecoder()
        for frame in dec.feed(data):
            cmd = RemotingCommand.decode(frame)
            ext = cmd.ext_fields or {}
            if cmd.code == RequestCode.SEND_MESSAGE_V2 and ext.get(V2Field.TOPIC) == "bench":
                send = bytes(frame)
            elif (cmd.code == RequestCode.PULL_MESSAGE and ext.get("topic") == "bench"
                  and int(ext.get("sysFlag", 0)) & PullSysFlag.SUSPEND):
                pull = bytes(frame)
    if send is None or pull is None:
        raise RuntimeError("no Celery send or long-polling pull recorded")
    return send, pull


def _framed(cmd: RemotingCommand) -> bytes:
    return bytes(cmd.encode())


def _thread_user_sys() -> tuple[float, float]:
    ru = resource.getrusage(resource.RUSAGE_THREAD)
    return ru.ru_utime, ru.ru_stime


async def run_round(broker, send: bytes, pull: bytes, n: int) -> tuple[float, float, int, int]:
    """(user CPU seconds, system CPU seconds, response bytes to the producer, to the consumer)
    of ``n`` tasks."""
    store = broker.store
    s_cmd = RemotingCommand.decode(send)
    p_cmd = RemotingCommand.decode(pull)
    queue_id = int(p_cmd.ext_fields["queueId"])
    s_cmd.ext_fields[V2Field.QUEUE_ID] = str(queue_id)
    topic = p_cmd.ext_fields["topic"]
    prod, cons = Channel(broker.server), Channel(broker.server)
    tp, tc = CountingTransport(), CountingTransport()
    prod.connection_made(tp)
    cons.connection_made(tc)
    sends, pulls = [], []
    offset = store.get_max_offset_in_queue(topic, queue_id)
    for i in range(n):
        s_cmd.opaque = 2 * i + 1
        sends.append(_framed(s_cmd))
        p_cmd.opaque = 2 * i + 2
        p_cmd.ext_fields["queueOffset"] = str(offset + i)
        p_cmd.ext_fields["commitOffset"] = str(offset + i)
        pulls.append(_framed(p_cmd))
    u0, s0 = _thread_user_sys()
    for i in range(n):
        cons.data_received(pulls[i])  # nothing there yet: held
        prod.data_received(sends[i])  # stored, answered; the arrival wakes the pull next
        await asyncio.sleep(0)
        await asyncio.sleep(0)
    u1, s1 = _thread_user_sys()
    prod.connection_lost(None)
    cons.connection_lost(None)
    return u1 - u0, s1 - s0, tp.written, tc.written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--frames", default=None)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    if args.frames and os.path.exists(args.frames):
        send, pull = pickle.loads(Path(args.frames).read_bytes())
    else:
        send, pull = record()
        if args.frames:
            Path(args.frames).write_bytes(pickle.dumps((send, pull)))
    with start_dev_cluster(in_process=True) as cluster:
        broker = next(s for s in cluster._servers if hasattr(s, "store"))

        def go(n: int):
            return asyncio.run_coroutine_threadsafe(run_round(broker, send, pull, n), cluster._loop).result(300)

        go(200)  # the topic, group and queue created, code warm
        per_task = []
        for r in range(args.rounds):
            user, sys_, wp, wc = go(args.count)
            per_task.append((user + sys_) / args.count * 1e6)
            print(f"round {r + 1}: {(user + sys_) / args.count * 1e6:.1f} µs CPU per task (user "
                  f"{user / args.count * 1e6:.1f}, system {sys_ / args.count * 1e6:.1f}); response bytes per task: "
                  f"producer {wp / args.count:.0f}, consumer {wc / args.count:.0f}", flush=True)
        print(f"min {min(per_task):.1f} median {statistics.median(per_task):.1f} µs CPU per task "
              f"({args.rounds} rounds of {args.count})", flush=True)
        if args.profile:
            print_profile(cluster._loop, lambda: run_round(broker, send, pull, args.count), time.thread_time, (35, 50))

if __name__ == "__main__":
    main()
