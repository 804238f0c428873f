"""RocketMQ 5.x features on the reference broker (issue 32; docs/rocketmq5.md):

1. consume rate of the same backlog (``--messages`` of 1 KiB, one topic of 4 queues each) by a
   classic ``PushConsumer`` (rebalance + pull), by ``PushConsumer(pop=True)`` (POP + ACK_MESSAGE)
   by a ``SimpleConsumer`` loop (receive 32 + ack each) and by a ``SimpleConsumer`` loop (receive
   32 + one batch ack of them), one after the other on one broker (a child process answering as
   5.3.3);
2. timer messages: ``--timers`` messages with deliver times spread uniformly over
   ``--timer-window`` seconds, consumed by a push consumer: lateness (store time in the real
   topic minus the time asked; p50, p99, max, early count) and broker CPU per timer over the
   window.

Results go to ``benchmarks/results/<date>-rmq5.{json,md}`` with the command, the machine and its
load average before and after.

    .venv/bin/python benchmarks/rmq5_pop_timer.py [--messages 20000] [--timers 100000 --timer-window 600] [--quick]
        [--tag NAME]  (results file <date>-rmq5[-quick|-consume][-NAME]: an earlier run of the day is kept)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import machine_info, proc_cpu_s, settle  # noqa: E402
from rocketmq_broker.embedded import start_dev_cluster  # noqa: E402
from rocketmq_sdk import ConsumeConcurrentlyStatus, Message, Producer, PushConsumer, SimpleConsumer  # noqa: E402
from rocketmq_sdk.admin import AdminClient  # noqa: E402
from rocketmq_sdk.consumer.pop_consume import PopSettings  # noqa: E402

BODY = b"x" * 1024


def _fill(producer: Producer, topic: str, n: int, threads: int = 4) -> None:
    def worker(k: int) -> None:
        for _ in range(k):
            producer.send(Message(topic, BODY))
    per = [n // threads + (1 if i < n % threads else 0) for i in range(threads)]
    ts = [threading.Thread(target=worker, args=(k,)) for k in per]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def _push(namesrv: str, topic: str, n: int, pop: bool) -> float:
    done = threading.Event()
    count = [0]
    lock = threading.Lock()

    def listener(msgs, ctx):
        with lock:
            count[0] += len(msgs)
            if count[0] >= n:
                done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    kw = {"pop": True, "pop_settings": PopSettings(init_mode=0, poll_time_ms=2000)} if pop else {}
    c = PushConsumer(f"bench_{'pop' if pop else 'push'}", namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **kw)
    c.subscribe(topic)
    c.register_message_listener(listener)
    t0 = time.monotonic()
    c.start()
    try:
        if not done.wait(600):
            raise RuntimeError(f"consumed {count[0]} of {n}")
        return time.monotonic() - t0
    finally:
        c.shutdown()


def _simple(namesrv: str, topic: str, n: int, batch_ack: bool = False) -> float:
    c = SimpleConsumer(f"bench_simple{'_batch' if batch_ack else ''}", namesrv, await_duration=1.0,
                       consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe(topic)
    t0 = time.monotonic()
    c.start()
    got = 0
    try:
        while got < n:
            msgs = c.receive(32, 60)
            if batch_ack and msgs:
                c.ack(msgs)  # one BATCH_ACK_MESSAGE
            else:
                for m in msgs:
                    c.ack(m)
            got += len(msgs)
        return time.monotonic() - t0
    finally:
        c.shutdown()


def _timers(namesrv: str, broker_pid: int, n: int, window_s: float) -> dict:
    topic = "BenchTimers"
    lateness: list[int] = []
    lock = threading.Lock()
    asked: dict[str, int] = {}
    done = threading.Event()

    def listener(msgs, ctx):
        with lock:
            for m in msgs:
                want = asked.get(m.keys[0]) if m.keys else None
                if want is not None:
                    lateness.append(m.store_timestamp - want)
            if len(lateness) >= n:
                done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = PushConsumer("bench_timers", namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                     consume_message_batch_max_size=32)
    c.subscribe(topic)
    c.register_message_listener(listener)
    c.start()
    lead_s = 5.0 + n / 2000.0  # time to send them all before the first is due
    start_ms = int((time.time() + lead_s) * 1000)
    rnd = random.Random(32)
    times = sorted(start_ms + int(rnd.random() * window_s * 1000) for _ in range(n))
    rnd.shuffle(times)
    with Producer("bench_timer_p", namesrv) as p:
        t0 = time.monotonic()
        lock_i = threading.Lock()
        it = iter(enumerate(times))

        def sender() -> None:
            while True:
                with lock_i:
                    nxt = next(it, None)
                if nxt is None:
                    return
                i, at = nxt
                key = f"t{i}"
                with lock:
                    asked[key] = at
                p.send(Message(topic, b"t", keys=key, deliver_time_ms=at))
        ts = [threading.Thread(target=sender) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        send_s = time.monotonic() - t0
    if time.time() * 1000 > start_ms:
        print(f"warning: sending took {send_s:.1f} s, past the first deliver time", file=sys.stderr)
    cpu0 = proc_cpu_s(broker_pid)
    w0 = time.monotonic()
    try:
        if not done.wait(window_s + lead_s + 120):
            raise RuntimeError(f"timers delivered: {len(lateness)} of {n}")
    finally:
        c.shutdown()
    cpu = proc_cpu_s(broker_pid) - cpu0
    wall = time.monotonic() - w0
    lateness.sort()
    q = lambda f: lateness[min(len(lateness) - 1, int(f * len(lateness)))]  # noqa: E731
    return {"timers": n, "window_s": window_s, "send_s": round(send_s, 1), "delivered": len(lateness),
            "early": sum(1 for x in lateness if x < 0), "late_p50_ms": q(0.5), "late_p99_ms": q(0.99),
            "late_max_ms": lateness[-1], "broker_cpu_s_during_window": round(cpu, 2),
            "broker_cpu_us_per_timer": round(cpu / n * 1e6, 1), "wall_s": round(wall, 1),
            "note": "broker CPU over the delivery window includes serving the consumer's pulls"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--timers", type=int, default=100000, help="0: only the consume rates")
    ap.add_argument("--timer-window", type=float, default=600.0)
    ap.add_argument("--quick", action="store_true", help="2000 messages, 2000 timers over 20 s")
    ap.add_argument("--tag", default="", help="appended to the results file name")
    args = ap.parse_args()
    if args.quick:
        args.messages, args.timers, args.timer_window = 2000, 2000, 20.0
    load_before = os.getloadavg()
    cluster = start_dev_cluster(broker_config={"broker_version": "5.3.3"})
    results: dict = {"command": " ".join([os.path.basename(sys.executable), *sys.argv]),
                     "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    try:
        pid = cluster._proc.pid if cluster._proc is not None else os.getpid()
        ns = cluster.namesrv_addr
        with AdminClient(ns) as admin:
            for t in ("BenchPush", "BenchPop", "BenchSimple", "BenchSimpleBatch", "BenchTimers"):
                admin.create_topic(t, broker_addr=cluster.broker_addr, read_queue_nums=4, write_queue_nums=4)
        with Producer("bench_fill", ns) as p:
            for t in ("BenchPush", "BenchPop", "BenchSimple", "BenchSimpleBatch"):
                _fill(p, t, args.messages)
        rates = {}
        for name, fn in (("classic push (rebalance + pull)", lambda: _push(ns, "BenchPush", args.messages, False)),
                         ("PushConsumer(pop=True)", lambda: _push(ns, "BenchPop", args.messages, True)),
                         ("SimpleConsumer receive(32) + ack", lambda: _simple(ns, "BenchSimple", args.messages)),
                         ("SimpleConsumer receive(32) + batch ack",
                          lambda: _simple(ns, "BenchSimpleBatch", args.messages, batch_ack=True))):
            settle(pid)
            s = fn()
            rates[name] = {"messages": args.messages, "seconds": round(s, 2), "msgs_per_s": round(args.messages / s)}
            print(name, rates[name], flush=True)
        results["consume"] = rates
        if args.timers > 0:
            settle(pid)
            results["timers"] = _timers(ns, pid, args.timers, args.timer_window)
            print(results["timers"], flush=True)
    finally:
        cluster.stop()
    results["machine"] = machine_info(load_before)
    suffix = ("-quick" if args.quick else "-consume" if args.timers <= 0 else "") + (f"-{args.tag}" if args.tag else "")
    out = Path(__file__).resolve().parent / "results" / f"{dt.date.today().isoformat()}-rmq5{suffix}"
    out.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
    lines = [f"# RocketMQ 5.x features on the reference broker ({results['date']})", "",
             f"Command: `{results['command']}`", "",
             f"Machine: {results['machine']['cores']} cores, {results['machine']['processor']}, Python "
             f"{results['machine']['python']}; load average before {results['machine']['loadavg_before']}, after "
             f"{results['machine']['loadavg_after']}", "", "| consumer | messages | s | msgs/s |", "|---|---:|---:|---:|"]
    for name, r in results["consume"].items():
        lines.append(f"| {name} | {r['messages']} | {r['seconds']} | {r['msgs_per_s']} |")
    t = results.get("timers")
    lines += [] if t is None else ["", f"Timers: {t['timers']} over {t['window_s']} s (sent in {t['send_s']} s): delivered {t['delivered']}, "
              f"early {t['early']}, lateness p50 {t['late_p50_ms']} ms, p99 {t['late_p99_ms']} ms, max "
              f"{t['late_max_ms']} ms; broker CPU {t['broker_cpu_s_during_window']} s over the window = "
              f"{t['broker_cpu_us_per_timer']} µs per timer ({t['note']})."]
    lines.append("")
    out.with_suffix(".md").write_text("\n".join(lines))
    print(f"wrote {out}.json/.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
