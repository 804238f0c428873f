"""A ``SPARK_HOME`` for a pip-installed PySpark whose Python processes import the installed
``pyspark`` (compiled once, cached ``.pyc``) instead of compiling ``pyspark.zip`` at every start.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) first on the ``PYTHONPATH`` of
every Python process it starts: the daemons and workers of the tasks and the driver-side
processes that plan a Python data source. A pip-installed PySpark ships that zip without
bytecode, and ``zipimport`` caches none, so each such process compiles the pyspark modules it
imports from source: ~0.55 s of CPU per daemon and 0.15-0.3 s per worker it forks (measured,
issue 28: ~1.4 s of a session's first ``spark.read.format("rocketmq")``, before the first task).
The zip holds the same files as the installed package, so a ``SPARK_HOME`` that mirrors the
installed one without the zips (symbolic links to everything else: ``bin``, ``jars``...) gives
the same code, compiled once.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
from pathlib import Path

logger = logging.getLogger("rocketmq_sdk.integrations.spark")

ZIPS_LEFT_OUT = ("pyspark.zip", "py4j-")
"""Entries of ``python/lib`` the mirror leaves out (by name or name prefix)."""


def _cache_root(cache_dir: str | os.PathLike[str] | None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "rocketmq-python-sdk"


def _build_mirror(real: Path, home: Path) -> None:
    """Fill ``home`` (new) with links to ``real``'s entries, ``python/lib`` without the zips."""
    tmp = home.with_name(f"{home.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "python" / "lib").mkdir(parents=True)
    for entry in real.iterdir():
        if entry.name != "python":
            (tmp / entry.name).symlink_to(entry)
    for entry in (real / "python").iterdir():
        if entry.name != "lib":
            (tmp / "python" / entry.name).symlink_to(entry)
    for entry in (real / "python" / "lib").iterdir():
        if not entry.name.startswith(ZIPS_LEFT_OUT):
            (tmp / "python" / "lib" / entry.name).symlink_to(entry)
    try:
        tmp.rename(home)  # atomic: a concurrent caller's identical mirror may have won
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


def use_installed_pyspark(cache_dir: str | os.PathLike[str] | None = None) -> str | None:
    """Point ``SPARK_HOME`` at a mirror of the pip-installed PySpark without ``pyspark.zip``
    (see the module docstring); call it before the first ``SparkSession`` of the process.

    Nothing changes (returns None) when ``SPARK_HOME`` is already set, not empty (a Spark distribution, or
    a choice made elsewhere), when PySpark is not a pip install with ``python/lib/pyspark.zip``,
    or when ``py4j`` is not installed beside it.

    Args:
        cache_dir: where the mirror (links only, a few KiB) is kept; default
            ``$XDG_CACHE_HOME/rocketmq-python-sdk`` (``~/.cache/...``). One mirror per PySpark
            install, reused by later processes.

    Returns:
        The ``SPARK_HOME`` now set, or None.

    Raises:
        OSError: the cache directory cannot be written.
    """
    if os.environ.get("SPARK_HOME"):
        return None
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin or importlib.util.find_spec("py4j") is None:
        return None
    real = Path(spec.origin).resolve().parent
    if not (real / "python" / "lib" / "pyspark.zip").is_file():
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("pyspark")
    except PackageNotFoundError:
        return None
    tag = hashlib.sha256(f"{real}|{release}".encode()).hexdigest()[:12]
    home = _cache_root(cache_dir) / f"spark-home-{tag}"
    if not home.is_dir():
        home.parent.mkdir(parents=True, exist_ok=True)
        _build_mirror(real, home)
    os.environ["SPARK_HOME"] = str(home)
    logger.debug("SPARK_HOME=%s (PySpark at %s, without pyspark.zip)", home, real)
    return str(home)
