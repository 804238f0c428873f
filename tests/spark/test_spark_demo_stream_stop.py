"""The flights demo's live streaming stop condition and its JVM class archive (no Spark session)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

from flights_kit.class_archive import ClassArchive, class_archive
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


def test_class_archive_is_written_once_and_put_in_place_after_the_jvm_exits(tmp_path):
    java = sys.executable  # any existing file: its path and mtime key the archive
    first = class_archive(tmp_path / "cache", java, "-XX:TieredStopAtLevel=1")
    assert first is not None and first.writing and "-XX:ArchiveClassesAtExit=" in first.jvm_options
    part = first.jvm_options.split("=", 1)[1].split()[0]
    assert Path(part).parent == first.path.parent and part != str(first.path)
    # a stand-in JVM: writes its archive at exit, once its stdin (the PySpark gateway's pipe) closes
    jvm = subprocess.Popen([sys.executable, "-c", f"import sys, pathlib; sys.stdin.read(); "
                            f"pathlib.Path({part!r}).write_bytes(b'jsa')"], stdin=subprocess.PIPE)
    assert not first.path.exists(), "never mapped before the dump ended"
    first.finish(jvm)
    assert first.path.read_bytes() == b"jsa" and not Path(part).exists()
    again = class_archive(tmp_path / "cache", java, "-XX:TieredStopAtLevel=1")
    assert again == ClassArchive(first.path, writing=False)
    assert again.jvm_options.startswith(f"-XX:SharedArchiveFile={first.path} ")
    other = class_archive(tmp_path / "cache", java, "")
    assert other is not None and other.writing and other.path != first.path, "other JVM options: another archive"
