"""Interleaved A/B of the reference broker's send path: ``broker_send.py`` cases run alternately
(A B B A ...) with the working tree and with a git revision's ``sdk/`` + ``broker-reference/``
(extracted by ``ab.py``'s ``checkout`` and put first on ``PYTHONPATH``, so the broker subprocess
and the load generator both run that code), so machine load hits both variants alike.

Usage: ``python benchmarks/profiling/broker_ab.py --base HEAD [--flush ASYNC_FLUSH] [--modes single,batch32]
[--rounds 2] [--seconds 2]``. Prints each run and the per-variant medians of broker CPU µs/msg
and msg/s. ``--in-process "ARGS"`` instead alternates ``broker_send_path.py ARGS`` (or
``broker_batch_path.py`` when ARGS start with ``batch``), which print µs of CPU per message
without sockets (less noise from the machine's other load).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # benchmarks/profiling, benchmarks

from ab import checkout, env_path  # noqa: E402


def run_once(pythonpath: str | None, args, out_dir: Path) -> list[dict]:
    cmd = [sys.executable, str(HERE.parent / "broker_send.py"), "--flush", args.flush, "--modes", args.modes,
           "--sizes", args.sizes, "--seconds", str(args.seconds), "--warmup", str(args.warmup),
           "--out-dir", str(out_dir)]
    for f in out_dir.glob("*.json"):
        f.unlink()
    with env_path(pythonpath):
        subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL)
    files = list(out_dir.glob("*.json"))
    return json.loads(files[0].read_text())["results"] if files else []


def run_in_process(pythonpath: str | None, spec: str) -> list[float]:
    words = shlex.split(spec)
    script = "broker_send_path.py"
    if words and words[0] == "batch":
        script, words = "broker_batch_path.py", words[1:]
    with env_path(pythonpath):
        out = subprocess.run([sys.executable, str(HERE / script), *words], check=False, capture_output=True,
                             text=True).stdout
    return [float(m) for m in re.findall(r"([0-9.]+) µs CPU per", out)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD", help="git revision of the A variant (B = working tree)")
    ap.add_argument("--flush", default="ASYNC_FLUSH")
    ap.add_argument("--modes", default="single,batch32")
    ap.add_argument("--sizes", default="100")
    ap.add_argument("--rounds", type=int, default=2, help="each variant runs 2×rounds times (A B B A ...)")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--warmup", type=float, default=0.5)
    ap.add_argument("--in-process", default=None, metavar="ARGS",
                    help='e.g. "--count 10000 --rounds 2 --per-read 32" or "batch --batches 200 --size 32"')
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base_path = checkout(args.base, Path(tmp))
        order = []
        for _ in range(args.rounds):
            order += [("base", base_path), ("new", None), ("new", None), ("base", base_path)]
        if args.in_process is not None:
            got: dict[str, list[float]] = {}
            for name, path in order:
                vals = run_in_process(path, args.in_process)
                got.setdefault(name, []).extend(vals)
                print(f"{name:<5} {' '.join(f'{v:.2f}' for v in vals)} µs CPU per message", flush=True)
            for name, vals in got.items():
                print(f"median {name:<5} {statistics.median(vals):.2f} µs/msg (n={len(vals)})")
            return
        rows: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for name, path in order:
            out = Path(tmp) / f"out-{name}"
            out.mkdir(exist_ok=True)
            for r in run_once(path, args, out):
                key = (name, f"{r['flush']} {r['size']} B {r['mode']}")
                if "msgs_per_s" not in r:
                    print(f"{name:<5} {key[1]}: FAILED {r.get('error')}", flush=True)
                    continue
                rows.setdefault(key, []).append((r["broker_cpu_us_per_msg"], r["msgs_per_s"]))
                print(f"{name:<5} {key[1]:<28} {r['broker_cpu_us_per_msg']:7.1f} µs/msg {r['msgs_per_s']:>9,.0f} "
                      f"msg/s  {r['broker_cores']:.2f} cores", flush=True)
        print("\nmedians:")
        for (name, case), vals in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            print(f"  {case:<28} {name:<5} {statistics.median(v[0] for v in vals):7.1f} µs/msg "
                  f"{statistics.median(v[1] for v in vals):>9,.0f} msg/s  (n={len(vals)})")


if __name__ == "__main__":
    main()
