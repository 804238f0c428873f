"""Wall time and CPU time of a command *and every process it starts* (``/usr/bin/time`` misses
the Spark JVM and its Python workers: the driver never waits for them, so their CPU never
reaches it).

    python benchmarks/tree_time.py -- .venv/bin/python examples/flights_demo.py

This process becomes a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``): descendants that
outlive their parent are re-parented to it and reaped here, so their CPU time (and that of the
children they reaped) lands in this process's ``RUSAGE_CHILDREN``. Prints one line to stderr:
``TREE WALL s USER s SYS s CPU s LOAD before -> after`` (1-minute load average), and exits with
the command's status. Linux only.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
ORPHAN_DEADLINE_S = 60.0
"""How long to wait for descendants still running after the command ended."""


def _load() -> str:
    with open("/proc/loadavg") as fh:
        return fh.read().split()[0]


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: tree_time.py -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
    load_before = _load()
    started = time.monotonic()
    rc = subprocess.call(argv)
    wall = time.monotonic() - started
    deadline = time.monotonic() + ORPHAN_DEADLINE_S
    while time.monotonic() < deadline:  # reap re-parented descendants (the JVM exits after the driver)
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.2)  # polling for exits of processes that are not our own children's
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"TREE WALL {wall:.2f} s USER {usage.ru_utime:.2f} SYS {usage.ru_stime:.2f} "
          f"CPU {usage.ru_utime + usage.ru_stime:.2f} s LOAD {load_before} -> {_load()}", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
