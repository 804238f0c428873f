"""A dynamic AppCDS archive of the Spark driver JVM's classes, built by ``make install``.

The driver JVM loads and verifies ~20,000 classes at each start. ``make install`` runs the demo
once on a few thousand rows with ``-XX:ArchiveClassesAtExit`` (JDK 13+: the JVM writes the
classes it loaded to an archive at its exit, ~180 MB); every ``make demo``, the first included,
maps it (``-XX:SharedArchiveFile``): Spark's start 4.5-4.7 → 2.2-2.6 s and its first job
2.5-2.7 → 1.0 s on the project's 2-core VM (see
benchmarks/results/2026-11-28-1910-flights-demo-stream.md).

The archive depends only on the JVM, PySpark's jars and the JVM options, so it lives with the
environment it belongs to: ``.venv/spark-class-archive/`` (removed by ``make clean``); its name
holds a key of the java binary (path, modification time), PySpark (version, its jars'
modification time) and the options, so a changed Java or PySpark gets a new archive at the next
``make install`` (``python examples/flights_kit/class_archive.py build``). A missing archive, or
a file that is no JVM class archive, is not mapped (one INFO line; the demo runs without it:
the JVM would otherwise start without even its default class archive); one the JVM finds stale
(another class path) it ignores by itself.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("flights_demo.class_archive")

QUIET = "-Xlog:cds=off,cds+dynamic=off"
"""The JVM lists every class it cannot archive (hundreds of lines) and a stale archive: not shown."""

DYNAMIC_ARCHIVE_MAGIC = 0xF00BABA8
"""First 4 bytes of a HotSpot dynamic (top-layer) CDS archive, in the machine's byte order."""

BUILD_ROWS = 3000
"""Rows of the demo run that writes the archive: the class paths of the full run (CSV read,
window, Arrow, the data source's streaming read, ``write_dataframe``), in a few seconds."""

PREFIX = "spark-driver-"


def default_archive_dir() -> Path:
    """Where ``make install`` keeps the archive: ``spark-class-archive`` inside the virtual
    environment running this (``sys.prefix``), else ``$XDG_CACHE_HOME/rocketmq-flights-demo``
    (default ``~/.cache/rocketmq-flights-demo``)."""
    if sys.prefix != sys.base_prefix:
        return Path(sys.prefix) / "spark-class-archive"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rocketmq-flights-demo"


def is_class_archive(path: Path) -> bool:
    """Whether ``path`` starts as a HotSpot dynamic class archive does (a truncated or foreign
    file would make the JVM drop its default class archive too)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
    except OSError:
        return False
    return len(head) == 4 and int.from_bytes(head, sys.byteorder) == DYNAMIC_ARCHIVE_MAGIC


@dataclass(frozen=True)
class ClassArchive:
    """The archive file for one Java, PySpark and JVM option set; ``writing``: this run writes it."""

    path: Path
    writing: bool

    @property
    def jvm_options(self) -> str:
        """The driver JVM's options: map the archive, or write it (to a name of this process) at exit."""
        if self.writing:
            return f"-XX:ArchiveClassesAtExit={self._partial} {QUIET}"
        return f"-XX:SharedArchiveFile={self.path} {QUIET}"

    @property
    def _partial(self) -> Path:
        return self.path.with_name(f"{self.path.name}.{os.getpid()}.part")

    def finish(self, jvm: subprocess.Popen | None, timeout_s: float = 120.0) -> None:
        """After ``spark.stop()``: when this run writes the archive, end the JVM (``jvm``: its
        process, whose stdin closing ends it), wait for its dump and put the archive in place
        (an atomic rename: concurrent runs never map a half-written file), removing archives
        of other keys from the directory."""
        if not self.writing or jvm is None:
            return
        try:
            if jvm.stdin is not None:
                jvm.stdin.close()
            jvm.wait(timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("the Spark JVM did not exit in %.0f s (%s); its class archive is not kept", timeout_s, exc)
            return
        if not is_class_archive(self._partial):
            log.warning("the Spark JVM wrote no class archive (%s)", self._partial)
            self._partial.unlink(missing_ok=True)
            return
        os.replace(self._partial, self.path)
        for other in self.path.parent.glob(f"{PREFIX}*.jsa"):
            if other != self.path:
                other.unlink(missing_ok=True)
        log.info("wrote the Spark JVM's class archive %s", self.path)


def archive_path(archive_dir: Path, java: str, jvm_options: str) -> Path | None:
    """The archive's path for ``java`` (its path) with ``jvm_options``, or None when java or
    PySpark is not found. Reads file metadata only (no PySpark import: ``make install`` checks
    it each time)."""
    real = os.path.realpath(java)
    try:
        version = importlib.metadata.version("pyspark")
        jars = Path(str(importlib.metadata.distribution("pyspark").locate_file("pyspark/jars")))
        stamp = f"{real}|{os.stat(real).st_mtime_ns}|{version}|{jars.stat().st_mtime_ns}|{jvm_options}"
    except (OSError, importlib.metadata.PackageNotFoundError):
        return None
    key = hashlib.sha256(stamp.encode()).hexdigest()[:16]
    return archive_dir / f"{PREFIX}{version}-{key}.jsa"


def class_archive(archive_dir: Path, java: str, jvm_options: str, *, write: bool = False) -> ClassArchive | None:
    """The archive of ``java`` with ``jvm_options`` in ``archive_dir``: to map (None, with one
    INFO line, when there is none or the file is no class archive), or with ``write`` to write
    (``archive_dir`` created; None when it cannot be)."""
    path = archive_path(archive_dir, java, jvm_options)
    if path is None:
        log.info("no class archive for the Spark JVM (java or PySpark not found); Spark starts without one")
        return None
    if write:
        try:
            archive_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            log.warning("no class archive (%s)", exc)
            return None
        return ClassArchive(path, writing=True)
    if not path.exists():
        log.info("no class archive of the Spark JVM at %s (make install builds it); Spark starts without one", path)
        return None
    if not is_class_archive(path):
        log.info("%s is no JVM class archive: not used; Spark starts without one", path)
        return None
    log.info("the Spark JVM maps its class archive %s", path)
    return ClassArchive(path, writing=False)


def build(demo: Path, archive_dir: Path, java: str, jvm_options: str) -> int:
    """Write the archive unless it exists, by running ``demo`` on :data:`BUILD_ROWS` rows with
    ``--write-class-archive`` (its output in ``archive_dir/build.log``). Prints one line before
    and one after; never fails (returns 0): the demo runs without an archive."""
    path = archive_path(archive_dir, java, jvm_options)
    if path is None or not os.access(java, os.X_OK):
        print("spark class archive: skipped (no Java or no PySpark here); the demo starts Spark without one")
        return 0
    if is_class_archive(path):
        return 0
    try:
        archive_dir.mkdir(parents=True, exist_ok=True)
        build_log = (archive_dir / "build.log").open("w")
    except OSError as exc:
        print(f"spark class archive: skipped ({exc}); the demo starts Spark without one")
        return 0
    print(f"spark class archive: a {BUILD_ROWS:,}-row demo run writes the Spark JVM's classes to {path} "
          "(1-2 min, once; SPARK_CLASS_ARCHIVE=0 skips it)", flush=True)
    started = time.monotonic()
    with build_log:
        rc = subprocess.call([sys.executable, str(demo), "--rows", str(BUILD_ROWS), "--write-class-archive",
                              "--class-archive-dir", str(archive_dir)], stdout=build_log, stderr=build_log,
                             stdin=subprocess.DEVNULL, cwd=archive_dir)
    if rc == 0 and is_class_archive(path):
        print(f"spark class archive: {path.stat().st_size / 2**20:.0f} MB written in {time.monotonic() - started:.0f} s")
    else:
        print(f"spark class archive: not written (exit {rc}; see {archive_dir / 'build.log'}); "
              "the demo starts Spark without one")
    return 0


def main(argv: list[str]) -> int:
    """``class_archive.py build [--dir DIR]``: what ``make install`` runs."""
    import argparse

    from flights_kit.data import SHORT_JOB_JVM_OPTIONS, java_path

    p = argparse.ArgumentParser(description="build the Spark driver JVM's class archive of the flights demo")
    p.add_argument("command", choices=["build"])
    p.add_argument("--dir", type=Path, default=None, help="where to keep it (default: .venv/spark-class-archive)")
    args = p.parse_args(argv)
    demo = Path(__file__).resolve().parents[1] / "flights_demo.py"
    return build(demo, args.dir or default_archive_dir(), java_path() or "java", SHORT_JOB_JVM_OPTIONS)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main(sys.argv[1:]))
