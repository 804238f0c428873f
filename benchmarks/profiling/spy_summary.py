"""Summarise a ``py-spy record --format raw`` file (collapsed stacks) per process and thread.

Usage: ``python benchmarks/profiling/spy_summary.py FILE [--proc SUBSTR] [--top N] [--incl SUBSTR,...]``

Prints, for the processes whose command line contains ``--proc``: samples per thread, the
functions with the most self samples, and the inclusive share of the ``--incl`` frames
(substring match on ``function (file:line)`` without the line number). Collect with e.g.
``py-spy record --subprocesses -r 200 --format raw -o /tmp/x.txt -- .venv/bin/python
benchmarks/run.py --quick --flush ASYNC_FLUSH --clients sdk --scenarios consume --no-write``
(``--idle`` adds samples of waiting threads; leave it out to see CPU).
"""

from __future__ import annotations

import argparse
import collections
import re

_LINE = re.compile(r":\d+\)$")


def frame_name(f: str) -> str:
    return _LINE.sub(")", f)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--proc", default="")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--incl", default="")
    a = ap.parse_args()
    self_c: collections.Counter[str] = collections.Counter()
    incl_c: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    total = 0
    wanted = [s for s in a.incl.split(",") if s]
    for line in open(a.file, encoding="utf-8", errors="replace"):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        frames = stack.split(";")
        procs = [f for f in frames if f.startswith("process ")]
        if a.proc and not any(a.proc in p for p in procs[-1:]):
            continue
        frames = [f for f in frames if not f.startswith("process ")]
        cnt = int(n)
        total += cnt
        th = next((f for f in frames if f.startswith("thread ")), "")
        threads[th] += cnt
        frames = [frame_name(f) for f in frames if not f.startswith("thread ")]
        if frames:
            self_c[frames[-1]] += cnt
        seen = set()
        for f in frames:
            for w in wanted:
                if w in f and w not in seen:
                    seen.add(w)
                    incl_c[w] += cnt
    print(f"samples: {total}")
    for th, c in threads.most_common(10):
        print(f"  {c:6d} {100 * c / max(total, 1):5.1f}%  {th}")
    print("self:")
    for f, c in self_c.most_common(a.top):
        print(f"  {c:6d} {100 * c / max(total, 1):5.1f}%  {f}")
    if wanted:
        print("inclusive:")
        for w in wanted:
            print(f"  {incl_c[w]:6d} {100 * incl_c[w] / max(total, 1):5.1f}%  {w}")


if __name__ == "__main__":
    main()
