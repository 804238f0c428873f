"""Interleaved A/B of ``client_send_path.py`` (the producer's SDK work per message against a fake
socket/transport): each variant's code (a git revision or a directory, as ``ab.py``'s
``client=``) runs the current tree's script alternately (A B B A ...); prints every run and, per
variant and mode, the min and median of the runs' µs CPU per message.

Usage::

    python benchmarks/profiling/ab_send_path.py --variant base=6203fcc --variant new=HEAD \\
        [--modes sync,async,oneway,batch] [--count 8000] [--runs 6]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # benchmarks/profiling, benchmarks

from ab import checkout, env_path  # noqa: E402 - benchmarks/profiling/ab.py

_LINE = re.compile(r"round \d+ (\w+)\s+([\d.]+) µs CPU/msg")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", action="append", required=True, help="name=REV or name=DIR")
    ap.add_argument("--modes", default="sync,async,oneway,batch")
    ap.add_argument("--count", type=int, default=8000)
    ap.add_argument("--runs", type=int, default=6, help="runs per variant (each one round)")
    args = ap.parse_args()
    variants = [v.partition("=")[::2] for v in args.variant]
    tmp = Path(tempfile.mkdtemp(prefix="bench-sendpath-"))
    results: dict[str, dict[str, list[float]]] = {name: {} for name, _ in variants}
    try:
        for r in range(args.runs):
            for name, rev in (variants if r % 2 == 0 else list(reversed(variants))):
                with env_path(checkout(rev, tmp)):
                    out = subprocess.run([sys.executable, str(HERE / "client_send_path.py"), "--count",
                                          str(args.count), "--modes", args.modes, "--rounds", "1"],
                                         capture_output=True, text=True, timeout=600).stdout
                for mode, us in _LINE.findall(out):
                    results[name].setdefault(mode, []).append(float(us))
                print(f"run {r + 1} {name:<8} " + "  ".join(f"{m} {results[name].get(m, [0])[-1]:6.2f}"
                                                          for m in args.modes.split(",")), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"µs CPU/msg, min / median of {args.runs} runs (load {os.getloadavg()[0]:.1f}):")
    for name, modes in results.items():
        print(f"  {name:<8} " + "  ".join(f"{m} {min(v):6.2f} / {statistics.median(v):6.2f}"
                                          for m, v in modes.items()))


if __name__ == "__main__":
    main()
