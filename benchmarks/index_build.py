"""CPU per record of the reference broker's IndexService alone: ``build_index`` (one record, as a
single send) or ``build_index_many`` (batches, as a batch send) for records with TAGS + UNIQ_KEY
(+ two KEYS items with ``--keys``), into a fresh index directory.

Usage: ``python benchmarks/index_build.py [--batch 32] [--count 64000] [--rounds 5] [--keys]
[--slots 50000] [--entries N]``. ``--batch 0`` calls ``build_index`` per record. The default
geometry is small (50,000 slots, just enough entries for the run: the slot table stays in the CPU
cache, and a warm-up of ``--warm`` records touches the pages first); the broker's default
5,000,000 / 20,000,000 adds page faults on the random slot writes. Prints one line per round and the median; which index twin ran (C or pure
Python, ``ROCKETMQ_PURE_PYTHON=1``) is in the line. Interleave C / pure-Python runs yourself.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from rocketmq_broker.store import index_file
from rocketmq_broker.store.index_file import IndexService
from rocketmq_sdk.protocol.msgid import create_uniq_id

TS0 = 1_764_000_000_000


def records(n: int, first_offset: int, keys: bool) -> list[tuple[str, int, int, int, dict[str, str]]]:
    out = []
    for i in range(n):
        props = {"TAGS": "TagA", "UNIQ_KEY": create_uniq_id(), "WAIT": "true"}
        if keys:
            props["KEYS"] = f"order-{first_offset + i} customer-{i % 97}"
        out.append(("BenchIndex", (first_offset + i) * 200, TS0 + first_offset + i, 0, props))
    return out


def run_round(args: argparse.Namespace) -> float:
    """µs of thread CPU per record for one round into a fresh directory."""
    with tempfile.TemporaryDirectory() as d:
        svc = IndexService(d, args.slots, args.entries)
        for r in records(args.warm, 0, args.keys):  # warm-up: touch the slot table / pages
            svc.build_index(*r)
        recs = records(args.count, args.warm, args.keys)
        build, batch = svc.build_index, args.batch
        t0 = time.thread_time()
        if batch:
            for i in range(0, len(recs), batch):
                svc.build_index_many(recs[i:i + batch])
        else:
            for r in recs:
                build(*r)
        cpu = time.thread_time() - t0
        svc.shutdown()
    return cpu / args.count * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32, help="records per build_index_many (0 = build_index)")
    ap.add_argument("--count", type=int, default=64000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--keys", action="store_true", help="two KEYS items per record besides UNIQ_KEY")
    ap.add_argument("--slots", type=int, default=50_000)
    ap.add_argument("--entries", type=int, default=0, help="index entries per file (0 = what the run needs)")
    ap.add_argument("--warm", type=int, default=50_000, help="records indexed before the timed part")
    args = ap.parse_args()
    needed = (args.count + args.warm) * (3 if args.keys else 1) + 1
    if args.entries == 0:
        args.entries = needed
    elif args.entries < needed:
        ap.error(f"--entries below {needed}: the run must fit one index file")
    twin = "C" if index_file._cindex_file is not None else "pure Python"
    res = [run_round(args) for _ in range(args.rounds)]
    for i, r in enumerate(res):
        print(f"round {i + 1}: {r:.3f} µs CPU per record")
    print(f"index twin={twin} batch={args.batch} keys={args.keys}: median {statistics.median(res):.3f} "
          f"({min(res):.3f}-{max(res):.3f}) µs CPU per record, {args.rounds} rounds")


if __name__ == "__main__":
    main()
