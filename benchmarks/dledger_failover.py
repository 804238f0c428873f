"""DLedger mode (issue 27): send rate and latency of a 3-member DLedger group against a single
master and 2m-2s-sync, and the failover time over repeated leader kills.

Part 1 — for ``1m``-like (``2m``, topic on broker-a only), ``2m-2s-sync`` and ``dledger`` (one
process per broker): synchronous producers send 128-byte messages for ``--seconds`` with one
thread and with ``--threads`` threads (``ha_send_rates._run``). Part 2 — ``--kills`` times: a
sender thread sends every 20 ms (3 retries, the SDK's route refresh on errors); the leader is
SIGKILLed; measured: kill → new master registered with the name server, registered → first
SEND_OK, and the client-visible outage (first failed send → next SEND_OK); the killed member is
restarted and must catch up before the next kill. DLedger's own timers (2 s heartbeats).
Results: ``benchmarks/results/<date>-dledger.{json,md}``. Part 3 — ``--transfers`` times (0 by
default): the same sender; ``rocketmq-admin leadershipTransfer``'s API hands the leadership to the
next member; measured: request → new master registered, the longest gap between two SEND_OKs
around it, failed sends; results ``<date>-dledger-transfer.{json,md}`` (parts 1 and 2 are skipped
with ``--seconds 0 --kills 0``).

    .venv/bin/python benchmarks/dledger_failover.py [--seconds 3] [--threads 8] [--kills 10] [--transfers 10]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from ha_send_rates import BODY, TOPIC, _run  # noqa: E402 - the same send loop as the HA benchmark
from harness import git_head, machine_info  # noqa: E402
from rocketmq_broker.embedded import start_dev_cluster  # noqa: E402
from rocketmq_sdk import Message, Producer  # noqa: E402
from rocketmq_sdk.admin import AdminClient  # noqa: E402
from rocketmq_sdk.exceptions import MQError  # noqa: E402


def _master(admin: AdminClient) -> str | None:
    try:
        rows = admin.cluster_list(runtime=False)
    except MQError:
        return None
    return next((b.addr for b in rows if b.broker_name == "broker-a" and b.broker_id == 0), None)


def _wait(cond, timeout_s: float, what: str) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            raise TimeoutError(what)
        time.sleep(0.02)


def send_rates(mode: str, seconds: float, threads: int) -> list[dict]:
    conf = {"mappedFileSizeCommitLog": 64 * 1024 * 1024}
    with tempfile.TemporaryDirectory(prefix="rocketmq-dl-bench-") as tmp, \
            start_dev_cluster(tmp, cluster=mode, broker_config=conf, start_timeout_s=60) as c, \
            AdminClient(c.namesrv_addr) as admin:
        _wait(lambda: _master(admin) is not None, 60, "a master")
        admin.create_topic(TOPIC, broker_addr=_master(admin), read_queue_nums=4, write_queue_nums=4)
        producer = Producer("dl_bench_pg", c.namesrv_addr)
        producer.start()
        try:
            _run(producer, 1, min(1.0, seconds))  # warm-up
            return [{"mode": mode, **_run(producer, n, seconds)} for n in (1, threads)]
        finally:
            producer.shutdown()


@contextlib.contextmanager
def _dledger_under_load(prefix: str, group: str) -> Iterator[tuple[Any, AdminClient, list[tuple[float, bool]]]]:
    """A DLedger cluster with a master, and a thread sending every 20 ms through ``group``'s
    producer (1 s send timeout, SDK retries) until the block ends: yields (cluster, admin, log of
    (time, SEND_OK?) of each send)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp, \
            start_dev_cluster(tmp, cluster="dledger", start_timeout_s=60) as c, \
            AdminClient(c.namesrv_addr) as admin:
        _wait(lambda: _master(admin) is not None, 60, "a master")
        producer = Producer(group, c.namesrv_addr, send_msg_timeout=1000)
        producer.start()
        log: list[tuple[float, bool]] = []
        stop = threading.Event()

        def sender() -> None:
            while not stop.is_set():
                try:
                    ok = producer.send(Message(TOPIC, BODY)).send_status.name == "SEND_OK"
                except MQError:
                    ok = False
                log.append((time.monotonic(), ok))
                time.sleep(0.02)

        t = threading.Thread(target=sender, daemon=True)
        t.start()
        try:
            yield c, admin, log
        finally:
            stop.set()
            t.join(10)
            producer.shutdown()


def transfers(n: int) -> list[dict]:
    out = []
    with _dledger_under_load("rocketmq-dl-transfer-", "dl_transfer_pg") as (_c, admin, log):
        for k in range(n):
            _wait(lambda: sum(ok for _, ok in log[-5:]) == 5, 60, "sends succeed before the transfer")
            leader = next(b.dledger_id for b in admin.cluster_list() if b.broker_id == 0 and b.dledger_id)
            target = f"n{(int(leader[1:]) + 1) % 3}"
            start = time.monotonic()
            r = admin.dledger_leadership_transfer("broker-a", target)
            reg = start + r.registered_ms / 1000
            _wait(lambda reg=reg: any(ok and ts > reg for ts, ok in log[-50:]), 30,
                  "a send through the new master")
            oks = [ts for ts, ok in log if ok]
            gap = max(b - a for a, b in zip(oks, oks[1:], strict=False) if b >= start)
            row = {"transfer": k + 1, "from": leader, "to": target, "term": r.term,
                   "request_to_registered_ms": round(r.registered_ms), "longest_ack_gap_ms": round(gap * 1000),
                   "failed_sends": sum(1 for ts, ok in log if ts >= start and not ok)}
            out.append(row)
            print(json.dumps(row), flush=True)
            time.sleep(1)  # every member follows the new leader (heartbeats every 2 s)
    return out


def failovers(kills: int) -> list[dict]:
    out = []
    with _dledger_under_load("rocketmq-dl-kill-", "dl_kill_pg") as (c, admin, log):
        for k in range(kills):
            _wait(lambda: any(ok for _, ok in log[-5:]), 60, "sends succeed before the kill")
            old = _master(admin)
            victim = next(b for b in c.brokers if b.addr == old)
            killed = time.monotonic()
            c.kill_broker(victim.name, victim.broker_id, signal.SIGKILL)
            _wait(lambda old=old: _master(admin) not in (None, old), 60, "a new master")
            registered = time.monotonic()
            _wait(lambda reg=registered: any(ok and ts > reg - 0.1 for ts, ok in log[-50:]), 30,
                  "a send through it")
            first_fail = min((ts for ts, ok in log if ts > killed and not ok), default=killed)
            first_ok = min(ts for ts, ok in log if ts > first_fail and ok)
            row = {"kill": k + 1, "kill_to_registered_s": round(registered - killed, 2),
                   "registered_to_first_ok_s": round(first_ok - registered, 2),
                   "client_outage_s": round(first_ok - first_fail, 2),
                   "failed_sends": sum(1 for ts, ok in log if killed < ts <= first_ok and not ok)}
            out.append(row)
            print(json.dumps(row), flush=True)
            c.start_broker(victim.name, victim.broker_id)
            time.sleep(3)  # the restarted member rejoins and catches up
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--kills", type=int, default=10)
    p.add_argument("--transfers", type=int, default=0)
    args = p.parse_args()
    load_before = os.getloadavg()
    out = Path(__file__).parent / "results"
    if args.transfers:
        moves = transfers(args.transfers)
        meta = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "commit": git_head(),
                "date": dt.datetime.now(dt.UTC).isoformat(), **machine_info(load_before)}
        stem = dt.date.today().isoformat() + "-dledger-transfer"
        (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "transfers": moves}, indent=1) + "\n")
        xs = sorted(r["request_to_registered_ms"] for r in moves)
        gaps = sorted(r["longest_ack_gap_ms"] for r in moves)
        lines = [f"# DLedger leadership transfer ({meta['date'][:16]}Z, commit {meta['commit']})", "",
                 f"`{meta['command']}`; {meta['cores']} cores ({meta['processor']}), Python {meta['python']}, load "
                 f"before {', '.join(f'{x:.2f}' for x in load_before)}, after "
                 f"{', '.join(f'{x:.2f}' for x in meta['loadavg_after'])}; `dev --cluster dledger` (one process "
                 "per member, DLedger's own timers), a sender every 20 ms (3 retries)", "",
                 "| transfer | from → to | term | request → registered ms | longest gap between SEND_OKs ms | "
                 "failed sends |", "|---:|---|---:|---:|---:|---:|"]
        lines += [f"| {r['transfer']} | {r['from']} → {r['to']} | {r['term']} | {r['request_to_registered_ms']} | "
                  f"{r['longest_ack_gap_ms']} | {r['failed_sends']} |" for r in moves]
        lines += ["", f"request → registered: median {statistics.median(xs)} ms (min {xs[0]}, max {xs[-1]}); "
                  f"longest gap between SEND_OKs: median {statistics.median(gaps)} ms (max {gaps[-1]})."]
        (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
        if not args.seconds and not args.kills:
            return
    rates = []
    for mode in ("2m", "2m-2s-sync", "dledger"):
        rates += send_rates(mode, args.seconds, args.threads)
        print(json.dumps(rates[-2:]), flush=True)
    kills = failovers(args.kills) if args.kills else []
    commit = git_head()
    meta = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "commit": commit,
            "date": dt.datetime.now(dt.UTC).isoformat(), **machine_info(load_before)}
    stem = dt.date.today().isoformat() + "-dledger"
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rates": rates, "failovers": kills}, indent=1) + "\n")

    def dist(key: str) -> str:
        xs = sorted(r[key] for r in kills)
        return f"median {statistics.median(xs):.2f}, min {xs[0]:.2f}, max {xs[-1]:.2f}" if xs else "-"
    lines = [f"# DLedger mode: send rates and failover ({meta['date'][:16]}Z, commit {commit})", "",
             f"`{meta['command']}`; {meta['cores']} cores ({meta['processor']}), Python {meta['python']}, load "
             f"before {', '.join(f'{x:.2f}' for x in load_before)}, after "
             f"{', '.join(f'{x:.2f}' for x in meta['loadavg_after'])}",
             "", "`2m` = a master without slave (topic on broker-a only); `2m-2s-sync` = SYNC_MASTER + slave; "
             "`dledger` = 3 members, an ack after a majority stored the entry.", "",
             "| mode | threads | msg/s | p50 ms | p99 ms | statuses |", "|---|---:|---:|---:|---:|---|"]
    lines += [f"| {r['mode']} | {r['threads']} | {r['msg_per_s']:,} | {r['p50_ms']} | {r['p99_ms']} | "
              f"{', '.join(f'{k} {v}' for k, v in sorted(r['statuses'].items()))} |" for r in rates]
    if kills:
        lines += ["", f"## {len(kills)} leader SIGKILLs (DLedger's own timers, sender every 20 ms)", "",
                  "| kill | kill → registered s | registered → first SEND_OK s | client outage s | failed sends |",
                  "|---:|---:|---:|---:|---:|"]
        lines += [f"| {r['kill']} | {r['kill_to_registered_s']} | {r['registered_to_first_ok_s']} | "
                  f"{r['client_outage_s']} | {r['failed_sends']} |" for r in kills]
        lines += ["", f"kill → registered: {dist('kill_to_registered_s')} s; registered → first SEND_OK: "
                  f"{dist('registered_to_first_ok_s')} s; client outage: {dist('client_outage_s')} s "
                  "(Java 4.9.8 capture: 9.5 s to registration, 26.9 s client outage)."]
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
