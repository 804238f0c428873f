"""The flights demo's live streaming stop condition and its JVM class archive (no Spark session)."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

from flights_kit.class_archive import DYNAMIC_ARCHIVE_MAGIC, ClassArchive, archive_path, build, class_archive
from flights_kit.stream_listener import RowCounter


class _Query:
    def __init__(self) -> None:
        self.isActive = True
        self.awaited = 0

    def awaitTermination(self, timeout=None):  # noqa: N802 - Spark's name
        self.awaited += 1
        return True


def _progress(run: str, batch: int, rows: int) -> SimpleNamespace:
    return SimpleNamespace(progress=SimpleNamespace(runId=run, batchId=batch, numInputRows=rows, durationMs={}))


def test_row_counter_stops_when_committed_batches_hold_the_target():
    counter, query = RowCounter(10), _Query()
    counter.onQueryProgress(_progress("r1", 0, 4))
    counter.onQueryProgress(_progress("r1", 0, 4))  # the same batch reported twice counts once
    assert counter.wait(query, 0.05) is False, "8 of 10 rows: not yet"
    done = threading.Timer(0.05, counter.onQueryProgress, [_progress("r1", 1, 6)])
    done.start()
    assert counter.wait(query, 30.0) is True  # woken by the progress event, not by the deadline
    done.join()
    assert counter.rows() == 10 and counter.batch_rows() == [4, 6]


def test_row_counter_counts_a_resumed_run_apart_and_reports_a_query_that_ended():
    counter, query = RowCounter(10), _Query()
    counter.onQueryProgress(_progress("r1", 0, 3))
    counter.onQueryProgress(_progress("r2", 0, 0))  # resumed from the checkpoint: batch ids start again
    query.isActive = False
    counter.onQueryTerminated(SimpleNamespace())
    assert counter.wait(query, 30.0) is False and query.awaited == 1, "the query's own end (or failure) is raised"
    assert counter.batch_rows() == [3]


def test_row_counter_started_before_the_row_count_is_known_waits_for_it():
    counter, query = RowCounter(), _Query()  # the query starts while the flights still load
    counter.onQueryProgress(_progress("r1", 0, 0))
    counter.onQueryProgress(_progress("r1", 1, 5))
    assert counter.wait(query, 0.05) is False, "no target yet: not done, whatever was read"
    threading.Timer(0.05, counter.set_target, [5]).start()
    assert counter.wait(query, 30.0) is True
    assert counter.first_batch_at is not None and counter.batch_rows() == [5]


def _archive_bytes(payload: bytes = b"classes") -> bytes:
    return DYNAMIC_ARCHIVE_MAGIC.to_bytes(4, sys.byteorder) + payload


def test_class_archive_is_written_in_place_after_the_jvm_exits_and_then_mapped(tmp_path, caplog):
    caplog.set_level(logging.INFO, "flights_demo.class_archive")
    java = sys.executable  # any existing file: its path and mtime key the archive
    cache = tmp_path / "cache"
    assert class_archive(cache, java, "-XX:TieredStopAtLevel=1") is None, "none built yet: nothing to map"
    assert "make install builds it" in caplog.text
    first = class_archive(cache, java, "-XX:TieredStopAtLevel=1", write=True)
    assert first is not None and first.writing and "-XX:ArchiveClassesAtExit=" in first.jvm_options
    part = first.jvm_options.split("=", 1)[1].split()[0]
    assert Path(part).parent == first.path.parent and part != str(first.path)
    older = cache / "spark-driver-0.0.0-0123456789abcdef.jsa"  # another Java's or PySpark's archive
    older.write_bytes(_archive_bytes())
    # a stand-in JVM: writes its archive at exit, once its stdin (the PySpark gateway's pipe) closes
    jvm = subprocess.Popen([sys.executable, "-c", f"import sys, pathlib; sys.stdin.read(); "
                            f"pathlib.Path({part!r}).write_bytes({_archive_bytes()!r})"], stdin=subprocess.PIPE)
    assert not first.path.exists(), "never mapped before the dump ended"
    first.finish(jvm)
    assert first.path.read_bytes() == _archive_bytes() and not Path(part).exists()
    assert not older.exists(), "an archive of another key is removed when a new one is written"
    again = class_archive(cache, java, "-XX:TieredStopAtLevel=1")
    assert again == ClassArchive(first.path, writing=False)
    assert again.jvm_options.startswith(f"-XX:SharedArchiveFile={first.path} ")
    assert class_archive(cache, java, "") is None, "other JVM options: another archive (not built)"


def test_a_file_that_is_no_class_archive_is_not_mapped(tmp_path, caplog):
    caplog.set_level(logging.INFO, "flights_demo.class_archive")
    path = archive_path(tmp_path, sys.executable, "")
    assert path is not None
    for junk in (b"", b"\xf0\x0b", b"PK\x03\x04" + bytes(100), (0xF00BABA2).to_bytes(4, sys.byteorder)):
        path.write_bytes(junk)  # empty, truncated, a zip, a static (base) archive
        assert class_archive(tmp_path, sys.executable, "") is None, junk
    assert "is no JVM class archive: not used" in caplog.text
    path.write_bytes(_archive_bytes())
    assert class_archive(tmp_path, sys.executable, "") == ClassArchive(path, writing=False)


def test_a_jvm_that_wrote_nothing_leaves_no_archive(tmp_path):
    archive = class_archive(tmp_path, sys.executable, "", write=True)
    assert archive is not None
    part = Path(archive.jvm_options.split("=", 1)[1].split()[0])
    jvm = subprocess.Popen([sys.executable, "-c", f"import sys, pathlib; sys.stdin.read(); "
                            f"pathlib.Path({str(part)!r}).write_bytes(b'half')"], stdin=subprocess.PIPE)
    archive.finish(jvm)
    assert list(tmp_path.iterdir()) == [], "a partial dump is neither kept nor put in place"


def test_the_install_step_does_nothing_when_the_archive_exists(tmp_path, capsys):
    path = archive_path(tmp_path, sys.executable, "")
    assert path is not None
    path.write_bytes(_archive_bytes())
    demo = tmp_path / "no-demo.py"  # would fail if it were run
    assert build(demo, tmp_path, sys.executable, "") == 0
    assert capsys.readouterr().out == "" and not (tmp_path / "build.log").exists()


def test_the_install_step_never_fails_the_install(tmp_path, capsys):
    failing = tmp_path / "failing_demo.py"
    failing.write_text("import sys; print('no Spark here'); sys.exit(3)\n")
    assert build(failing, tmp_path / "archive", sys.executable, "") == 0
    out = capsys.readouterr().out
    assert "not written (exit 3; see" in out and "the demo starts Spark without one" in out
    assert "no Spark here" in (tmp_path / "archive" / "build.log").read_text()
    assert build(failing, tmp_path / "archive", str(tmp_path / "no-java"), "") == 0
    assert "skipped (no Java or no PySpark here)" in capsys.readouterr().out
