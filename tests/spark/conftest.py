"""Fixtures of the Spark integration tests; puts ``examples/`` on ``sys.path`` for the demo kit.

The SDK's log records of Spark's Python processes (workers, streaming source runners) go to
``<pytest's basetemp>/spark-python.log`` (``ROCKETMQ_SPARK_LOG_FILE``, set before the first
Spark session starts the JVM, whose environment they inherit); a failed Spark test's report
shows the end of that file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))


import pytest  # noqa: E402

LOG_FILE_ENV = "ROCKETMQ_SPARK_LOG_FILE"
LOG_TAIL_LINES = 80


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    path = os.environ.get(LOG_FILE_ENV)
    if report.failed and path and "spark" in item.fixturenames and os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as fh:
            tail = fh.readlines()[-LOG_TAIL_LINES:]
        report.sections.append((f"Spark's Python processes ({path}, last {len(tail)} lines)", "".join(tail)))


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    """A quiet ``local[2]`` Spark session for one test module (skips without PySpark/Java)."""
    pytest.importorskip("pyspark")
    import shutil

    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        pytest.skip("Spark needs a Java runtime")
    from flights_kit.data import build_spark

    os.environ.setdefault(LOG_FILE_ENV, str(tmp_path_factory.getbasetemp() / "spark-python.log"))
    session = build_spark(tmp_path_factory.mktemp("spark"), app_name="rocketmq-spark-tests", shuffle_partitions=4)
    yield session
    session.stop()
