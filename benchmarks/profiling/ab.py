"""Interleaved A/B of benchmark scenarios: variants differ in the code the client and/or the
broker run (a git revision of ``sdk/`` + ``broker-reference/``) or in attributes patched in the
client worker, and run alternately (A B B A ...) so machine load hits both alike.

Usage::

    python benchmarks/profiling/ab.py --scenario consume --count 20000 --rounds 3 \\
        --variant 'old:client=HEAD' --variant 'new'
    python benchmarks/profiling/ab.py --scenario sync1 --count 5000 \\
        --variant 'old:broker=HEAD,client=HEAD' --variant 'new'
    python benchmarks/profiling/ab.py --scenario consume --variant \\
        'fanout:patch={"rocketmq_sdk.consumer.consume_service:ConsumeMessageConcurrentlyService.fan_out_threshold_s": 0}'

A variant is ``name[:key=value,...]``: ``client=REV`` / ``broker=REV`` run that revision's code
(or a directory put on ``PYTHONPATH`` as it is)
(extracted with ``git archive`` into a temporary directory put first on ``PYTHONPATH``, with the
working tree's built C accelerators whose source is unchanged at REV and the others compiled in
the checkout; without a REV the working tree runs), ``arg.NAME=VALUE`` sets a worker argument (a string, e.g.
``arg.producer=thread`` runs a latency scenario's producer in the consumer's process),
``env.NAME=VALUE`` sets an environment variable of the client worker (e.g.
``env.ROCKETMQ_EVENT_LOOP=uvloop``; the brokers keep this process's environment),
``broker.NAME=VALUE`` a broker setting of that variant's cluster (an int when it parses as one,
e.g. ``broker.busy_poll_us=0``; on top of ``--broker-config``),
``patch=JSON`` (last key) sets attributes in the client worker (``_worker.apply_patches``). Every distinct broker code gets its own dev cluster (ASYNC_FLUSH
unless ``--flush``); scenarios are those of ``run.py`` (``sync1``, ``async``, ``consume``,
``latency5k``, ...). Prints one line per run and the per-variant medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # benchmarks/profiling, benchmarks

import run as suite  # noqa: E402  (benchmarks/run.py: scenario args, worker runner)


def parse_variant(text: str) -> dict:
    name, _, rest = text.partition(":")
    v = {"name": name, "client": None, "broker": None, "patch": {}, "args": {}, "env": {}, "bcfg": {}}
    while rest:
        key, _, val = rest.partition("=")
        if key == "patch":
            v["patch"] = json.loads(val)
            break
        val, _, rest = val.partition(",")
        if key.startswith("arg."):  # a worker argument, e.g. arg.producer=thread (latency)
            v["args"][key[4:]] = val
        elif key.startswith("env."):  # a client worker environment variable
            v["env"][key[4:]] = val
        elif key.startswith("broker."):  # a broker setting of this variant's cluster
            v["bcfg"][key[7:]] = int(val) if val.lstrip("-").isdigit() else val
        else:
            v[key] = val
    return v


def checkout(rev: str, tmp: Path) -> str:
    """``sdk/`` and ``broker-reference/`` of ``rev`` under ``tmp``; returns a PYTHONPATH entry.
    An existing directory is used as it is (it must hold ``rocketmq_sdk`` / ``rocketmq_broker``)."""
    if os.path.isdir(rev):
        return rev
    root = tmp / rev.replace("/", "_")
    if not root.exists():
        root.mkdir(parents=True)
        repo = HERE.parent.parent
        archive = subprocess.run(["git", "-C", str(repo), "archive", rev, "sdk", "broker-reference", "integrations"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
        py = root / "py"
        py.mkdir()
        (py / "rocketmq_sdk").symlink_to(root / "sdk")
        (py / "rocketmq_broker").symlink_to(root / "broker-reference")
        copy_extensions(repo, root)
    return str(root / "py")


def copy_extensions(repo: Path, root: Path) -> None:
    """Give the checkout at ``root`` its C accelerators (git archive has no built modules: without
    them the revision would run its pure-Python fallbacks and look slower than it is): the working
    tree's built module when its source is the same there, else one compiled in place from the
    checkout's source (as setup.py's build does; a C file of another revision, e.g. before the
    2026-11-26 split into one twin per module). Warns about any it cannot build."""
    for src in sorted(root.rglob("*.c")):
        rel = src.relative_to(root)
        built = sorted((repo / rel.parent).glob(rel.stem + ".*.so"))
        here = repo / rel
        headers_same = all((repo / h.relative_to(root)).exists()
                           and (repo / h.relative_to(root)).read_bytes() == h.read_bytes() for h in root.rglob("*.h"))
        if built and here.exists() and here.read_bytes() == src.read_bytes() and headers_same:
            for so in built:
                shutil.copy2(so, root / rel.parent / so.name)
        elif not build_extension(src):
            print(f"ab.py: {rel} could not be built: that revision runs its pure-Python fallback", file=sys.stderr)


def build_extension(src: Path) -> bool:
    """Compile ``src`` into the extension module beside it with this Python's compiler settings
    (sysconfig's CC, CFLAGS, CCSHARED, LDSHARED and -O2, as setuptools' build_ext); False on failure."""
    import shlex
    import sysconfig

    cv = sysconfig.get_config_var
    obj = src.with_suffix(".o")
    try:
        subprocess.run([*shlex.split(cv("CC")), *shlex.split(cv("CFLAGS")), *shlex.split(cv("CCSHARED")),
                        f"-I{cv('INCLUDEPY')}", "-O2", "-c", str(src), "-o", str(obj)], check=True, capture_output=True)
        subprocess.run([*shlex.split(cv("LDSHARED")), str(obj), "-o", str(src.with_name(src.stem + cv("EXT_SUFFIX")))],
                       check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return False
    finally:
        obj.unlink(missing_ok=True)
    return True


@contextmanager
def env_vars(values: dict[str, str]):
    """Set environment variables (inherited by the worker processes started meanwhile)."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, val in old.items():
            if val is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = val


@contextmanager
def env_path(path: str | None):
    old = os.environ.get("PYTHONPATH")
    if path:
        os.environ["PYTHONPATH"] = path + (os.pathsep + old if old else "")
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", required=True, help=f"one of {','.join(suite.SCENARIOS)}")
    ap.add_argument("--variant", action="append", required=True)
    ap.add_argument("--count", type=int, default=0, help="messages per run (default: the full plan's)")
    ap.add_argument("--seconds", type=float, default=0, help="measured phase limit (default: the plan's)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--flush", default="ASYNC_FLUSH")
    ap.add_argument("--broker-config", default="{}",
                    help='JSON broker settings, e.g. \'{"max_transfer_count_on_message_in_memory": 256}\'')
    args = ap.parse_args()
    variants = [parse_variant(v) for v in args.variant]
    tmp = Path(tempfile.mkdtemp(prefix="bench-ab-"))
    from rocketmq_broker.embedded import start_dev_cluster

    scen, base = suite.scenario_args(args.scenario, args.size, suite.plan(False))
    if args.count:
        base["max_count"] = args.count
    if args.seconds:
        base["max_seconds"] = args.seconds
    rows: dict[str, list[dict]] = {v["name"]: [] for v in variants}
    try:
        with ExitStack() as stack:
            clusters: dict[str, object] = {}
            for v in variants:
                v["cluster"] = json.dumps([v["broker"], v["bcfg"]], sort_keys=True)
                if v["cluster"] not in clusters:
                    with env_path(checkout(v["broker"], tmp) if v["broker"] else None):
                        clusters[v["cluster"]] = stack.enter_context(start_dev_cluster(broker_config={
                            "flush_disk_type": args.flush, "mapped_file_size_commit_log": 256 * 1024 * 1024,
                            **json.loads(args.broker_config), **v["bcfg"]}))
            backlog = {}
            if scen == "consume":  # one backlog per cluster; every run drains it with a new group
                for key, cl in clusters.items():
                    fill = suite.run_worker({"client": "sdk", "scenario": "batch", "namesrv": cl.namesrv_addr,
                                             "topic": "AbBacklog", "size": args.size, "threads": 1, "batch": 32,
                                             "inflight": 1, "max_count": base["max_count"], "max_seconds": 120,
                                             "rate": 0, "group": "ab_fill"}, cl._proc.pid, 180)
                    backlog[key] = fill.get("count") or base["max_count"]
            run_no = 0
            for r in range(args.rounds):
                order = variants if r % 2 == 0 else list(reversed(variants))
                for v in order:
                    run_no += 1
                    cl = clusters[v["cluster"]]
                    wargs = {"topic": f"Ab_{args.scenario}", **base, "client": "sdk", "namesrv": cl.namesrv_addr,
                             "group": f"ab_{run_no}", "patch": v["patch"], **v["args"]}
                    if scen == "consume":
                        wargs.update(topic="AbBacklog", max_count=backlog[v["cluster"]])
                    if scen == "latency":
                        wargs["topic"] = f"AbLat_{run_no}"
                    with env_path(checkout(v["client"], tmp) if v["client"] else None), env_vars(v["env"]):
                        res = suite.derive(suite.run_worker(wargs, cl._proc.pid, wargs["max_seconds"] + 60))
                    rows[v["name"]].append(res)
                    lat = res.get("latency_us") or {}
                    print(f"round {r + 1} {v['name']:<10} " + (
                        f"{res['msgs_per_s']:>9,.0f} msg/s  client {res['client_cpu_us_per_msg']:6.1f} µs/msg  "
                        f"broker {res['broker_cpu_us_per_msg']:6.1f} µs/msg"
                        + (f"  p50 {lat['p50'] / 1000:.2f} ms p99 {lat['p99'] / 1000:.2f} ms p99.9 {lat['p999'] / 1000:.2f} ms"
                           f" ({res.get('count')}/{res.get('sent')} received)" if lat else "")
                        if "msgs_per_s" in res else f"FAILED {res.get('error')} {res.get('stderr_tail', '')}"),
                        flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"medians ({args.scenario}, {args.size} B, {args.flush}, load {os.getloadavg()[0]:.1f}):")
    for name, rs in rows.items():
        ok = [r for r in rs if "msgs_per_s" in r]
        if not ok:
            print(f"  {name:<10} no result")
            continue

        def med(key: str, ok: list[dict] = ok) -> float:
            return statistics.median(r[key] for r in ok)

        lat = [r["latency_us"]["p99"] / 1000 for r in ok if r.get("latency_us")]
        print(f"  {name:<10} {med('msgs_per_s'):>9,.0f} msg/s  client {med('client_cpu_us_per_msg'):6.1f} µs/msg  "
              f"broker {med('broker_cpu_us_per_msg'):6.1f} µs/msg"
              + (f"  p99 {statistics.median(lat):.2f} ms" if lat else ""))


if __name__ == "__main__":
    main()
