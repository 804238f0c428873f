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


@pytest.mark.timeout(150)
def test_suite_measures_an_existing_cluster_through_namesrv(tmp_path: Path) -> None:
    """``run.py --namesrv ADDR``: no broker of its own; topics created through the AdminClient,
    the flush mode read from the broker, broker CPU recorded as not measured."""
    from rocketmq_broker.embedded import start_dev_cluster

    with start_dev_cluster(str(tmp_path / "store"), in_process=True,
                           broker_config={"flush_disk_type": "SYNC_FLUSH", "auto_create_topic_enable": False}) as c:
        proc = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--namesrv", c.namesrv_addr,
             "--scenarios", "sync1,consume", "--clients", "sdk", "--backlog", "2000", "--out-dir", str(tmp_path)],
            capture_output=True, text=True, timeout=140)
        assert proc.returncode == 0, proc.stderr[-2000:]
        created = c.broker.topics.table.get("Bench_S_100")
    (json_path,) = tmp_path.glob("*-quick.json")
    doc = json.loads(json_path.read_text())
    assert doc["broker"] == {"existing": c.namesrv_addr, "cluster": None}
    by_scenario = {r["scenario"]: r for r in doc["results"]}
    assert set(by_scenario) == {"sync1", "consume"}
    for r in by_scenario.values():
        assert r["flush"] == "SYNC_FLUSH" and "error" not in r, r
        assert r["count"] > 0 and r["msgs_per_s"] > 0 and r["broker_cpu_s"] is None
        assert "broker_cpu_us_per_msg" not in r
    assert by_scenario["consume"]["count"] >= 2000
    # auto-creation is off: the suite created its topics (4 queues) through the AdminClient
    assert created is not None and created.write_queue_nums == 4
    assert "an existing cluster at" in (tmp_path / json_path.name.replace(".json", ".md")).read_text()
