"""Smoke test: the benchmark suite runs end to end (one tiny scenario per client) and reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(120)
def test_suite_runs_sync_send_for_both_clients(tmp_path: Path) -> None:
    pytest.importorskip("rocketmq_broker")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--flush", "ASYNC_FLUSH",
         "--scenarios", "sync1", "--out-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (json_path,) = tmp_path.glob("*-quick.json")
    doc = json.loads(json_path.read_text())
    assert doc["machine"]["cores"] >= 1 and doc["command"]
    by_client = {r["client"]: r for r in doc["results"]}
    assert set(by_client) == {"sdk", "cpp"}
    for r in by_client.values():
        assert "error" not in r, r
        assert r["count"] > 0 and r["msgs_per_s"] > 0 and r["client_cpu_s_per_100k"] > 0
    md = (tmp_path / json_path.name.replace(".json", ".md")).read_text()
    assert "| 100 B | sync1 |" in md
    assert doc["broker"] == {"busy_poll_us": 100}
    assert "busy polling up to 100 µs after each answer" in md
