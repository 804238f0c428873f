"""Celery on RocketMQ vs Celery on Redis: end-to-end tasks/s and ``apply_async`` enqueue rate.

For each broker (this repository's ``rocketmq://`` transport on the embedded reference broker,
kombu's ``redis://`` transport on a local ``redis-server``) a real ``celery worker -P prefork
-c 2`` runs a no-op task (it appends one byte to a file, so executed tasks can be counted):

- ``enqueue``: ``apply_async`` of N tasks from this process with no worker running (publish
  only), tasks/s;
- ``end-to-end``: the worker running, N tasks enqueued as fast as possible; tasks/s from the
  first ``apply_async`` until the worker has executed all N (enqueue -> worker -> ack);
- ``latency``: the worker running, ``--latency-tasks`` tasks sent at a fixed ``--rate`` (default
  200 tasks/s, each ``apply_async`` on its own schedule slot); each task carries the producer's
  ``time.monotonic()`` taken just before its ``apply_async`` and records, when it starts in a pool
  process, how long ago that was: p50/p99/max of enqueue -> task started, ms.

The two brokers run alternately, ``--rounds`` times each. Needs ``redis-server`` on PATH
(Debian ``apt-get install redis-server``) and the ``redis`` package (``pip install redis``);
``--brokers rocketmq`` runs without them. Writes ``results/<date>-celery.json`` and ``.md``.

    .venv/bin/python benchmarks/celery_tasks.py [--tasks 2000] [--rounds 2] [--quick]
        [--concurrency 2,4] [--rate 200] [--latency-tasks 1000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from harness import cpu_model, git_head, git_span, proc_cpu_s  # noqa: E402 - benchmarks/harness.py helpers
from rocketmq_broker.embedded import free_fixed_port  # noqa: E402


def wait_for(cond, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.01)


class RedisServer:
    def __init__(self, workdir: Path) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server not found (Debian: apt-get install redis-server)")
        self.port = free_fixed_port()
        self.proc = subprocess.Popen([exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", str(workdir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis
        client = redis.Redis(port=self.port)

        def up() -> bool:
            try:
                return client.ping()
            except redis.ConnectionError:
                return False
        wait_for(up, 10, "redis-server")
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def make_env(url: str, mark: Path, options: dict) -> dict:
    return dict(os.environ, CELERY_BENCH_BROKER=url, CELERY_BENCH_MARK=str(mark),
                CELERY_BENCH_OPTIONS=json.dumps(options),
                PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))


def app_for(env: dict):
    os.environ.update({k: env[k] for k in ("CELERY_BENCH_BROKER", "CELERY_BENCH_MARK", "CELERY_BENCH_OPTIONS")})
    import importlib

    import celery_bench_app
    importlib.reload(celery_bench_app)
    return celery_bench_app.app


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` and of its pool processes (its children), seconds (/proc)."""
    try:
        children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        children = []
    total = 0.0
    for p in [pid, *children]:
        try:
            total += proc_cpu_s(p)
        except OSError:
            continue
    return total


def start_worker(env: dict, log: Path, name: str, concurrency: int = 2) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "celery", "-A", "celery_bench_app", "worker", "-P", "prefork",
                                 "-c", str(concurrency), "-n", name, "--loglevel=WARNING", "--without-gossip", "--without-mingle"],
                                cwd=HERE, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def stop_worker(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def executed(mark: Path) -> int:
    try:
        return mark.stat().st_size
    except FileNotFoundError:
        return 0


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile ``p`` (0-100] of an ascending list."""
    return sorted_values[min(len(sorted_values) - 1, max(0, math.ceil(p / 100 * len(sorted_values)) - 1))]


def recorded_latencies(path: Path) -> list[float]:
    try:
        return [float(x) for x in path.read_text().split()]
    except FileNotFoundError:
        return []


def fixed_rate_latency(app, mark: Path, n: int, rate: float, label: str) -> dict:
    """Sends ``n`` ``bench.latency`` tasks at ``rate`` tasks/s to the running worker and returns
    the enqueue -> started latencies (ms) the tasks recorded."""
    task = app.tasks["bench.latency"]
    path = Path(f"{mark}.latency")
    with app.producer_or_acquire() as producer:
        start = time.monotonic() + 0.05
        for i in range(n):
            pause = start + i / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            task.apply_async((time.monotonic(),), producer=producer)
        send_s = time.monotonic() - start
    wait_for(lambda: len(recorded_latencies(path)) >= n, 120,
             f"{n} latency tasks on {label}")
    ms = sorted(1000 * v for v in recorded_latencies(path))
    return {"latency_tasks": n, "latency_rate_per_s": rate, "latency_sent_per_s": n / send_s,
            "latency_p50_ms": percentile(ms, 50), "latency_p99_ms": percentile(ms, 99), "latency_max_ms": ms[-1]}


def one_round(label: str, url: str, options: dict, n: int, workdir: Path, concurrency: int = 2,
              idle_s: float = 0.0, rate: float = 200.0, latency_tasks: int = 0) -> dict:
    mark = workdir / f"{label}-{time.monotonic_ns()}.mark"
    env = make_env(url, mark, options)
    app = app_for(env)
    noop = app.tasks["bench.noop"]
    rec: dict = {"broker": label, "tasks": n, "concurrency": concurrency}
    # enqueue only (no worker): publish rate of apply_async
    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=3)
        with app.producer_or_acquire() as producer:
            noop.apply_async(producer=producer)            # declares the queue, warms the connection
            t0 = time.perf_counter()
            for _ in range(n):
                noop.apply_async(producer=producer)
            rec["enqueue_per_s"] = n / (time.perf_counter() - t0)
    # drain those with a worker, then measure end to end
    name = f"bench-{label}@localhost"
    worker = start_worker(env, workdir / f"{label}.log", name, concurrency)
    try:
        wait_for(lambda: executed(mark) >= n + 1, 120, f"the {label} worker to drain the enqueue phase")
        if idle_s > 0:
            # an idle worker (nothing queued): CPU it spends waiting, as % of one core
            c0, t0 = cpu_seconds(worker.pid), time.monotonic()
            time.sleep(idle_s)
            rec["idle_cpu_pct"] = 100 * (cpu_seconds(worker.pid) - c0) / (time.monotonic() - t0)
        start_count = executed(mark)
        with app.producer_or_acquire() as producer:
            t0 = time.perf_counter()
            for _ in range(n):
                noop.apply_async(producer=producer)
            t_enq = time.perf_counter() - t0
            wait_for(lambda: executed(mark) >= start_count + n, 300, f"{n} tasks on {label}")
            elapsed = time.perf_counter() - t0
        rec.update(end_to_end_per_s=n / elapsed, end_to_end_s=elapsed, enqueue_while_running_per_s=n / t_enq)
        if latency_tasks > 0:
            rec.update(fixed_rate_latency(app, mark, latency_tasks, rate, label))
    finally:
        stop_worker(worker)
        app.close()
    return rec


def goal_lines(results: list[dict]) -> list[str]:
    """One markdown row per (round, -c) that has both a rocketmq and a redis record."""
    by = {(r["round"], r.get("concurrency", 2), r["broker"]): r for r in results}
    rows = []
    for rnd, conc in sorted({(k[0], k[1]) for k in by}):
        rmq, red = by.get((rnd, conc, "rocketmq")), by.get((rnd, conc, "redis"))
        if rmq is None or red is None:
            continue
        p99 = (f"{rmq['latency_p99_ms'] - red['latency_p99_ms']:+.1f}"
               if "latency_p99_ms" in rmq and "latency_p99_ms" in red else "-")
        idle = (f"{rmq['idle_cpu_pct']:.2f} / {red['idle_cpu_pct']:.2f}"
                if "idle_cpu_pct" in rmq and "idle_cpu_pct" in red else "-")
        rows.append(f"| {rnd} | {conc} | {rmq['end_to_end_per_s'] / red['end_to_end_per_s']:.2f}x | {p99} | {idle} |")
    return rows


def to_markdown(doc: dict) -> str:
    m = doc["machine"]
    lines = [f"# Celery: RocketMQ transport vs Redis transport ({doc['started_utc'][:10]})", "",
             f"Machine: {m['cores']} cores ({m['processor']}), Python {m['python']}; load average before/after "
             f"{m['loadavg_before'][0]:.1f}/{m['loadavg_after'][0]:.1f} (shared machine: other work is noise).  ",
             f"Command: `{doc['command']}`; git {git_span(doc['git_commit'])}.  ",
             f"Celery {doc['versions']['celery']}, kombu {doc['versions']['kombu']}, "
             f"redis-server {doc['versions'].get('redis_server', '-')}; worker `-P prefork -c N` (column -c), "
             f"prefetch multiplier {doc['settings']['prefetch']}, no-op task, results ignored; "
             f"{doc['settings']['tasks']} tasks per round.", "",
             "| broker | -c | round | apply_async enqueue (no worker) tasks/s | end-to-end tasks/s "
             "| enqueue while the worker runs tasks/s | idle worker CPU % (main + pool processes, one core = 100) "
             "| latency p50 ms | p99 ms | max ms (enqueue -> started at the fixed rate) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in doc["results"]:
        idle = f"{r['idle_cpu_pct']:.2f}" if "idle_cpu_pct" in r else "-"
        lat = (f"{r['latency_p50_ms']:.1f} | {r['latency_p99_ms']:.1f} | {r['latency_max_ms']:.1f}"
               if "latency_p50_ms" in r else "- | - | -")
        lines.append(f"| {r['broker']} | {r.get('concurrency', 2)} | {r['round']} | {r['enqueue_per_s']:,.0f} "
                     f"| {r['end_to_end_per_s']:,.0f} | {r['enqueue_while_running_per_s']:,.0f} | {idle} | {lat} |")
    settings = doc["settings"]
    if settings.get("latency_tasks"):
        lines += ["", f"Latency: {settings['latency_tasks']} tasks per round sent at {settings['rate']:g} tasks/s "
                  "(one `apply_async` per schedule slot), each stamped with the producer's `time.monotonic()` "
                  "just before its `apply_async` and recording the difference when it starts in a pool process; "
                  "nearest-rank percentiles."]
    goals = goal_lines(doc["results"])
    if goals:
        lines += ["", "Issue 26's goals per round and -c (rocketmq vs redis of the same round): end-to-end "
                  "tasks/s >= 1.5x Redis's, p99 latency <= Redis's + 5 ms, idle worker CPU near zero.", "",
                  "| round | -c | end-to-end rocketmq / redis | p99 rocketmq - redis ms | idle CPU % rocketmq / redis |",
                  "|---:|---:|---:|---:|---:|", *goals]
    lines += ["", "Totals per broker (all tasks / all time):", ""]
    for label, s in doc["summary"].items():
        lines.append(f"- {label}: enqueue {s['enqueue_per_s']:,.0f} tasks/s, end-to-end {s['end_to_end_per_s']:,.0f} tasks/s")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=None, help="tasks per round (default 2000, --quick 300)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds per broker (default 2, --quick 1)")
    ap.add_argument("--brokers", default="rocketmq,redis")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--concurrency", default="2", help="worker -c values, comma-separated (default 2)")
    ap.add_argument("--idle-s", type=float, default=10.0,
                    help="seconds the idle worker's CPU is measured each round (0: not measured)")
    ap.add_argument("--rate", type=float, default=200.0, help="tasks/s of the latency phase (default 200)")
    ap.add_argument("--latency-tasks", type=int, default=None,
                    help="tasks of the latency phase per round (default 1000, --quick 400; 0: no latency phase)")
    ap.add_argument("--out-dir", default=str(HERE / "results"))
    ap.add_argument("--name", default=None,
                    help="result file name after the date (default celery, --quick celery-quick)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    n = args.tasks or (300 if args.quick else 2000)
    rounds = args.rounds or (1 if args.quick else 2)
    latency_tasks = args.latency_tasks if args.latency_tasks is not None else (400 if args.quick else 1000)

    import celery
    import kombu
    import rocketmq_sdk.integrations.celery  # noqa: F401 - rocketmq:// in this process
    from rocketmq_broker.embedded import start_dev_cluster

    started = dt.datetime.now(dt.UTC)
    load_before, commit_before = os.getloadavg(), git_head()
    versions = {"celery": celery.__version__, "kombu": kombu.__version__}
    results = []
    with tempfile.TemporaryDirectory(prefix="celery-bench-") as tmp:
        workdir = Path(tmp)
        brokers: dict[str, tuple[str, dict]] = {}
        cluster = redis_server = None
        try:
            if "rocketmq" in args.brokers:
                cluster = start_dev_cluster()
                brokers["rocketmq"] = (f"rocketmq://{cluster.namesrv_addr}", {})
            if "redis" in args.brokers:
                redis_server = RedisServer(workdir)
                out = subprocess.run([shutil.which("redis-server"), "--version"], capture_output=True, text=True)
                versions["redis_server"] = out.stdout.split("v=")[1].split()[0] if "v=" in out.stdout else "?"
                brokers["redis"] = (redis_server.url, {})
            for rnd in range(1, rounds + 1):
                order = list(brokers) if rnd % 2 else list(reversed(brokers))
                for conc in [int(c) for c in args.concurrency.split(",")]:
                    for label in order:
                        url, options = brokers[label]
                        rec = one_round(label, url, options, n, workdir, conc, args.idle_s, args.rate, latency_tasks)
                        rec["round"] = rnd
                        results.append(rec)
                        print(f"{label:9} -c {conc} round {rnd}: enqueue {rec['enqueue_per_s']:8,.0f}/s  end-to-end "
                              f"{rec['end_to_end_per_s']:8,.0f}/s  idle CPU {rec.get('idle_cpu_pct', -1):.2f} %  "
                              f"latency p50/p99 {rec.get('latency_p50_ms', -1):.1f}/{rec.get('latency_p99_ms', -1):.1f} ms",
                              file=sys.stderr, flush=True)
        finally:
            if cluster is not None:
                cluster.stop()
            if redis_server is not None:
                redis_server.stop()
    summary = {}
    for label in dict.fromkeys(r["broker"] for r in results):
        rs = [r for r in results if r["broker"] == label]
        total = sum(r["tasks"] for r in rs)
        summary[label] = {"enqueue_per_s": total / sum(r["tasks"] / r["enqueue_per_s"] for r in rs),
                          "end_to_end_per_s": total / sum(r["end_to_end_s"] for r in rs)}
    doc = {"started_utc": started.isoformat(timespec="seconds"),
           "finished_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
           "command": " ".join([Path(sys.executable).name, *sys.argv]),
           "git_commit": {"start": commit_before, "end": git_head()},
           "machine": {"cores": os.cpu_count(), "python": platform.python_version(), "processor": cpu_model(),
                       "platform": platform.platform(), "loadavg_before": load_before,
                       "loadavg_after": os.getloadavg()},
           "versions": versions,
           "settings": {"tasks": n, "rounds": rounds, "prefetch": int(os.environ.get("CELERY_BENCH_PREFETCH", "64")),
                        "rate": args.rate, "latency_tasks": latency_tasks},
           "results": results, "summary": summary}
    md = to_markdown(doc)
    print(md)
    if not args.no_write:
        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        stem = started.strftime("%Y-%m-%d") + "-" + (args.name or ("celery-quick" if args.quick else "celery"))
        (out / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
        (out / f"{stem}.md").write_text(md)
        print(f"wrote {out / stem}.json and .md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
