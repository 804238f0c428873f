"""The consume scenario's backlog: sized to the free disk, filled, and drained by both clients."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import backlog  # noqa: E402 - benchmarks/backlog.py

GB = 10**9


def fake_disk(monkeypatch: pytest.MonkeyPatch, total: int, free: int) -> None:
    monkeypatch.setattr(backlog.shutil, "disk_usage",
                        lambda _path: shutil._ntuple_diskusage(total, total - free, free))


def test_backlog_is_kept_when_the_disk_has_room(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_disk(monkeypatch, total=250 * GB, free=80 * GB)  # 16.7 GB + 25 GB margin fit
    assert backlog.sized_backlog(1_000_000, 16384, tmp_path) == (1_000_000, None)


def test_backlog_is_cut_to_leave_the_margin_free(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_disk(monkeypatch, total=100 * GB, free=20 * GB)  # margin: 10 GiB (> 10 % of 100 GB)
    count, reason = backlog.sized_backlog(1_000_000, 16384, tmp_path)
    margin = 10 * 1024**3
    assert 0 < count < 1_000_000 and count % 1000 == 0
    assert count * backlog.bytes_per_message(16384) <= 20 * GB - margin
    assert (count + 1000) * backlog.bytes_per_message(16384) > 20 * GB - margin
    assert "20.0 GB is free" in reason and f"reduced to {count:,}" in reason


def test_no_backlog_when_the_disk_is_nearly_full(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_disk(monkeypatch, total=100 * GB, free=5 * GB)
    count, reason = backlog.sized_backlog(1_000_000, 100, tmp_path)
    assert count == 0 and reason


@pytest.mark.timeout(120)
def test_consume_scenario_drains_the_filled_backlog_with_both_clients(tmp_path: Path) -> None:
    pytest.importorskip("rocketmq_broker")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--flush", "ASYNC_FLUSH",
         "--scenarios", "consume", "--backlog", "3000", "--out-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "estimated duration" in proc.stderr
    (json_path,) = tmp_path.glob("*-quick.json")
    doc = json.loads(json_path.read_text())
    (fill,) = doc["backlogs"]
    assert "error" not in fill and "reduced" not in fill
    assert 3000 <= fill["count"] <= 3300  # the filler stops each connection at its share
    by_client = {r["client"]: r for r in doc["results"]}
    assert set(by_client) == {"sdk", "cpp"}
    for r in by_client.values():
        assert "error" not in r, r
        assert r["count"] == fill["count"] and r["msgs_per_s"] > 0  # the whole backlog, from the first offset
    assert "consume backlog 100 B (ASYNC_FLUSH): 3," in json_path.with_suffix(".md").read_text()
