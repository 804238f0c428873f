"""The benchmark suite: our SDK and the official C++ client side by side on one reference broker.

Usage: ``python benchmarks/run.py [--quick] [--sizes 100,1024] [--flush ASYNC_FLUSH]
[--scenarios sync1,async] [--out-dir benchmarks/results] [--namesrv ADDR [--cluster NAME]]``
(``make bench`` / ``make bench QUICK=1``).

``--namesrv ADDR`` measures an existing cluster instead (a real Apache RocketMQ one included, as
Java's benchmark tools do): no broker is started, the topics are created through the
``AdminClient`` (4 queues, on every master of ``--cluster``, default the first cluster), the
flush mode is whatever the brokers run (read from the first master's config), the consume
backlog goes to the first master, and broker CPU is not measured (it is not this machine's).

For each flush mode (ASYNC_FLUSH, then SYNC_FLUSH) a reference broker (``python -m
rocketmq_broker dev``, a child process on 127.0.0.1) is started; for each body size every
scenario runs once with the SDK and once with the C++ client (``rocketmq==0.4.4``), alternating
which goes first, each in its own process (``benchmarks/_worker.py``). Recorded per run:

* throughput: messages done in the measured phase / its wall time;
* client CPU: user+system seconds of the client process during the measured phase (all its
  threads; ``getrusage(RUSAGE_SELF)`` in the worker), and of the whole process including start-up
  and shutdown (``os.wait4`` rusage), both per 100,000 messages;
* broker CPU: utime+stime of the broker process (``/proc/<pid>/stat``) over the run, per message;
* latency scenario: send (scheduled time) to listener p50/p99/p99.9 at a fixed rate.
* consume scenario: both clients drain (each its own group, from the first offset) one backlog
  of 1,000,000 messages per size (``--backlog``; QUICK 5,000), filled first by pre-encoded SDK
  batches (``benchmarks/backlog.py``); 16 KiB backlogs are cut to what the store's disk holds
  with a margin, recorded in ``backlogs``.

An estimate of the run's duration is printed at the start and recorded (``estimate_s``).

Scenarios the SDK lacks (``Producer`` has no ``send_oneway`` today) are recorded as
"not available yet". Writes ``<out-dir>/<date>.json`` and ``<date>.md`` (``<date>-quick.*`` with
``--quick``). Every run is bounded in count and time; the broker and all workers stop by themselves.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import harness  # noqa: E402
from harness import git_head, git_span, machine_info, proc_cpu_s, runtime_info, runtime_line, settle  # noqa: E402

WORKER = HERE / "_worker.py"
MAX_MESSAGE_SIZE = 4 * 1024 * 1024
BUSY_POLL_US = 100  # the broker's busy_poll_us in the suite: polls catch sync senders' next request (benchmarks/profiling/LOG.md)

# name -> (worker scenario, extra args)
SCENARIOS: dict[str, tuple[str, dict]] = {
    "sync1": ("sync", {"threads": 1}),
    "sync4": ("sync", {"threads": 4}),
    "async": ("async", {"inflight": 1000}),
    "oneway": ("oneway", {}),
    "batch32": ("batch", {"batch": 32}),
    "batch256": ("batch", {"batch": 256}),
    "consume": ("consume", {}),
    "latency1k": ("latency", {"rate": 1_000}),
    "latency5k": ("latency", {"rate": 5_000}),
}


def sdk_has(method: str) -> bool:
    from rocketmq_sdk import Producer

    return callable(getattr(Producer, method, None))


def available(client: str, scenario: str) -> str | None:
    """None when ``client`` can run ``scenario``, else why not."""
    if client == "sdk":
        need = {"async": "send_async", "oneway": "send_oneway", "batch": "send_batch"}.get(scenario)
        if need and not sdk_has(need):
            return f"not available yet (Producer.{need} missing)"
    return None


class Progress:
    """A live status line on a TTY, plain lines on a pipe."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()

    def step(self, text: str) -> None:
        if self.tty:
            sys.stderr.write("\r\x1b[2K" + text[:150])
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def line(self, text: str) -> None:
        if self.tty:
            sys.stderr.write("\r\x1b[2K")
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def run_worker(args: dict, broker_pid: int | None, timeout_s: float) -> dict:
    """Run one worker process; its JSON result plus process CPU, and the broker's CPU when
    ``broker_pid`` is a local process (None: a remote broker, not measured)."""
    settled = settle(broker_pid) if broker_pid else 0.0
    home = tempfile.mkdtemp(prefix="bench-home-")  # librocketmq logs under $HOME
    env = {k: v for k, v in os.environ.items() if k not in ("NAMESRV_ADDR", "ROCKETMQ_HOME")}
    env["HOME"] = home
    b0 = proc_cpu_s(broker_pid) if broker_pid else None
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(WORKER), json.dumps({**args, "deadline_s": int(timeout_s)})],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    killer = threading.Timer(timeout_s + 10, proc.kill)
    killer.start()
    err: list[bytes] = []
    t = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
    t.start()
    out = proc.stdout.read().decode(errors="replace")
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    killer.cancel()
    t.join(5)
    wall = time.perf_counter() - t0
    b1 = proc_cpu_s(broker_pid) if broker_pid else None
    shutil.rmtree(home, ignore_errors=True)
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    try:
        res = json.loads(lines[-1]) if lines else {"error": f"no result (exit {proc.returncode})"}
    except ValueError:
        res = {"error": f"unreadable result: {lines[-1][:200]}"}
    if "error" in res and err:
        res["stderr_tail"] = err[0].decode(errors="replace")[-600:]
    res["process_cpu_s"] = ru.ru_utime + ru.ru_stime
    res["process_wall_s"] = wall
    res["broker_cpu_s"] = None if b0 is None or b1 is None else b1 - b0
    res["settle_s"] = settled
    return res


def derive(res: dict) -> dict:
    """Throughput and per-message costs from a raw worker result."""
    n, el = res.get("count", 0), res.get("elapsed_s", 0)
    if n and el:
        res["msgs_per_s"] = n / el
        res["client_cpu_s_per_100k"] = res["cpu_s"] / n * 100_000
        res["client_cpu_us_per_msg"] = res["cpu_s"] / n * 1e6
        res["process_cpu_s_per_100k"] = res["process_cpu_s"] / n * 100_000
        if res.get("broker_cpu_s") is not None:
            res["broker_cpu_us_per_msg"] = res["broker_cpu_s"] / n * 1e6
    return res


def plan(quick: bool) -> dict:
    if quick:
        return {"seconds": 1.0, "sync": 2_000, "async": 5_000, "batch": 20_000, "backlog": 5_000,
                "rate": 1_000, "lat_seconds": 1.0, "consume_seconds": 20, "sync_rounds": 1}
    # consume: the issue's backlog of 1,000,000 for every size (16 KiB: as much as the disk
    # allows, see backlog.sized_backlog); consume_seconds caps each drain (C++ 16 KiB ~11k msg/s)
    # sync: 3 alternating rounds of 1.5 s per client (see ROUNDS_NOTE)
    return {"seconds": 2.5, "sync": 50_000, "async": 200_000, "batch": 1_000_000, "backlog": 1_000_000,
            "rate": 5_000, "lat_seconds": 3.0, "consume_seconds": 120, "sync_rounds": 3, "sync_seconds": 1.5}


def backlog_count(p: dict, size: int) -> int:
    """Backlog wanted for ``size`` (before the disk check): the plan's for every size in a full run,
    a fifth for 16 KiB in QUICK."""
    return p["backlog"] if size <= 1024 or not p.get("quick") else max(1_000, p["backlog"] // 5)


# rough rates on 2 cores (msg/s), for the duration estimate printed at start
_FILL_RATE = {100: 60_000, 1024: 50_000, 16384: 8_000}
_DRAIN_RATE = {("sdk", 100): 60_000, ("sdk", 1024): 45_000, ("sdk", 16384): 18_000,
               ("cpp", 100): 25_000, ("cpp", 1024): 23_000, ("cpp", 16384): 10_000}


def estimate_s(p: dict, sizes: list[int], flushes: list[str], names: list[str], clients: list[str]) -> float:
    """Seconds the run is expected to take on a 2-core machine (start-up, settle and shutdown of
    each worker included: ~1.5 s a run, calibrated on the 2026-11-22 full run; the broker: ~3 s a
    flush mode)."""
    total = 0.0
    for size in sizes:
        near = min(_FILL_RATE, key=lambda s: abs(s - size))
        for name in names:
            spec = scenario_args(name, size, p)
            if isinstance(spec, str):
                continue
            scen, a = spec
            if scen == "consume":
                n = backlog_count(p, size)
                total += n / _FILL_RATE[near] + 3
                total += sum(min(a["max_seconds"], n / _DRAIN_RATE[(c, near)]) + 2 for c in clients)
            elif scen == "latency":
                total += len(clients) * (a["max_seconds"] + 3)
            else:
                total += len(clients) * (a["max_seconds"] + 1.5) * rounds_of(scen, p)
    return len(flushes) * (total + 3)


def scenario_args(name: str, size: int, p: dict) -> tuple[str, dict] | str:
    """Worker args of scenario ``name`` (without client/group/topic), or why it is skipped."""
    scen, extra = SCENARIOS[name]
    a = {"scenario": scen, "size": size, "threads": 1, "batch": 1, "inflight": 1,
         "max_seconds": p["seconds"], "rate": p["rate"], **extra}
    if scen == "batch":
        # one batch body: per message 4+4+4+4+4 + 2 (body len, flag... topic-less) + body + props
        if extra["batch"] * (size + 64) > MAX_MESSAGE_SIZE:
            return f"a batch of {extra['batch']} x {size} B exceeds the 4 MiB max message size"
        a["max_count"] = p["batch"] if size <= 1024 else p["batch"] // 16
    elif scen == "async":
        a["max_count"] = p["async"] if size <= 1024 else p["async"] // 4
    elif scen == "latency":
        if extra["rate"] > p["rate"]:
            return f"rate {extra['rate']:,}/s is above this plan's {p['rate']:,}/s (QUICK)"
        a["max_count"] = int(a["rate"] * p["lat_seconds"])
        a["max_seconds"] = p["lat_seconds"]
    elif scen == "consume":
        a["max_count"] = backlog_count(p, size)
        a["max_seconds"] = p["consume_seconds"]
    else:
        a["max_count"] = p["sync"] if size <= 1024 else p["sync"] // 4
        if scen == "sync":
            a["max_seconds"] = p.get("sync_seconds", p["seconds"])
    return scen, a


def rounds_of(scen: str, p: dict) -> int:
    """How many alternating rounds each client runs of a scenario (sync: ``sync_rounds``)."""
    return p.get("sync_rounds", 1) if scen == "sync" else 1


ROUNDS_NOTE = ("Sync sends are one round trip per message, and on this kind of machine a round trip costs "
               "either side 15-25 µs more when the scheduler puts the client and the broker on two cores "
               "(a cross-core wake-up) than on one, which can change for each worker process "
               "(benchmarks/profiling/LOG.md, \"Why sync1 is bimodal\"). So each client runs the sync scenarios in "
               "rounds, alternating with the other client (SDK, C++, C++, SDK, ...); the table shows totals over "
               "the rounds (all messages / all measured time; all CPU / all messages) and the notes each round.")


_SUMMED = ("count", "errors", "elapsed_s", "cpu_s", "process_cpu_s", "process_wall_s", "broker_cpu_s", "settle_s")


def merge_rounds(runs: list[dict]) -> dict:
    """One client's rounds of a scenario as one result: counts, measured time and CPU summed (so
    the derived rates are totals over the rounds), each round's derived numbers under ``rounds``.
    A failed round makes the whole result failed (its error is kept)."""
    if len(runs) == 1:
        return runs[0]
    failed = [r for r in runs if "msgs_per_s" not in r]
    if failed:
        return {**failed[0], "rounds": runs}
    merged = derive({k: None if any(r.get(k, 0) is None for r in runs) else sum(r.get(k, 0) for r in runs)
                     for k in _SUMMED})
    merged["rounds"] = [{k: r.get(k) for k in ("msgs_per_s", "client_cpu_us_per_msg", "broker_cpu_us_per_msg")}
                        for r in runs]
    return merged


def make_backlog(cluster, topic: str, size: int, wanted: int, prog: Progress, flush: str) -> dict:
    """Fill ``topic`` with up to ``wanted`` messages (fewer when the disk is short, see
    ``backlog.sized_backlog``); the record of what was stored, how fast, and any reduction."""
    from backlog import fill, sized_backlog
    from rocketmq_sdk import Producer

    count, reason = sized_backlog(wanted, size, cluster.store_dir) if cluster.store_dir else (wanted, None)
    cluster.ensure_topic(topic)
    if reason:
        prog.line(f"{flush} {size} B: {reason}")
    prog.step(f"{flush} {size} B: filling a backlog of {count:,} in {topic}")
    with Producer("bench_fill", cluster.namesrv_addr) as producer:
        res = fill(producer, cluster.broker_addr, topic, size, count)
    prog.line(f"{flush} {size:>5} B backlog  : {res['count']:,} stored in {res['elapsed_s']:.1f} s "
              f"({res['msgs_per_s']:,.0f} msg/s)" + (f" ERROR {res['error']}" if "error" in res else ""))
    return {"wanted": wanted, **({"reduced": reason} if reason else {}), **res}


class LocalBroker:
    """A reference broker started for one flush mode (``start_dev_cluster``, its own process)."""

    def __init__(self, flush: str, busy_poll_us: int) -> None:
        from rocketmq_broker.embedded import start_dev_cluster

        self.flush = flush
        self._cluster = start_dev_cluster(broker_config={"flush_disk_type": flush, "busy_poll_us": busy_poll_us,
                                                         "mapped_file_size_commit_log": 256 * 1024 * 1024})
        self.namesrv_addr, self.broker_addr = self._cluster.namesrv_addr, self._cluster.broker_addr
        self.store_dir = self._cluster.store_dir
        self.pid: int | None = self._cluster._proc.pid  # the dev broker + name server process

    def ensure_topic(self, topic: str) -> None:
        """Nothing to do: the dev broker creates topics on first send (TBW102)."""

    def stop(self) -> None:
        self._cluster.stop()


class ExistingCluster:
    """A running cluster reached through its name servers (``--namesrv``): topics are created with
    the ``AdminClient``, the broker's CPU and disk are not this machine's (not measured)."""

    def __init__(self, namesrv_addr: str, cluster: str | None) -> None:
        from rocketmq_sdk.admin import AdminClient

        self.namesrv_addr, self.store_dir, self.pid = namesrv_addr, None, None
        self._admin = AdminClient(namesrv_addr)
        masters = [b for b in self._admin.cluster_list(runtime=False) if b.broker_id == 0
                   and (cluster is None or b.cluster == cluster)]
        if not masters:
            self._admin.close()
            raise SystemExit(f"no master broker{f' in cluster {cluster}' if cluster else ''} at {namesrv_addr}")
        self.cluster = cluster or masters[0].cluster
        self.broker_addr = sorted(b.addr for b in masters if b.cluster == self.cluster)[0]
        try:
            self.flush = self._admin.broker_config(self.broker_addr).get("flushDiskType") or "unknown"
        except Exception as exc:  # a broker that refuses GET_BROKER_CONFIG (ACL) still gets measured
            self.flush = f"unknown ({type(exc).__name__})"
        self._created: set[str] = set()

    def ensure_topic(self, topic: str) -> None:
        """Create ``topic`` (4 read/write queues, as auto-creation gives) on the cluster's masters once."""
        if topic not in self._created:
            self._admin.create_topic(topic, cluster=self.cluster, read_queue_nums=4, write_queue_nums=4)
            self._created.add(topic)

    def stop(self) -> None:
        self._admin.close()


def fmt_rate(v: float | None) -> str:
    return "–" if v is None else f"{v:,.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 B only, small counts (a minute or so)")
    ap.add_argument("--sizes", help="comma-separated body sizes in bytes (default 100,1024,16384)")
    ap.add_argument("--flush", help="comma-separated flush modes (default ASYNC_FLUSH,SYNC_FLUSH)")
    ap.add_argument("--scenarios", help=f"comma-separated subset of {','.join(SCENARIOS)}")
    ap.add_argument("--clients", default="sdk,cpp", help="comma-separated: sdk,cpp")
    ap.add_argument("--out-dir", default=str(HERE / "results"))
    ap.add_argument("--no-write", action="store_true", help="print the table only")
    ap.add_argument("--backlog", type=int, help="consume backlog per size (default 1,000,000; QUICK 5,000)")
    ap.add_argument("--busy-poll-us", type=int, default=BUSY_POLL_US,
                    help=f"the broker's busy_poll_us (default {BUSY_POLL_US}; 0: its event loop sleeps between reads)")
    ap.add_argument("--namesrv", metavar="ADDR",
                    help="measure an existing cluster (host:port[;host:port], e.g. Apache RocketMQ) instead of a "
                         "reference broker started here; --flush and --busy-poll-us do not apply")
    ap.add_argument("--cluster", help="with --namesrv: the cluster whose masters get the topics (default: the first)")
    args = ap.parse_args()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the broker on the way out
    load_before = os.getloadavg()
    commit_before = git_head()
    p = plan(args.quick)
    p["quick"] = args.quick
    if args.backlog:
        p["backlog"] = args.backlog
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else ([100] if args.quick else [100, 1024, 16384])
    flushes = args.flush.split(",") if args.flush else ["ASYNC_FLUSH", "SYNC_FLUSH"]
    names = args.scenarios.split(",") if args.scenarios else list(SCENARIOS)
    clients = args.clients.split(",")
    prog = Progress()
    started = dt.datetime.now(dt.UTC)
    results: list[dict] = []
    run_no = 0
    est = estimate_s(p, sizes, flushes, names, clients)
    prog.line(f"estimated duration: {est / 60:.1f} min on 2 cores (consume backlog {p['backlog']:,})")
    suite_deadline = time.monotonic() + max(600, 2 * est + 300)
    backlogs: list[dict] = []

    if args.namesrv:
        flushes = ["existing"]
    for flush_wanted in flushes:
        if args.namesrv:
            cluster: LocalBroker | ExistingCluster = ExistingCluster(args.namesrv, args.cluster)
            prog.line(f"== cluster {cluster.cluster} at {args.namesrv} (first master {cluster.broker_addr}, "
                      f"{cluster.flush})")
        else:
            prog.line(f"== broker {flush_wanted}")
            cluster = LocalBroker(flush_wanted, args.busy_poll_us)
        flush = cluster.flush
        try:
            pid = cluster.pid
            for size in sizes:
                topic = f"Bench_{flush[:1]}_{size}"
                for name in names:
                    if time.monotonic() > suite_deadline:
                        prog.line("suite time limit reached: remaining scenarios skipped")
                        break
                    spec = scenario_args(name, size, p)
                    order = clients if run_no % 2 == 0 else list(reversed(clients))
                    run_no += 1
                    if isinstance(spec, str):
                        for c in order:
                            results.append({"flush": flush, "size": size, "scenario": name, "client": c,
                                            "skipped": spec})
                        continue
                    scen, base = spec
                    if scen == "consume":  # a backlog both consumers drain from the start, each its own group
                        btopic = f"Backlog_{flush[:1]}_{size}"
                        fill = make_backlog(cluster, btopic, size, base["max_count"], prog, flush)
                        backlogs.append({"flush": flush, "size": size, "topic": btopic, **fill})
                        base = {**base, "topic": btopic, "max_count": fill["count"]}
                    runs: dict[str, list[dict]] = {}
                    n_rounds = rounds_of(scen, p)
                    for rnd in range(n_rounds):
                        for c in (order if rnd % 2 == 0 else list(reversed(order))):
                            why = available(c, scen)
                            if why:
                                runs[c] = [{"skipped": why}]
                                continue
                            wargs = {"topic": topic, **base, "client": c, "namesrv": cluster.namesrv_addr,
                                     "group": f"bench_{c}_{name}_{run_no}"}
                            if scen == "latency":
                                wargs["topic"] = f"Lat_{flush[:1]}_{size}_{name}_{c}"
                            cluster.ensure_topic(wargs["topic"])
                            label = f"{flush} {size:>5} B {name:<9} {c:<3}" + (
                                f" round {rnd + 1}/{n_rounds}" if n_rounds > 1 else "")
                            prog.step(f"{label}: running (≤{wargs['max_seconds']:.0f} s)")
                            res = derive(run_worker(wargs, pid, wargs["max_seconds"] + 60))
                            runs.setdefault(c, []).append(res)
                            lat = res.get("latency_us") or {}
                            extra = (f" p50 {lat['p50'] / 1000:.2f} ms p99 {lat['p99'] / 1000:.2f} ms" if lat else "")
                            prog.line(f"{label}: "
                                      + (f"{res['msgs_per_s']:>10,.0f} msg/s  client "
                                         f"{res['client_cpu_us_per_msg']:6.1f} µs/msg  broker "
                                         + (f"{res['broker_cpu_us_per_msg']:6.1f} µs/msg"
                                            if "broker_cpu_us_per_msg" in res else "not measured")
                                         + extra
                                         if "msgs_per_s" in res else f"FAILED {res.get('error')}"))
                    for c in order:
                        results.append({"flush": flush, "size": size, "scenario": name, "client": c,
                                        **merge_rounds(runs[c])})
        finally:
            cluster.stop()

    doc = {
        "started_utc": started.isoformat(timespec="seconds"),
        "finished_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "quick": args.quick,
        "git_commit": {"start": commit_before, "end": git_head()},
        "machine": machine_info(load_before),
        "clients": {"sdk": "rocketmq_sdk (this repository)", "cpp": _cpp_version()},
        "runtime": runtime_info(),
        "broker": ({"existing": args.namesrv, "cluster": args.cluster} if args.namesrv
                   else {"busy_poll_us": args.busy_poll_us}),
        "plan": p,
        "estimate_s": round(est),
        "backlogs": backlogs,
        "results": results,
    }
    md = to_markdown(doc)
    print(md)
    if not args.no_write:
        stem = started.strftime("%Y-%m-%d") + ("-quick" if args.quick else "")
        prog.line(f"wrote {harness.write_results(args.out_dir, stem, doc, md)}.json and .md")
    return 0


def broker_line(broker: dict | None) -> list[str]:
    """The broker settings line of a results header (none for files written before it existed)."""
    if broker is None:
        return []
    if broker.get("existing"):
        return [f"Broker: an existing cluster at `{broker['existing']}` (`--namesrv`); its CPU is not measured.  "]
    us = broker.get("busy_poll_us", 0)
    return ["Broker: the reference broker in a process of its own (uvloop when installed), "
            + (f"busy polling up to {us} µs after each answer (`busy_poll_us`; docs/performance.md).  " if us
               else "sleeping between reads (`busy_poll_us=0`).  ")]


def _cpp_version() -> str:
    try:
        from importlib.metadata import version

        return f"rocketmq {version('rocketmq')} (librocketmq, official C++ client)"
    except Exception:
        return "rocketmq (C++ client)"


def _plan_line(doc: dict) -> str:
    """The run's settings (the reductions from the issue's wording are explicit here)."""
    p = doc["plan"]
    took = (dt.datetime.fromisoformat(doc["finished_utc"]) - dt.datetime.fromisoformat(doc["started_utc"]))
    sync = (f"sync scenarios {p['sync_rounds']} alternating rounds of {p['sync_seconds']} s per client, other "
            if p.get("sync_rounds", 1) > 1 else "")
    return (f"Plan: {sync}send scenarios {p['seconds']} s each (at most {p['sync']:,} sync / {p['async']:,} async / "
            f"{p['batch']:,} batched messages); consume: a backlog of {p['backlog']:,} per body size (see the "
            f"notes for each), each client's drain capped at {p['consume_seconds']} s; latency at "
            f"{p['rate']:,} msg/s at most, {p['lat_seconds']} s. Estimated {doc.get('estimate_s', 0) / 60:.0f} min, "
            f"took {took.total_seconds() / 60:.1f} min.")


def round_notes(rows: dict[tuple, dict]) -> list[str]:
    """A note per scenario run in rounds: each round's msg/s and client CPU, and the ratios."""
    notes = []
    for (flush, size, name), by in rows.items():
        s, c = (by.get(k, {}).get("rounds") if "msgs_per_s" in by.get(k, {}) else None for k in ("sdk", "cpp"))
        if not s:
            continue
        text = f"{name} {size:,} B ({flush}), rounds: SDK " + ", ".join(
            f"{r['msgs_per_s']:,.0f} msg/s ({r['client_cpu_us_per_msg']:.1f} µs)" for r in s)
        if c:
            text += "; C++ " + ", ".join(f"{r['msgs_per_s']:,.0f} msg/s ({r['client_cpu_us_per_msg']:.1f} µs)"
                                         for r in c)
            text += "; ratio per round " + ", ".join(f"{a['msgs_per_s'] / b['msgs_per_s']:.2f}"
                                                     for a, b in zip(s, c, strict=False))
        notes.append(text)
    return notes


def to_markdown(doc: dict) -> str:
    m = doc["machine"]
    out = [f"# Benchmark results {doc['started_utc']}", "",
           f"Machine: {m['cores']} cores ({m['processor']}), Python {m['python']}, {m['platform']}; "
           f"load average before/after {m['loadavg_before'][0]:.1f}/{m['loadavg_after'][0]:.1f} "
           "(other work on the machine adds noise).  ",
           f"Command: `{doc['command']}`{' (QUICK)' if doc['quick'] else ''}; git "
           + git_span(doc["git_commit"], " (code changed during the run)") + ".  ",
           f"Clients: SDK = {doc['clients']['sdk']}; C++ = {doc['clients']['cpp']}, driven through its "
           "ctypes bindings in the same kind of worker process.  ",
           runtime_line(doc.get("runtime", {})),
           *broker_line(doc.get("broker")),
           _plan_line(doc), "",
           "Throughput in messages/s over the measured phase; ratio = SDK / C++; client CPU = CPU seconds "
           "of the client process per 100,000 messages (measured phase, all threads); broker CPU in µs "
           "per message over the whole run of that client.", ""]
    rows: dict[tuple, dict] = {}
    for r in doc["results"]:
        rows.setdefault((r["flush"], r["size"], r["scenario"]), {})[r["client"]] = r
    for flush in dict.fromkeys(k[0] for k in rows):
        out += [f"## {flush}", "",
                "| body | scenario | SDK msg/s | C++ msg/s | ratio | SDK CPU s/100k | C++ CPU s/100k "
                "| broker µs/msg (SDK / C++) | latency p50 / p99 / p99.9 ms (SDK; C++) |",
                "|---:|---|---:|---:|---:|---:|---:|---:|---|"]
        for (f, size, name), by in rows.items():
            if f != flush:
                continue
            s, c = by.get("sdk", {}), by.get("cpp", {})

            def cell(r: dict, key: str, fmt: str) -> str:
                if "skipped" in r:
                    return "n/a"
                if "error" in r:
                    return "error"
                v = r.get(key)
                return "–" if v is None else format(v, fmt)

            ratio = (f"{s['msgs_per_s'] / c['msgs_per_s']:.2f}"
                     if s.get("msgs_per_s") and c.get("msgs_per_s") else "–")

            def lat(r: dict) -> str:
                q = r.get("latency_us")
                return f"{q['p50'] / 1000:.2f} / {q['p99'] / 1000:.2f} / {q['p999'] / 1000:.2f}" if q else "–"

            out.append(f"| {size:,} B | {name} | {cell(s, 'msgs_per_s', ',.0f')} | {cell(c, 'msgs_per_s', ',.0f')} "
                       f"| {ratio} | {cell(s, 'client_cpu_s_per_100k', '.2f')} | {cell(c, 'client_cpu_s_per_100k', '.2f')} "
                       f"| {cell(s, 'broker_cpu_us_per_msg', '.1f')} / {cell(c, 'broker_cpu_us_per_msg', '.1f')} "
                       f"| {lat(s) + '; ' + lat(c) if name.startswith('latency') else ''} |")
        out.append("")
    notes = sorted({f"{r['client']} {r['scenario']}: {r['skipped']}" for r in doc["results"] if "skipped" in r}
                   | {f"{r['client']} {r['scenario']} {r['size']} B ({r['flush']}): {r['error']}"
                      for r in doc["results"] if "error" in r})
    for b in doc.get("backlogs", []):
        notes.append(f"consume backlog {b['size']:,} B ({b['flush']}): {b['count']:,} messages stored in "
                     f"{b['elapsed_s']:.0f} s" + (f" - {b['reduced']}" if b.get("reduced") else "")
                     + (f" - fill error: {b['error']}" if b.get("error") else ""))
    notes += round_notes(rows)
    if notes:
        out += ["Notes:", ""] + [f"- {n}" for n in notes] + [""]
    if any("rounds" in r for r in doc["results"]):
        out += [ROUNDS_NOTE, ""]
    out += ["C++ batches are sent with compression disabled: librocketmq 0.4.4 zlib-compresses a whole batch "
            "body over 4 KiB, which the broker cannot split (\"malformed batch body\"). Single bodies of 16 KiB "
            "are compressed by both clients (threshold 4 KiB).", ""]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
