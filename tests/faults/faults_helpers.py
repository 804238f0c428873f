"""The fault suite (``make faults``; its quick variant runs in ``make test``): crashes, a full
disk, idle and slow connections. Figures are printed; ``FAULTS_RECORD=1`` (set by ``make
faults``) also appends them to ``benchmarks/results/faults.jsonl``."""

from __future__ import annotations

import json
import os
import time

FULL = os.environ.get("FAULTS_FULL") == "1"
RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "benchmarks", "results", "faults.jsonl")


def record(name: str, **figures) -> None:
    """Print one scenario's figures; with FAULTS_RECORD=1 also append them to the results file."""
    line = {"scenario": name, "full": FULL, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **figures}
    print(f"\nFAULTS {json.dumps(line)}")
    if os.environ.get("FAULTS_RECORD") == "1":
        os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
        with open(RESULTS, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")


def kill_consumer_mid_run(script: str, namesrv: str, after_lines: int, cwd: str) -> tuple[set[str], float]:
    """Run ``python -c script namesrv`` (a consumer printing each consumed key on a line), SIGKILL
    it once it printed more than ``after_lines`` lines; returns (keys it printed, monotonic time
    of the kill). The child is killed on any error too."""
    import subprocess
    import sys
    import threading

    from tests.conftest import wait_until

    child = subprocess.Popen([sys.executable, "-c", script, namesrv], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, cwd=cwd)
    try:
        seen: list[str] = []
        reader = threading.Thread(target=lambda: seen.extend(line.strip() for line in child.stdout), daemon=True)
        reader.start()
        wait_until(lambda: len(seen) > after_lines, 60, "the consumer process consuming")
        child.kill()  # mid-batch: what it is consuming now was never acknowledged
        killed_at = time.monotonic()
        child.wait(10)
        reader.join(10)
        return {k for k in seen if k.startswith("k")}, killed_at
    finally:
        if child.poll() is None:
            child.kill()
