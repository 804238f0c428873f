"""Throughput and CPU of the reference broker's send path, with the client taken out of the way.

Usage: ``python benchmarks/broker_send.py [--quick] [--sizes 100,1024] [--flush ASYNC_FLUSH,SYNC_FLUSH]
[--modes single,batch32] [--connections 4] [--window 64] [--seconds 3] [--out-dir benchmarks/results]``
(part of ``make bench``; ``make bench QUICK=1`` runs ``--quick``: about 10 s).

For each flush mode a reference broker is started (``python -m rocketmq_broker dev``, a child
process on 127.0.0.1, 256 MiB CommitLog files) and fed by a load generator in this process that
keeps the broker busy: ``--connections`` blocking sockets, each on its own thread, write
``--window`` pre-encoded requests at once and read their answers, over and over. The requests are
the SDK's own SEND_MESSAGE_V2 (``single``) and SEND_BATCH_MESSAGE of 32 messages (``batch32``)
frames (``MessagePreparer.prepare`` / ``prepare_batch``: UNIQ_KEY, WAIT=true, the topic's 4 queues round robin),
built before the measured phase (1,024 distinct ones, reused in a cycle), so the generator's cost
per message is a socket write and a 10-byte check of each answer (``{"code":0,``).

Recorded per case, over the measured phase (after a warm-up): messages stored per second
(every answer checked SUCCESS), payload MB/s (bodies only, 1 MB = 10^6 bytes), wire MB/s (request
bytes), broker CPU per message (utime+stime of the broker process from ``/proc/<pid>/stat``; the
dev process also hosts the idle name server) and broker CPU use in cores (near 1.0 = the
broker's single event loop is the bottleneck, not the generator), plus the generator's own CPU.
Writes ``<out-dir>/<date>-broker.json`` and ``.md`` (``-broker-quick`` with ``--quick``; ``--tag X``
appends ``-X``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import (  # noqa: E402
    Generator,
    build_frames,
    cpu_self_s,
    git_head,
    git_span,
    machine_info,
    proc_cpu_s,
    runtime_info,
    runtime_line,
    settle,
    write_results,
)

MODES = {"single": 1, "batch32": 32}


def run_case(cluster, producer, flush: str, size: int, mode: str, args, broker_pid: int) -> dict:
    batch = MODES[mode]
    topic = f"BrokerBench_{flush[:1]}_{size}_{mode}"
    from rocketmq_sdk import Message

    producer.send(Message(topic, b"create"))  # auto-created from TBW102
    mqs = producer.fetch_publish_queues(topic)
    frames = build_frames(producer, topic, size, batch, mqs[0].broker_name, [mq.queue_id for mq in mqs])
    window = max(1, args.window // batch) if batch > 1 else args.window
    gen = Generator(cluster.broker_addr, frames, batch, args.connections, window)
    settle(broker_pid, 10)
    gen.start()
    time.sleep(args.warmup)  # warm-up: not measured
    n0, w0 = gen.snapshot()
    b0, c0, t0 = proc_cpu_s(broker_pid), cpu_self_s(), time.perf_counter()
    time.sleep(args.seconds)  # the measured phase (the generator threads do the work)
    n1, w1 = gen.snapshot()
    b1, c1, t1 = proc_cpu_s(broker_pid), cpu_self_s(), time.perf_counter()
    gen.join(30)
    el, n = t1 - t0, n1 - n0
    rec = {"flush": flush, "size": size, "mode": mode, "batch": batch, "connections": args.connections,
           "window_requests": window, "count": n, "elapsed_s": el, "broker_cpu_s": b1 - b0,
           "generator_cpu_s": c1 - c0}
    if gen.errors:
        rec["error"] = gen.errors[0][:300]
    if n:
        rec.update(msgs_per_s=n / el, payload_mb_per_s=n * size / el / 1e6, wire_mb_per_s=(w1 - w0) / el / 1e6,
                   broker_cpu_us_per_msg=(b1 - b0) / n * 1e6, broker_cores=(b1 - b0) / el,
                   generator_cores=(c1 - c0) / el)
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 B only, 1 s per case")
    ap.add_argument("--sizes", help="comma-separated body sizes in bytes (default 100,1024)")
    ap.add_argument("--flush", default="ASYNC_FLUSH,SYNC_FLUSH")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated subset of {','.join(MODES)}")
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--window", type=int, default=64, help="requests in flight per connection (batch: messages/32)")
    ap.add_argument("--seconds", type=float, default=None, help="measured phase per case (3; 1 with --quick)")
    ap.add_argument("--warmup", type=float, default=None, help="unmeasured start of each case (1; 0.3 quick)")
    ap.add_argument("--out-dir", default=str(HERE / "results"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--tag", default="", help="appended to the file names: <date>-broker[-quick]-<tag>.{json,md}")
    args = ap.parse_args()
    args.seconds = args.seconds or (1.0 if args.quick else 3.0)
    args.warmup = args.warmup if args.warmup is not None else (0.3 if args.quick else 1.0)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else ([100] if args.quick else [100, 1024])

    from rocketmq_broker.embedded import start_dev_cluster
    from rocketmq_sdk import Producer

    started = dt.datetime.now(dt.UTC)
    load_before, commit_before = os.getloadavg(), git_head()
    results = []
    for flush in args.flush.split(","):
        with start_dev_cluster(broker_config={"flush_disk_type": flush,
                                              "mapped_file_size_commit_log": 256 * 1024 * 1024}) as cluster:
            pid = cluster._proc.pid
            with Producer("broker_bench", cluster.namesrv_addr) as producer:
                for size in sizes:
                    for mode in args.modes.split(","):
                        rec = run_case(cluster, producer, flush, size, mode, args, pid)
                        results.append(rec)
                        print(fmt_line(rec), file=sys.stderr, flush=True)
    doc = {"started_utc": started.isoformat(timespec="seconds"),
           "finished_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
           "command": " ".join([Path(sys.executable).name, *sys.argv]), "quick": args.quick,
           "git_commit": {"start": commit_before, "end": git_head()},
           "machine": machine_info(load_before),
           "runtime": runtime_info(),
           "settings": {"connections": args.connections, "window": args.window, "seconds": args.seconds,
                        "warmup": args.warmup},
           "results": results}
    md = to_markdown(doc)
    print(md)
    if not args.no_write:
        stem = (started.strftime("%Y-%m-%d") + ("-broker-quick" if args.quick else "-broker")
                + (f"-{args.tag}" if args.tag else ""))
        print(f"wrote {write_results(args.out_dir, stem, doc, md)}.json and .md", file=sys.stderr)
    return 1 if any("error" in r for r in results) else 0


def fmt_line(r: dict) -> str:
    head = f"{r['flush']:<11} {r['size']:>5} B {r['mode']:<8}"
    if "msgs_per_s" not in r:
        return f"{head} FAILED {r.get('error')}"
    return (f"{head} {r['msgs_per_s']:>9,.0f} msg/s {r['payload_mb_per_s']:6.2f} MB/s  broker "
            f"{r['broker_cpu_us_per_msg']:6.1f} µs/msg ({r['broker_cores']:.2f} cores)  generator "
            f"{r['generator_cores']:.2f} cores" + (f"  ERROR {r['error']}" if "error" in r else ""))


def to_markdown(doc: dict) -> str:
    m, s = doc["machine"], doc["settings"]
    out = [f"# Reference broker send throughput {doc['started_utc']}", "",
           f"Machine: {m['cores']} cores ({m['processor']}), Python {m['python']}, {m['platform']}; load average "
           f"before/after {m['loadavg_before'][0]:.1f}/{m['loadavg_after'][0]:.1f} (shared machine: ±20 % noise).  ",
           f"Command: `{doc['command']}`; git "
           + git_span(doc["git_commit"])
           + ".  ",
           runtime_line(doc.get("runtime", {})),
           f"Load: {s['connections']} connections × {s['window']} requests in flight (batch32: {s['window']} "
           f"messages = 2 requests), pre-encoded SDK frames; {s['seconds']} s measured after {s['warmup']} s "
           "warm-up. Broker CPU = the broker process (one asyncio loop; SYNC_FLUSH puts append on the loop and "
           "are answered when the group-commit fsync covers them). MB = 10^6 bytes of message bodies.", "",
           "| flush | body | send | msg/s | payload MB/s | wire MB/s | broker CPU µs/msg | broker cores "
           "| generator cores |",
           "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in doc["results"]:
        if "msgs_per_s" not in r:
            out.append(f"| {r['flush']} | {r['size']:,} B | {r['mode']} | error: {r.get('error')} | | | | | |")
            continue
        out.append(f"| {r['flush']} | {r['size']:,} B | {r['mode']} | {r['msgs_per_s']:,.0f} "
                   f"| {r['payload_mb_per_s']:.2f} | {r['wire_mb_per_s']:.2f} | {r['broker_cpu_us_per_msg']:.1f} "
                   f"| {r['broker_cores']:.2f} | {r['generator_cores']:.2f} |")
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
