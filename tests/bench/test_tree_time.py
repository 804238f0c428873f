"""benchmarks/tree_time.py counts the CPU of processes that outlive their parent (the Spark JVM)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

TREE_TIME = Path(__file__).resolve().parents[2] / "benchmarks" / "tree_time.py"

# the parent exits at once; its orphaned child burns 0.5 s of CPU after that
ORPHAN = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
          "'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.5: pass'])")


def test_cpu_of_an_orphaned_grandchild_is_counted_and_the_status_kept():
    proc = subprocess.run([sys.executable, str(TREE_TIME), "--", sys.executable, "-c", ORPHAN + "; sys.exit(3)"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    m = re.search(r"TREE WALL ([\d.]+) s USER ([\d.]+) SYS ([\d.]+) CPU ([\d.]+) s LOAD", proc.stderr)
    assert m, proc.stderr
    assert float(m.group(4)) >= 0.5, proc.stderr  # /usr/bin/time would report only the parent's few ms
