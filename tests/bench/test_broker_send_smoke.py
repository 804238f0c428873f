"""Smoke test: benchmarks/broker_send.py drives a broker and reports checked throughput."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(120)
def test_broker_send_benchmark_runs_and_reports(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "broker_send.py"), "--quick", "--flush", "ASYNC_FLUSH",
         "--seconds", "0.3", "--warmup", "0.1", "--connections", "2", "--out-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (json_path,) = tmp_path.glob("*-broker-quick.json")
    doc = json.loads(json_path.read_text())
    assert [(r["size"], r["mode"]) for r in doc["results"]] == [(100, "single"), (100, "batch32")]
    for r in doc["results"]:
        assert "error" not in r, r
        assert r["count"] > 0 and r["msgs_per_s"] > 0 and r["broker_cpu_us_per_msg"] > 0
        assert r["payload_mb_per_s"] == pytest.approx(r["msgs_per_s"] * 100 / 1e6)
    assert "| ASYNC_FLUSH | 100 B | batch32 |" in json_path.with_suffix(".md").read_text()
