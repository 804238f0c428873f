"""Where the CPU of one Celery task goes, per process, on rocketmq:// and on Redis (issue 26).

Runs ``celery_tasks.py``'s worker (``-P prefork -c N``, no-op task) and sends N tasks as fast as
possible while it runs, then prints the CPU seconds per task (µs) of each process: the producer
(this process: ``apply_async``), the broker (the reference broker's child process / redis-server),
the worker's main process and its pool processes. With ``--profile-worker FILE`` the worker's
main process runs under cProfile (its main thread's CPU time) and writes FILE.<broker> at its
(warm) shutdown; ``--profile-producer FILE`` profiles the ``apply_async`` loop the same way;
``--profile-broker FILE`` runs the reference broker (``python -m rocketmq_broker dev``) under
cProfile (its loop thread's CPU time; FILE written at its SIGTERM stop). The broker's CPU is
split into user and system time. The
worker's busiest threads are listed with their CPU per task; with ``PY_SPY=/path/to/py-spy`` in
the environment each is named by its current frame (``py-spy dump``).

    .venv/bin/python benchmarks/profiling/celery_cpu_split.py [--tasks 3000] [--brokers rocketmq,redis]
        [--concurrency 2] [--profile-worker /tmp/worker.prof] [--profile-producer /tmp/producer.prof]
        [--profile-broker /tmp/broker.prof] [--broker-path DIR]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))
from celery_tasks import (  # noqa: E402 - benchmarks/celery_tasks.py helpers
    RedisServer,
    app_for,
    executed,
    make_env,
    stop_worker,
    wait_for,
)
from harness import proc_cpu_s  # noqa: E402


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def cpu(pids: list[int]) -> float:
    total = 0.0
    for p in pids:
        try:
            total += proc_cpu_s(p)
        except OSError:
            pass
    return total


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each thread of ``pid`` (/proc)."""
    out = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (t / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(t.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def thread_names(pid: int) -> dict[int, str]:
    """Thread id -> innermost-but-one frame of ``py-spy dump`` (when $PY_SPY names py-spy)."""
    spy = os.environ.get("PY_SPY")
    if not spy:
        return {}
    out = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True).stdout
    names, tid = {}, None
    for line in out.splitlines():
        m = re.match(r"Thread (0x[0-9A-Fa-f]+|\d+) ", line)
        if m:
            tid = int(m.group(1), 0)
            names[tid] = line.strip()[:40]
        elif tid is not None and line.startswith("    ") and "threading.py" not in line:
            names[tid] = line.strip()[:70]
            tid = None
    return names


def minor_faults(pids: list[int]) -> int:
    """Minor page faults of ``pids`` so far (/proc: first touches of mapped pages)."""
    total = 0
    for p in pids:
        try:
            total += int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[7])
        except OSError:
            continue
    return total


def user_sys(pids: list[int]) -> tuple[float, float]:
    """(utime, stime) of ``pids`` in seconds."""
    u = s = 0.0
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        u += int(fields[11]) / os.sysconf("SC_CLK_TCK")
        s += int(fields[12]) / os.sysconf("SC_CLK_TCK")
    return u, s


def thread_name(tid: int) -> str:
    try:
        return Path(f"/proc/{tid}/comm").read_text().strip()
    except OSError:
        return "?"


def self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def run(label: str, url: str, broker_pids: list[int], n: int, conc: int, workdir: Path,
        profile_worker: str | None, profile_producer: str | None) -> None:
    mark = workdir / f"{label}-{time.monotonic_ns()}.mark"
    env = make_env(url, mark, {})
    app = app_for(env)
    noop = app.tasks["bench.noop"]
    with app.producer_or_acquire() as producer:
        noop.apply_async(producer=producer)
    cmd = [sys.executable]
    if profile_worker:
        # the main thread's CPU time (thread_time), written at the worker's warm shutdown
        cmd += ["-c", "import cProfile, runpy, sys, time\n"
                "p = cProfile.Profile(time.thread_time)\n"
                "sys.argv = ['celery'] + sys.argv[1:]\n"
                "p.enable()\n"
                "try:\n    runpy.run_module('celery', run_name='__main__')\n"
                f"finally:\n    p.disable()\n    p.dump_stats({profile_worker + '.' + label!r})\n"]
    else:
        cmd += ["-m", "celery"]
    cmd += [ "-A", "celery_bench_app", "worker", "-P", "prefork", "-c", str(conc),
            "-n", f"split-{label}@localhost", "--loglevel=WARNING", "--without-gossip", "--without-mingle"]
    with open(workdir / f"{label}.log", "ab") as out:
        worker = subprocess.Popen(cmd, cwd=HERE, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: executed(mark) >= 1, 120, f"the {label} worker")
        pool = children(worker.pid)
        names = thread_names(worker.pid)
        threads0 = thread_cpu(worker.pid)
        broker0 = user_sys(broker_pids)
        faults0 = minor_faults(broker_pids)
        bthreads0 = {t: v for p in broker_pids for t, v in thread_cpu(p).items()}
        before = (self_cpu(), cpu(broker_pids), cpu([worker.pid]), cpu(pool))
        prof = cProfile.Profile(time.thread_time) if profile_producer else None
        t0 = time.perf_counter()
        with app.producer_or_acquire() as producer:
            if prof:
                prof.enable()
            for _ in range(n):
                noop.apply_async(producer=producer)
            if prof:
                prof.disable()
            t_enq = time.perf_counter() - t0
            wait_for(lambda: executed(mark) >= n + 1, 300, f"{n} tasks on {label}")
        elapsed = time.perf_counter() - t0
        after = (self_cpu(), cpu(broker_pids), cpu([worker.pid]), cpu(pool))
        broker1 = user_sys(broker_pids)
        faults1 = minor_faults(broker_pids)
        bthreads1 = {t: v for p in broker_pids for t, v in thread_cpu(p).items()}
        threads1 = thread_cpu(worker.pid)
        per_thread = sorted(((1e6 * (v - threads0.get(t, 0.0)) / n, t) for t, v in threads1.items()), reverse=True)
        if prof:
            prof.dump_stats(f"{profile_producer}.{label}")
        us = [1e6 * (a - b) / n for a, b in zip(after, before, strict=True)]
        print(f"{label:9} -c {conc}: end-to-end {n / elapsed:7,.0f}/s (enqueue {n / t_enq:7,.0f}/s)  CPU µs/task: "
              f"producer {us[0]:6.0f}  broker {us[1]:6.0f}  worker main {us[2]:6.0f}  pool {us[3]:6.0f}  "
              f"total {sum(us):6.0f}  load {os.getloadavg()[0]:.1f}  (broker user {1e6 * (broker1[0] - broker0[0]) / n:.0f}"
              f" sys {1e6 * (broker1[1] - broker0[1]) / n:.0f}, {(faults1 - faults0) / n:.2f} page faults)", flush=True)
        for us_t, tid in per_thread[:5]:
            print(f"    worker thread {tid}: {us_t:6.0f} µs/task  {names.get(tid, '')}", flush=True)
        for tid, v in sorted(bthreads1.items()):
            us_t = 1e6 * (v - bthreads0.get(tid, 0.0)) / n
            if us_t >= 1:
                print(f"    broker thread {tid} ({thread_name(tid)}): {us_t:6.0f} µs/task", flush=True)
    finally:
        stop_worker(worker)
        app.close()


def profiled_dev_cluster(workdir: Path, out: str):  # noqa: ANN201 - a DevCluster
    """``start_dev_cluster()``'s child process, under ``python -m cProfile -o out``."""
    from rocketmq_broker.embedded import DevCluster, read_announcements
    store = workdir / "store"
    # the loop thread's CPU time (thread_time: a wall clock would count the waits of a loaded machine)
    code = ("import cProfile, runpy, sys, time\n"
            "p = cProfile.Profile(time.thread_time)\n"
            "sys.argv = ['rocketmq_broker'] + sys.argv[1:]\n"
            "p.enable()\n"
            "try:\n    runpy.run_module('rocketmq_broker', run_name='__main__')\n"
            f"except SystemExit:\n    pass\nfinally:\n    p.disable()\n    p.dump_stats({out!r})\n")
    cmd = [sys.executable, "-c", code, "dev", "--store-dir", str(store), "--namesrv-port", "0", "--broker-port", "0"]
    with open(workdir / "broker.log", "ab") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True)
    cluster = DevCluster(store_dir=str(store), _proc=proc, _owns_store=False)
    lines = read_announcements(proc, 60)
    cluster.namesrv_addr, cluster.broker_addr = lines["NAMESRV"], lines["BROKER"]
    return cluster


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=3000)
    ap.add_argument("--brokers", default="rocketmq,redis")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--profile-worker", default=None)
    ap.add_argument("--profile-producer", default=None)
    ap.add_argument("--profile-broker", default=None)
    ap.add_argument("--broker-path", default=None,
                    help="PYTHONPATH entry put first for the reference broker's process only (A/B of broker "
                         "code: e.g. ab.py's checkout of another revision's sdk/ and broker-reference/)")
    args = ap.parse_args()
    import rocketmq_sdk.integrations.celery  # noqa: F401
    from rocketmq_broker.embedded import start_dev_cluster
    with tempfile.TemporaryDirectory(prefix="celery-split-") as tmp:
        workdir = Path(tmp)
        cluster = redis = None
        brokers = {}
        try:
            if "rocketmq" in args.brokers and args.profile_broker:
                cluster = profiled_dev_cluster(workdir, args.profile_broker)
            elif "rocketmq" in args.brokers:
                old = os.environ.get("PYTHONPATH")
                if args.broker_path:
                    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (args.broker_path, old) if p)
                try:
                    cluster = start_dev_cluster()
                finally:
                    if old is None:
                        os.environ.pop("PYTHONPATH", None)
                    else:
                        os.environ["PYTHONPATH"] = old
            if cluster is not None:
                pids = [p.pid for p in (cluster._proc, cluster._namesrv_proc) if p is not None]
                brokers["rocketmq"] = (f"rocketmq://{cluster.namesrv_addr}", pids)
            if "redis" in args.brokers:
                redis = RedisServer(workdir)
                brokers["redis"] = (redis.url, [redis.proc.pid])
            for _ in range(args.rounds):
                for label, (url, pids) in brokers.items():
                    run(label, url, pids, args.tasks, args.concurrency, workdir, args.profile_worker,
                        args.profile_producer)
        finally:
            if cluster is not None:
                cluster.stop()
            if redis is not None:
                redis.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
