"""Interleaved A/B of the store's C twins (``_cbatch_records``, ``_ccommit_log``) on the broker's send paths.

Each round runs ``broker_batch_path.py`` (SEND_BATCH_MESSAGE, ``--size`` messages of 100 B per
batch) or ``broker_send_path.py`` (single SEND_MESSAGE_V2) once per variant, each in a fresh
subprocess, variants interleaved; other C accelerators stay as built, so only these differ:

* ``before``: batches through the InnerMessage path (``CommitLog.encode_batch`` declines), records
  by the Python ``encode_record_py`` - what the broker did before the accelerator;
* ``py``: the batch fast path with the pure-Python twins (``batch_records.*_py``) and
  ``encode_record_py`` - the ``ROCKETMQ_PURE_PYTHON`` behaviour of the store;
* ``c``: the batch fast path and single records in C.

Usage: ``python benchmarks/profiling/cstore_ab.py [--bench batch|single] [--rounds 5] [--variants before,py,c]``;
prints per-round µs CPU per message and the median and range per variant.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(variant: str, bench: str, rest: list[str]) -> None:
    """Patch the store for ``variant``, then run the benchmark's main() with ``rest``."""
    sys.path[:0] = [str(HERE), str(HERE.parent)]
    from rocketmq_broker.store import batch_records, commit_log

    if variant in ("before", "py"):
        commit_log.encode_record = commit_log.encode_record_py
        commit_log.encode_batch = batch_records.encode_batch_py
        commit_log.finish_batch = batch_records.finish_batch_py
    if variant == "before":
        commit_log.CommitLog.encode_batch = lambda self, *a: None
    if variant == "c" and (commit_log._ccommit_log is None or batch_records._cbatch_records is None):
        raise SystemExit("the store's C twins are not built")
    module = __import__("broker_batch_path" if bench == "batch" else "broker_send_path")
    sys.argv = [module.__file__, *rest]
    module.main()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", choices=("batch", "single"), default="batch")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--variants", default="before,py,c")
    ap.add_argument("--size", type=int, default=32, help="messages per batch (batch)")
    ap.add_argument("--batches", type=int, default=2000, help="batches per round (batch)")
    ap.add_argument("--count", type=int, default=20000, help="sends per round (single)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args, rest = ap.parse_known_args()
    if args.child:
        child(args.child, args.bench, rest)
        return
    bench_args = (["--size", str(args.size), "--batches", str(args.batches)] if args.bench == "batch"
                  else ["--count", str(args.count), "--rounds", "1"])
    pattern = re.compile(r"([\d.]+) µs CPU per (message|send)")
    results: dict[str, list[float]] = {v: [] for v in args.variants.split(",")}
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for r in range(args.rounds):
        for variant in results:
            out = subprocess.run([sys.executable, __file__, "--bench", args.bench, "--child", variant, *bench_args],
                                 capture_output=True, text=True, check=True).stdout
            us = float(pattern.findall(out)[-1][0])
            results[variant].append(us)
            print(f"round {r + 1} {variant:7s} {us:6.2f} µs/msg", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    for variant, xs in results.items():
        print(f"{variant:7s} median {statistics.median(xs):.2f} µs/msg (range {min(xs):.2f}-{max(xs):.2f}, "
              f"{len(xs)} rounds)")


if __name__ == "__main__":
    main()
