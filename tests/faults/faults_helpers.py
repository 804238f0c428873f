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
