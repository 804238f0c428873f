"""A dynamic AppCDS archive of the Spark driver JVM's classes, kept between runs of the demo.

The driver JVM loads and verifies ~20,000 classes at each start. The first run writes the
classes it loaded to an archive (``-XX:ArchiveClassesAtExit``, JDK 13+); later runs map it
(``-XX:SharedArchiveFile``): Spark's start 4.5-4.7 → 2.2-2.6 s and its first job 2.5-2.7 → 1.0 s
on the project's 2-core VM (see benchmarks/results/2026-11-28-1910-flights-demo-stream.md).
An archive that no longer matches the JVM or the class path is ignored by the JVM (it starts
as without one); its name holds the Java, PySpark and option set it was written for.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("flights_demo.class_archive")

QUIET = "-Xlog:cds=off,cds+dynamic=off"
"""The JVM lists every class it cannot archive (hundreds of lines) and a stale archive: not shown."""


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/rocketmq-flights-demo`` (default ``~/.cache/rocketmq-flights-demo``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rocketmq-flights-demo"


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
        (an atomic rename: concurrent runs never map a half-written file)."""
        if not self.writing or jvm is None:
            return
        try:
            if jvm.stdin is not None:
                jvm.stdin.close()
            jvm.wait(timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("the Spark JVM did not exit in %.0f s (%s); its class archive is not kept", timeout_s, exc)
            return
        if self._partial.exists():
            os.replace(self._partial, self.path)
            log.info("wrote the Spark JVM's class archive %s (later runs start faster)", self.path)


def class_archive(cache_dir: Path, java: str, jvm_options: str) -> ClassArchive | None:
    """The archive of ``java`` (its path) with ``jvm_options`` in ``cache_dir`` (created), or
    None when the directory cannot be created."""
    import pyspark

    real = os.path.realpath(java)
    try:
        stamp = os.stat(real).st_mtime_ns
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.warning("no class archive (%s)", exc)
        return None
    key = hashlib.sha256(f"{real}|{stamp}|{pyspark.__version__}|{jvm_options}".encode()).hexdigest()[:16]
    path = cache_dir / f"spark-driver-{pyspark.__version__}-{key}.jsa"
    return ClassArchive(path, writing=not path.exists())
